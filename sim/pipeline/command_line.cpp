#include "sim/pipeline/command_line.hpp"

#include <CLI/CLI.hpp>
#include <ostream>

#include "reference/error.hpp"

namespace ringlab::cli {

std::optional<int> parse_command_line(CLI::App& app, int argc, const char* const* argv, std::ostream& out,
                                      std::ostream& err, const std::string& prefix, const std::string& hint) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    out << app.help(app.get_subcommands().empty() ? "" : app.get_subcommands().front()->get_name());
    return kExitVerified;
  } catch (const CLI::CallForAllHelp&) {
    out << app.help("", CLI::AppFormatMode::All);
    return kExitVerified;
  } catch (const CLI::CallForVersion& version) {
    out << version.what() << "\n";
    return kExitVerified;
  } catch (const CLI::ParseError& error) {
    std::string message = error.what();
    for (char& c : message)
      if (c == '\n') c = ' ';
    err << prefix << "error: " << message << "; " << hint << "\n";
    return kExitUsage;
  }
  return std::nullopt;
}

int Registry::run() const {
  for (const auto& [command, action] : entries_)
    if (command->parsed()) return action();
  return 2;
}

}  // namespace ringlab::cli
