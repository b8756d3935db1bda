// What the command lines (ringlab, ringlab-gpu, ringlab-viz) share: parsing with help and one-line
// errors, and subcommand registration — each part adds its subcommands to the CLI11 app and
// registers the function that runs when the subcommand was parsed; main() runs exactly one. It
// lives with the pipeline so that every part that brings subcommands (cli/ringlab, exercises/cli) can
// use it without depending on another's command line.
#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace CLI {
class App;     // CLI11; the files that register flags include <CLI/CLI.hpp>
class Option;  // ...
}  // namespace CLI

namespace ringlab::cli {

// Parses argv into `app`. --help (and --help-all, --version where the app has them) prints to `out`; a parse
// error is one line on `err`, "<prefix>error: <what>; <hint>", newlines folded. Returns the exit
// status when the program stops there (0 after help, 2 after an error), nothing when it runs.
std::optional<int> parse_command_line(CLI::App& app, int argc, const char* const* argv, std::ostream& out,
                                      std::ostream& err, const std::string& prefix, const std::string& hint);

// Makes an integer option take only a decimal whole number its variable can hold, from `min` up:
// CLI11 2.1 alone wraps a negative number into an unsigned one (--seed -1), saturates one too
// large (--ranks 99999999999999999999) and reads 010 as octal. A refused value is a parse error
// naming the option, the value and the range. Returns `option`.
CLI::Option* whole_number(CLI::Option* option, int64_t min);
// The same for an unsigned 64-bit option (0 to 18446744073709551615).
CLI::Option* whole_number_unsigned(CLI::Option* option);

class Registry {
 public:
  void add(CLI::App* command, std::function<int()> action) { entries_.emplace_back(command, std::move(action)); }
  // Runs the action of the subcommand that was parsed; 2 when none was.
  int run() const;

 private:
  std::vector<std::pair<CLI::App*, std::function<int()>>> entries_;
};

}  // namespace ringlab::cli
