// Subcommand registration for the command lines (ringlab, ringlab-gpu). Each part adds its
// subcommands to the CLI11 app and registers the function that runs when the subcommand was
// parsed; main() runs exactly one. It lives with the pipeline so that every part that brings
// subcommands (sim/cli, exercises/cli) can use it without depending on another's command line.
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

}  // namespace ringlab::cli
