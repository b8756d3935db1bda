// `ringlab run`: compile a schedule into a plan, check it, run it on the simulator (or cost it
// with --dry-run), and verify every output against exact attention in float64 — the run pipeline
// (sim/pipeline/pipeline.hpp) with the sim executor, or the dry executor for --dry-run.
#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>

#include "cli/ringlab/commands.hpp"
#include "executors/sim/sim_executor.hpp"
#include "reference/error.hpp"
#include "sim/pipeline/config.hpp"
#include "sim/pipeline/pipeline.hpp"

namespace ringlab::cli {
namespace {

int run(RunConfig& config, bool accumulate_given) {
  if (accumulate_given && config.precision == "fp32") {
    std::cerr << "ringlab: note: --accumulate " << config.accumulate
              << " changes nothing with --precision fp32 (the storage precision is fp32 already)\n";
  }
  if (config.dry_run) return run_dry(config);
  SimExecutor sim;
  return run_pipeline(config, sim, std::cout, std::cerr);
}

}  // namespace

void add_sim_commands(CLI::App& app, Registry& registry) {
  auto config = std::make_shared<RunConfig>();
  CLI::App* command = app.add_subcommand("run", "run one schedule and verify it against exact attention");
  add_run_flags(*command, *config);
  registry.add(command, [config, command] {
    if (command->count("--hw") > 0 && !config->dry_run) {
      throw UsageError("--hw " + config->hw +
                       " applies to --dry-run and compare (the cost model); the simulator runs on this machine: add "
                       "--dry-run or drop --hw");
    }
    return run(*config, command->count("--accumulate") > 0);
  });
  add_plan_command(app, registry);
  add_study_commands(app, registry);
  add_cost_commands(app, registry);
  add_conformance_commands(app, registry);
}

}  // namespace ringlab::cli
