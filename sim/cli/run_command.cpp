// `ringlab run`: compile a schedule into a plan, check it, run it on the simulator (or cost it
// with --dry-run), and verify every output against exact attention in float64.
// Sections: [inputs and limits] [outputs] [run] [registration]
#include <unistd.h>

#include <atomic>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "reference/error.hpp"
#include "reference/npy.hpp"
#include "sim/cli/commands.hpp"
#include "sim/run/progress.hpp"
#include "sim/run/output_files.hpp"
#include "sim/plan/check.hpp"
#include "sim/run/config.hpp"
#include "sim/run/inputs.hpp"
#include "sim/run/tables.hpp"
#include "sim/executor/sim_executor.hpp"
#include "sim/plan/queries.hpp"
#include "sim/run/verification.hpp"

namespace ringlab::cli {
namespace {

// ---- [inputs and limits] ---------------------------------------------------------------------

// Refuses sizes whose tensors would not fit in memory, before allocating any of them: the global
// inputs and outputs (float32 and the float64 oracle's copies) plus every rank's working set.
void check_memory(const RunConfig& config) {
  const AttentionDims& d = config.dims;
  const double q = double(d.batch) * double(d.seq) * double(d.heads) * double(d.dim);
  const double kv = double(d.batch) * double(d.seq) * double(d.kv_heads) * double(d.dim);
  const double tensors = 4 * q + 6 * kv;                // q, out, dout, dq and k, v, dk, dv (+ slots)
  const double bytes = tensors * (4 /*float*/ + 8 /*double*/ + 4 /*ranks' copies*/) * 1.5;
  const double available = double(sysconf(_SC_PHYS_PAGES)) * double(sysconf(_SC_PAGE_SIZE));
  if (bytes > 0.8 * available) {
    char text[256];
    std::snprintf(text, sizeof text,
                  "%s needs about %.1f GB of tensors but this machine has %.1f GB; use smaller --seq/--batch/--heads, "
                  "or --dry-run to cost it without tensors",
                  config.dims.to_string().c_str(), bytes / 1e9, available / 1e9);
    throw UsageError(text);
  }
}

// ---- [outputs] -------------------------------------------------------------------------------

void save_outputs(const std::string& directory, const RunOutputs& outputs) {
  StagedDirectory staged(directory);
  write_npy(staged.path("out.npy"), outputs.out);
  write_npy(staged.path("lse.npy"), outputs.lse);
  if (outputs.has_backward()) {
    write_npy(staged.path("dq.npy"), outputs.dq);
    write_npy(staged.path("dk.npy"), outputs.dk);
    write_npy(staged.path("dv.npy"), outputs.dv);
  }
  staged.commit();
}

std::string executor_label(const Plan& plan) {
  return "sim executor, " + std::to_string(plan.ranks()) + (plan.ranks() == 1 ? " rank" : " ranks") + " (fp32)";
}

// ---- [run] -----------------------------------------------------------------------------------

int run(RunConfig& config) {
  validate(config);
  if (!config.save_dir.empty()) check_output_directory(config.save_dir);
  if (!config.trace_file.empty()) check_output_file(config.trace_file);
  if (config.dry_run) return run_dry(config);

  // With --in the files decide the sizes, so read them before planning.
  if (config.in_dir.empty()) check_memory(config);
  const AttentionInputs<double> inputs = load_inputs(config);
  const Plan plan = build_plan(plan_spec(config));
  const WorldOptions world = make_world_options(static_cast<int>(config.ranks), config.timeout, config.inject,
                                                !config.trace_file.empty());

  const PlanCheck check = check_plan(plan);
  if (!check.ok() && plan.spec().erratum == Erratum::none) {
    throw UsageError("the plan checker refused this plan: " + check.findings.front().describe() +
                     "; this is a bug in ringlab's plan for these flags, please report it");
  }

  const AttentionInputs<float> x = inputs.cast<float>();
  std::atomic<int64_t> ops_done{0};
  SimOptions options{world, 0, &ops_done, nullptr, nullptr};
  SimResult sim;
  {
    ProgressBar progress(ops_done, total_ops(plan), config.progress && !config.json);
    sim = run_sim(plan, x, options);
  }
  if (!config.trace_file.empty()) write_chrome_trace(config.trace_file, sim.report.trace, static_cast<int>(plan.ranks()));
  if (!sim.report.ok()) {
    if (config.json) {
      std::cout << nlohmann::json{{"command", "run"}, {"config", plan.spec().describe()},
                                  {"status", run_status_name(sim.report.status)}, {"report", sim.report.describe()},
                                  {"exit_status", sim.report.exit_status()}}
                       .dump()
                << "\n";
    }
    std::cerr << "ringlab: " << sim.report.describe() << "\n";
    return sim.report.exit_status();
  }

  const ReferenceOutputs reference = compute_reference(inputs, config.mask(), config.backward);
  const Verification verification = verify(sim.outputs, reference, executor_label(plan));
  std::vector<BlockError> block_errors;
  if (!verification.ok()) {
    // Run again with every block checked on its own, to name where the error enters.
    SimOptions diagnose{world, 0, nullptr, &inputs, &reference};
    diagnose.world.trace = false;
    diagnose.world.faults = {};
    block_errors = run_sim(plan, x, diagnose).block_errors;
  }
  if (!config.save_dir.empty()) save_outputs(config.save_dir, sim.outputs);

  const LoadImbalance imbalance = load_imbalance(sim.ranks);
  const int status = verification.ok() ? kExitVerified : kExitMismatch;
  if (config.json) {
    nlohmann::json summary = {{"command", "run"},
                              {"config", plan.spec().describe()},
                              {"executor", executor_label(plan)},
                              {"plan_check", to_json(check)},
                              {"ranks", to_json(sim.ranks)},
                              {"load_imbalance", to_json(imbalance)},
                              {"wall_seconds", sim.report.wall_seconds},
                              {"verification", to_json(verification)},
                              {"exit_status", status}};
    if (!block_errors.empty()) summary["block_errors"] = to_json(block_errors);
    std::cout << summary.dump() << "\n";
    return status;
  }
  std::cout << "ringlab run | " << plan.spec().describe() << "\n\n";
  if (!check.ok()) {
    std::cout << "plan checker: this erratum variant is wrong by construction; it reports\n";
    for (size_t i = 0; i < check.findings.size() && i < 4; ++i) std::cout << "  " << check.findings[i].describe() << "\n";
    if (check.findings.size() > 4) std::cout << "  ... and " << check.findings.size() - 4 << " more\n";
    std::cout << "\n";
  }
  print_rank_table(std::cout, sim.ranks);
  print_load_imbalance(std::cout, imbalance);
  std::cout << "\n";
  print_verification(std::cout, verification);
  if (!verification.ok()) {
    std::cout << "\n";
    print_diagnosis(std::cout, plan, check, block_errors);
  }
  return status;
}

}  // namespace

// ---- [registration] --------------------------------------------------------------------------

void add_sim_commands(CLI::App& app, Registry& registry) {
  auto config = std::make_shared<RunConfig>();
  CLI::App* command = app.add_subcommand("run", "run one schedule and verify it against exact attention");
  add_run_flags(*command, *config);
  registry.add(command, [config] { return run(*config); });
  add_plan_command(app, registry);
  add_cost_commands(app, registry);
}

}  // namespace ringlab::cli
