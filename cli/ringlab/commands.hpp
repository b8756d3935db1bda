// The subcommands of the ringlab command line, by the file that defines them. main() adds these
// and the exercises' (exercises/cli/commands.hpp); nothing else includes this header.
#pragma once

#include <CLI/CLI.hpp>

#include "sim/pipeline/command_line.hpp"

namespace ringlab {
struct RunConfig;
}

namespace ringlab::cli {

// `ringlab run` (cli/ringlab/run_command.cpp), then plan, compare and figure.
void add_sim_commands(CLI::App& app, Registry& registry);
// `ringlab plan` (cli/ringlab/plan_command.cpp).
void add_plan_command(CLI::App& app, Registry& registry);
// `ringlab compare` and `ringlab figure` (cli/ringlab/cost_commands.cpp).
void add_cost_commands(CLI::App& app, Registry& registry);
// `ringlab study precision` (cli/ringlab/study_command.cpp).
void add_study_commands(CLI::App& app, Registry& registry);
// `ringlab conformance cases` (cli/ringlab/conformance_command.cpp).
void add_conformance_commands(CLI::App& app, Registry& registry);
// `ringlab run --dry-run`: the plan walked by the cost model, no tensors (cli/ringlab/dry_run_command.cpp).
int run_dry(RunConfig& config);

}  // namespace ringlab::cli
