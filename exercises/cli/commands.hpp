// The exercises' subcommands of the ringlab command line: exercises, check, grade, handout and verify
// (exercises/cli/exercise_commands.cpp, exercises/cli/grade_command.cpp).
#pragma once

#include <CLI/CLI.hpp>

#include "sim/pipeline/command_line.hpp"

namespace ringlab::cli {

void add_exercise_commands(CLI::App& app, Registry& registry);
void add_grade_command(CLI::App& app, Registry& registry);
void add_handout_command(CLI::App& app, Registry& registry);
void add_verify_command(CLI::App& app, Registry& registry);

}  // namespace ringlab::cli
