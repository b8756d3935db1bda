#include "sim/pipeline/command_line.hpp"

#include <CLI/CLI.hpp>
#include <charconv>
#include <cstdint>
#include <ostream>

#include "reference/error.hpp"

namespace ringlab::cli {

namespace {

// Checks `text` (leading zeros dropped: no octal) is a decimal whole number in [min, max]; "" when
// it is, else what is wrong.
template <typename T>
std::string check_whole_number(std::string& text, T min, T max) {
  const bool negative = !text.empty() && text[0] == '-';
  const size_t digits = negative ? 1 : 0;
  while (text.size() > digits + 1 && text[digits] == '0') text.erase(digits, 1);
  if (text.size() == digits || text.find_first_not_of("0123456789", digits) != std::string::npos)
    return "'" + text + "' is not a whole number";
  if (negative && min >= 0)
    return text + " is negative; give a whole number from " + std::to_string(min) + " to " + std::to_string(max);
  T value{};
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error == std::errc::result_out_of_range || end != text.data() + text.size())
    return text + (negative ? " is too small (at least " + std::to_string(min) + ")"
                            : " is too large (at most " + std::to_string(max) + ")");
  if (value < min) return text + " is too small (at least " + std::to_string(min) + ")";
  return "";
}

// After "A subcommand is required": when argv holds a word that is neither a parsed (sub)command's
// name nor an option, "unknown command 'WORD' for ringlab study; use precision" (one line with the
// fix); "" when there is no such word (the subcommand was left out).
std::string unknown_command(const CLI::App& app, int argc, const char* const* argv) {
  std::vector<const CLI::App*> chain{&app};
  while (!chain.back()->get_subcommands().empty()) chain.push_back(chain.back()->get_subcommands().front());
  if (chain.back()->get_require_subcommand_min() == 0) return "";  // a required option or positional is missing
  size_t matched = 1;                                              // chain[0] is the program
  for (int i = 1; i < argc; ++i) {
    const std::string word = argv[i];
    if (word.empty() || word[0] == '-') continue;
    if (matched < chain.size() && word == chain[matched]->get_name()) {
      ++matched;
      continue;
    }
    std::string path, names;
    for (const CLI::App* command : chain) path += (path.empty() ? "" : " ") + command->get_name();
    for (const CLI::App* sub : chain.back()->get_subcommands([](const CLI::App* a) { return !a->get_group().empty(); }))
      names += (names.empty() ? "" : ", ") + sub->get_name();
    return "unknown command '" + word + "' for " + path + "; use " + names + " (" + path +
           " --help says what each does)";
  }
  return "";
}

}  // namespace

std::optional<int> parse_command_line(CLI::App& app, int argc, const char* const* argv, std::ostream& out,
                                      std::ostream& err, const std::string& prefix, const std::string& hint) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    out << app.help();  // the parsed subcommand's help (CLI11 follows them; its argument prefixes the usage line)
    return kExitVerified;
  } catch (const CLI::CallForAllHelp&) {
    out << app.help("", CLI::AppFormatMode::All);
    return kExitVerified;
  } catch (const CLI::CallForVersion& version) {
    out << version.what() << "\n";
    return kExitVerified;
  } catch (const CLI::RequiredError& error) {
    // "A subcommand is required" after a word that names none: say which word, and the commands.
    if (const std::string unknown = unknown_command(app, argc, argv); !unknown.empty()) {
      err << prefix << "error: " << unknown << "\n";
      return kExitUsage;
    }
    std::string message = error.what();
    for (char& c : message)
      if (c == '\n') c = ' ';
    err << prefix << "error: " << message << "; " << hint << "\n";
    return kExitUsage;
  } catch (const CLI::ParseError& error) {
    std::string message = error.what();
    for (char& c : message)
      if (c == '\n') c = ' ';
    err << prefix << "error: " << message << "; " << hint << "\n";
    return kExitUsage;
  }
  return std::nullopt;
}

CLI::Option* whole_number(CLI::Option* option, int64_t min) {
  return option->check(
      CLI::Validator([min](std::string& text) { return check_whole_number<int64_t>(text, min, INT64_MAX); }, ""));
}

CLI::Option* whole_number_unsigned(CLI::Option* option) {
  return option->check(
      CLI::Validator([](std::string& text) { return check_whole_number<uint64_t>(text, 0, UINT64_MAX); }, ""));
}

int Registry::run() const {
  for (const auto& [command, action] : entries_)
    if (command->parsed()) return action();
  return 2;
}

}  // namespace ringlab::cli
