// Subcommand registration. Each part adds its subcommands to the CLI11 app and registers the
// function that runs when the subcommand was parsed; main() runs exactly one.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <utility>
#include <vector>

namespace ringlab::cli {

class Registry {
 public:
  void add(CLI::App* command, std::function<int()> action) { entries_.emplace_back(command, std::move(action)); }
  int run() const {
    for (const auto& [command, action] : entries_)
      if (command->parsed()) return action();
    return 2;
  }

 private:
  std::vector<std::pair<CLI::App*, std::function<int()>>> entries_;
};

void add_sim_commands(CLI::App& app, Registry& registry);
void add_plan_command(CLI::App& app, Registry& registry);
// `ringlab compare` and `ringlab figure` (sim/cost/cli/cost_commands.cpp).
void add_cost_commands(CLI::App& app, Registry& registry);

}  // namespace ringlab::cli

namespace ringlab {
struct RunConfig;
}

namespace ringlab::cli {
// `ringlab run --dry-run`: the plan walked by the cost model, no tensors (sim/cli/dry_run_command.cpp).
int run_dry(const RunConfig& config);
void add_exercise_commands(CLI::App& app, Registry& registry);

}  // namespace ringlab::cli
