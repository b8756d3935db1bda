// `ringlab exercises [--json]`, `ringlab exercises show ID [--variant N]` and
// `ringlab check ID [--variant N] PART=ANSWER ...` (the command-line contract: README, "Commands").
// check exits 0 when every given part is right, 1 when some are wrong, 2 for an unknown exercise or
// part or an answer that cannot be read (one line saying what was not understood).
//
// Answers hidden (`check --hide-answers`, or RINGLAB_HIDE_ANSWERS=1 in the environment, which a
// course sets where problem sets are graded): a wrong part says wrong and names the known mistake
// it matches, and nothing prints an expected value or the worked solution (--explain is refused).
// Sections: [hiding] [listing] [showing] [checking] [registration]
#include <CLI/CLI.hpp>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "exercises/cli/commands.hpp"
#include "exercises/exercise.hpp"
#include "reference/error.hpp"

namespace ringlab::cli {

namespace {

using namespace ringlab::exercises;

std::string pad(const std::string& text, size_t width) {
  // Width in characters, counting UTF-8 continuation bytes as nothing.
  size_t shown = 0;
  for (unsigned char c : text) shown += (c & 0xC0) != 0x80 ? 1 : 0;
  return shown >= width ? text + " " : text + std::string(width - shown, ' ');
}

std::string part_names(const Exercise& exercise) {
  std::string names;
  for (const Part& part : exercise.parts) names += (names.empty() ? "" : ", ") + part.name;
  return names;
}

std::string answer_hint(const Part& part) {
  switch (part.quantity) {
    case Quantity::bytes: return "bytes (GB = 10^9 B, GiB = 2^30 B; a bare number is read as " + part.unit.name + ")";
    case Quantity::seconds: return "time (s, ms, us; a bare number is read as " + part.unit.name + ")";
    case Quantity::ratio: return "ratio (e.g. 1.5x)";
    case Quantity::fraction: return "fraction (e.g. 12.5% or 0.125)";
    case Quantity::tokens: return "tokens (e.g. 4K = 4096)";
    case Quantity::number: return "number";
    case Quantity::list: return "list (e.g. 1,2,3)";
  }
  return "";
}

nlohmann::json part_json(const Part& part, bool with_answers) {
  nlohmann::json j = {{"name", part.name},
                      {"question", part.question},
                      {"quantity", quantity_name(part.quantity)},
                      {"unit", part.unit.name},
                      {"tolerance", tolerance_text(part)}};
  if (with_answers) {
    j["expected"] = expected_text(part);
    if (part.quantity == Quantity::list) {
      j["expected_value"] = part.expected_list;
    } else {
      j["expected_value"] = part.expected;
    }
  }
  return j;
}

// ---- [hiding] ----------------------------------------------------------------------------------

constexpr const char* kHideVariable = "RINGLAB_HIDE_ANSWERS";

// Whether answers are hidden: the flag, or RINGLAB_HIDE_ANSWERS=1 (0 or unset: shown). Any other
// value is a usage error, so that a typo cannot silently show the answers of a graded set.
bool answers_hidden(bool flag) {
  const char* value = std::getenv(kHideVariable);
  const std::string text = value ? value : "";
  if (!text.empty() && text != "0" && text != "1") {
    throw UsageError(std::string(kHideVariable) + "='" + text + "' is not 0 or 1; set " + kHideVariable +
                     "=1 to hide the answers of `ringlab check` and `ringlab exercises show`, 0 to show them");
  }
  return flag || text == "1";
}

// --explain prints the worked solution, with every expected value in it.
void refuse_explain_when_hidden(bool hidden, bool explain) {
  if (hidden && explain) {
    const char* value = std::getenv(kHideVariable);
    throw UsageError(std::string("answers are hidden (") +
                     (value && std::string(value) == "1" ? std::string(kHideVariable) + "=1" : "--hide-answers") +
                     "), so there is no worked solution to --explain; drop --explain");
  }
}

// ---- [listing] ---------------------------------------------------------------------------------

int list_exercises(bool json) {
  if (json) {
    nlohmann::json list = nlohmann::json::array();
    for (const CatalogEntry& entry : exercise_catalog()) {
      const Exercise e = entry.make(0);
      nlohmann::json parts = nlohmann::json::array();
      for (const Part& part : e.parts) parts.push_back(part.name);
      list.push_back({{"id", e.id}, {"title", e.title}, {"source", e.source}, {"parts", parts}, {"lab", e.lab}});
    }
    std::cout << list.dump(2) << "\n";
    return kExitVerified;
  }
  std::cout << "ringlab exercises: " << exercise_catalog().size() << " exercises with answer checkers\n\n";
  std::cout << pad("id", 26) << pad("source", 22) << "title / parts\n";
  for (const CatalogEntry& entry : exercise_catalog()) {
    const Exercise e = entry.make(0);
    std::cout << pad(e.id, 26) << pad(std::string(entry.source_short), 22) << e.title << "\n"
              << std::string(48, ' ') << "parts: " << part_names(e) << "\n";
  }
  std::cout << "\nringlab exercises show ID [--variant N]    print one (variant N: other numbers)\n"
               "ringlab check ID [--variant N] PART=ANSWER ...  [--explain]\n";
  return kExitVerified;
}

// ---- [showing] ---------------------------------------------------------------------------------

void print_solution(const Exercise& e) {
  std::cout << "\nworked solution\n";
  std::string line;
  for (char c : e.solution + "\n") {
    if (c == '\n') {
      std::cout << "  " << line << "\n";
      line.clear();
    } else {
      line += c;
    }
  }
  if (!e.command.empty()) std::cout << "\ndemonstrate: " << e.command << "\n";
}

void print_indented(const std::string& text, const std::string& indent) {
  std::string line;
  for (char c : text + "\n") {
    if (c == '\n') {
      std::cout << indent << line << "\n";
      line.clear();
    } else {
      line += c;
    }
  }
}

int show_exercise(const std::string& id, int64_t variant, bool explain, bool json, bool hidden) {
  refuse_explain_when_hidden(hidden, explain);
  const Exercise e = make_exercise(id, variant);
  if (json) {
    nlohmann::json parameters = nlohmann::json::array(), parts = nlohmann::json::array();
    for (const Parameter& p : e.parameters)
      parameters.push_back({{"name", p.name}, {"value", p.value}, {"meaning", p.meaning}});
    for (const Part& part : e.parts) parts.push_back(part_json(part, explain));
    nlohmann::json numbers = nlohmann::json::object();
    for (const auto& [name, value] : e.numbers) numbers[name] = value;
    nlohmann::json j = {{"id", e.id},
                        {"title", e.title},
                        {"source", e.source},
                        {"variant", e.variant},
                        {"parameters", parameters},
                        {"numbers", numbers},
                        {"statement", e.statement},
                        {"parts", parts},
                        {"model", e.model},
                        {"lab", e.lab},
                        {"command", e.command}};
    if (explain) j["solution"] = e.solution;
    std::cout << j.dump(2) << "\n";
    return kExitVerified;
  }
  std::cout << e.id << " (variant " << e.variant << ") - " << e.title << "\n"
            << "from " << e.source << "\n\nparameters\n";
  for (const Parameter& p : e.parameters) std::cout << "  " << pad(p.name, 12) << pad(p.value, 26) << p.meaning << "\n";
  std::cout << "\n";
  print_indented(e.statement, "");
  if (!e.model.empty()) {
    std::cout << "\nmodel\n";
    print_indented(e.model, "  ");
  }
  std::cout << "\nparts\n";
  for (const Part& part : e.parts)
    std::cout << "  " << pad(part.name, 20) << pad(answer_hint(part), 62) << tolerance_text(part) << "\n";
  if (!e.lab.empty()) std::cout << "\ncode lab: " << e.lab << "  (ringlab grade " << e.lab << " FILE)\n";
  std::cout << "\nanswer: ringlab check " << e.id << (e.variant ? " --variant " + std::to_string(e.variant) : "") << " "
            << e.parts.front().name << "=ANSWER ...\n";
  if (explain) print_solution(e);
  return kExitVerified;
}

// ---- [checking] --------------------------------------------------------------------------------

// PART=ANSWER pairs from the arguments. A word without '=' continues the previous answer, so an
// unquoted `full=4.4 TB` still reads as one answer.
std::vector<std::pair<std::string, std::string>> parse_assignments(const std::vector<std::string>& args,
                                                                   const Exercise& e) {
  std::vector<std::pair<std::string, std::string>> pairs;
  for (const std::string& arg : args) {
    const size_t eq = arg.find('=');
    if (eq == std::string::npos) {
      if (pairs.empty()) {
        throw UsageError("'" + arg + "' is not PART=ANSWER; the parts of " + e.id + " are " + part_names(e));
      }
      pairs.back().second += " " + arg;
      continue;
    }
    const std::string part = arg.substr(0, eq);
    if (!e.find_part(part))
      throw UsageError("unknown part '" + part + "' of " + e.id + "; its parts are " + part_names(e));
    for (const auto& [given, answer] : pairs)
      if (given == part)
        throw UsageError("part '" + part + "' is answered twice (" + part + "=" + answer + " and " + arg +
                         "); give each part once");
    pairs.emplace_back(part, arg.substr(eq + 1));
  }
  return pairs;
}

// What a wrong part's line says when answers are hidden: the note, unless it would tell the
// answer ("write 12.5% for a percentage" does: the answer is then 12.5%).
std::string hidden_note(const Verdict& v, const Part& part) {
  if (v.right || v.note.empty()) return v.note;
  if (part.quantity == Quantity::fraction && v.note.rfind("a bare number is a fraction", 0) == 0)
    return "a bare number is a fraction (0.5 = 50%): write a percentage with %";
  return v.note;
}

// A known mistake's explanation; with answers hidden, withheld: an explanation says where the
// mistake departs from the right reasoning, and even one that never states the expected value can
// leave it one step of arithmetic away ("so GPU 0 is wrong too" after wrong_ranks=3).
std::string mistake_why(const KnownMistake& mistake, bool hidden) {
  if (hidden) return "(its explanation is withheld while answers are hidden)";
  return mistake.why;
}

int check_answers(const std::string& id, int64_t variant, const std::vector<std::string>& args, bool explain, bool json,
                  bool hidden) {
  refuse_explain_when_hidden(hidden, explain);
  const Exercise e = make_exercise(id, variant);
  const auto pairs = parse_assignments(args, e);
  if (pairs.empty()) {
    if (!explain) {
      throw UsageError("no answers given; use ringlab check " + e.id + " PART=ANSWER ... with parts " + part_names(e) +
                       (hidden ? std::string() : ", or --explain for the worked solution"));
    }
    if (json) {
      std::cout << nlohmann::json{{"exercise", e.id},
                                  {"variant", e.variant},
                                  {"solution", e.solution},
                                  {"command", e.command},
                                  {"model", e.model}}
                       .dump(2)
                << "\n";
    } else {
      print_solution(e);
    }
    return kExitVerified;
  }
  std::vector<Verdict> verdicts;
  for (const auto& [part, answer] : pairs)
    verdicts.push_back(judge(*e.find_part(part), answer));  // may throw UsageError
  int right = 0;
  for (const Verdict& v : verdicts) right += v.right ? 1 : 0;
  const int status = right == static_cast<int>(verdicts.size()) ? kExitVerified : kExitMismatch;

  if (json) {
    nlohmann::json results = nlohmann::json::array();
    for (const Verdict& v : verdicts) {
      nlohmann::json r = {{"part", v.part},           {"answer", v.answer},
                          {"read_as", v.read_as},     {"right", v.right},
                          {"tolerance", v.tolerance}, {"note", hidden ? hidden_note(v, *e.find_part(v.part)) : v.note}};
      if (!hidden) r["expected"] = v.expected;
      if (v.mistake) r["mistake"] = {{"origin", v.mistake->origin}, {"why", mistake_why(*v.mistake, hidden)}};
      results.push_back(r);
    }
    nlohmann::json j = {{"exercise", e.id},        {"variant", e.variant},     {"results", results},
                        {"right", right},          {"given", verdicts.size()}, {"exit_status", status},
                        {"answers_hidden", hidden}};
    if (explain) j["solution"] = e.solution, j["command"] = e.command, j["model"] = e.model;
    std::cout << j.dump(2) << "\n";
    return status;
  }

  std::cout << "check " << e.id << ", variant " << e.variant << " (" << e.source << ")"
            << (hidden ? ", answers hidden" : "") << "\n";
  if (!e.model.empty()) {
    std::cout << "  model (what the answers assume):\n";
    print_indented(e.model, "    ");
  }
  size_t width = 0;
  for (const Verdict& v : verdicts) width = std::max(width, v.part.size());
  for (const Verdict& v : verdicts) {
    std::cout << "  " << pad(v.part, width + 1) << pad(v.read_as, 14) << (v.right ? "\u2713" : "\u2717");
    if (!hidden) {
      std::cout << " (expected " << v.expected << " " << v.tolerance << ")";
    } else {
      if (v.tolerance == "exact")  // a list or a whole number: "not within exact" reads wrong
        std::cout << (v.right ? " right (exact)" : " wrong (must be exact)");
      else
        std::cout << (v.right ? " right (" : " wrong (not within ") << v.tolerance << ")";
    }
    const std::string note = hidden ? hidden_note(v, *e.find_part(v.part)) : v.note;
    if (!note.empty()) std::cout << " - " << note;
    std::cout << "\n";
    if (v.mistake)
      std::cout << "      this is " << v.mistake->origin << ": " << mistake_why(*v.mistake, hidden) << "\n";
  }
  std::cout << right << " of " << verdicts.size() << (verdicts.size() == 1 ? " part" : " parts") << " right";
  if (status != kExitVerified && !explain && !hidden) std::cout << "; add --explain for the worked solution";
  std::cout << "\n";
  if (explain) print_solution(e);
  return status;
}

}  // namespace

// ---- [registration] ----------------------------------------------------------------------------

void add_exercise_commands(CLI::App& app, Registry& registry) {
  struct ExercisesArgs {
    bool json = false, explain = false, hide = false;
    std::string id;
    int64_t variant = 0;
  };
  auto args = std::make_shared<ExercisesArgs>();
  CLI::App* exercises = app.add_subcommand("exercises", "list the exercises with answer checkers, or show one");
  exercises->add_flag("--json", args->json, "machine-readable output");
  CLI::App* show = exercises->add_subcommand("show", "print one exercise: parameters, question, parts, tolerances");
  show->add_option("id", args->id, "exercise id (see 'ringlab exercises')")->required();
  show->add_option("--variant", args->variant,
                   "0: the source material's numbers; N > 0: other numbers, the same for the same N")
      ->capture_default_str();
  show->add_flag("--explain", args->explain, "also print the worked solution (instructors)");
  show->add_flag("--json", args->json, "machine-readable output");
  show->add_flag("--hide-answers", args->hide,
                 "refuse --explain (the default where RINGLAB_HIDE_ANSWERS=1: graded problem sets)");
  registry.add(exercises, [args, show] {
    return show->parsed()
               ? show_exercise(args->id, args->variant, args->explain, args->json, answers_hidden(args->hide))
               : list_exercises(args->json);
  });

  struct CheckArgs {
    std::string id;
    int64_t variant = 0;
    std::vector<std::string> answers;
    bool explain = false, json = false, hide = false;
  };
  auto check = std::make_shared<CheckArgs>();
  CLI::App* command =
      app.add_subcommand("check", "check answers to an exercise: exit 0 all right, 1 some wrong, 2 unreadable");
  command->add_option("id", check->id, "exercise id (see 'ringlab exercises')")->required();
  command->add_option("answers", check->answers, "PART=ANSWER ... (quote answers with spaces: full=\"4.4 TB\")");
  command->add_option("--variant", check->variant, "the variant the numbers came from")->capture_default_str();
  command->add_flag("--explain", check->explain,
                    "print the worked solution and a ringlab command that demonstrates it");
  command->add_flag("--json", check->json, "machine-readable output");
  command->add_flag("--hide-answers", check->hide,
                    "say right or wrong (and name a known mistake), never the expected value; --explain is refused "
                    "(the default where RINGLAB_HIDE_ANSWERS=1: graded problem sets)");
  registry.add(command, [check] {
    return check_answers(check->id, check->variant, check->answers, check->explain, check->json,
                         answers_hidden(check->hide));
  });

  add_grade_command(app, registry);
  add_handout_command(app, registry);
  add_verify_command(app, registry);
}

}  // namespace ringlab::cli
