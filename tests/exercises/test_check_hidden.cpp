// `ringlab check --hide-answers` (and RINGLAB_HIDE_ANSWERS=1), as a graded problem set uses it:
// over every exercise and variants 0-8, with wrong answers and with each known mistake, the
// output says wrong, names the mistake it recognises, and never contains the expected value in any
// form the exercise prints (the number at its printed precision and at other roundings, in every
// unit of its quantity, the list). The same answers without hiding print the expected value: the
// negative control that the scan finds what it looks for. --explain is refused; --version works.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "exercises/exercise.hpp"
#include "tests/cli/run_binary.hpp"

using namespace ringlab::exercises;
using ringlab::test::run_binary;

namespace {

const std::string kBinary = RINGLAB_BINARY;

bool digit(char c) { return c >= '0' && c <= '9'; }
bool word(char c) { return digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }

// Whether `text` holds `token` as a whole number: not inside a longer number or a name ("4.027" is
// not in "14.027" or "4.0271"; "8" is not in "8.5", "1,8" or "sm_8"; "32" is not in "fp32").
bool has_number(const std::string& text, const std::string& token) {
  for (size_t at = text.find(token); at != std::string::npos; at = text.find(token, at + 1)) {
    const size_t end = at + token.size();
    const bool before = at > 0 && (word(text[at - 1]) || text[at - 1] == '.' || text[at - 1] == ',');
    const bool after =
        end < text.size() &&
        (digit(text[end]) || ((text[end] == '.' || text[end] == ',') && end + 1 < text.size() && digit(text[end + 1])));
    if (!before && !after) return true;
  }
  return false;
}

// Every way the exercise could print a part's expected value. Small whole numbers ("8", "1") are
// everywhere in plain text ("variant 8", "1 of 3"), so they count only with their unit attached.
std::vector<std::string> expected_forms(const Part& part) {
  std::set<std::string> forms;
  if (part.quantity == Quantity::list) {
    forms.insert(format_list(part.expected_list));
    std::string compact;
    for (int64_t x : part.expected_list) compact += (compact.empty() ? "" : ",") + std::to_string(x);
    forms.insert(compact);
    return {forms.begin(), forms.end()};
  }
  const double x = part.expected;
  const double shown = x / part.unit.factor;
  const bool small_whole_shown = std::fabs(shown - std::round(shown)) < 1e-6 && std::fabs(shown) < 100;
  for (int digits = 3; digits <= 6; ++digits) {
    const std::string form = format_quantity(x, part.quantity, part.unit, digits);
    const bool bare = form.find_first_not_of("0123456789.-") == std::string::npos;
    const bool whole = form.find_first_not_of("0123456789-") == std::string::npos && std::fabs(shown) < 100;
    if (!(bare && (small_whole_shown || whole))) forms.insert(form);
  }
  std::vector<std::pair<double, std::string>> scaled;  // the value in each unit of its quantity
  switch (part.quantity) {
    case Quantity::bytes:
      for (const char* unit : {"B", "KB", "MB", "GB", "TB", "PB", "KiB", "MiB", "GiB", "TiB", "PiB"})
        scaled.emplace_back(x / named_unit(Quantity::bytes, unit).factor, unit);
      break;
    case Quantity::seconds:
      for (const char* unit : {"s", "ms", "us"})
        scaled.emplace_back(x / named_unit(Quantity::seconds, unit).factor, unit);
      break;
    case Quantity::fraction:
      scaled.emplace_back(x * 100, "%");
      scaled.emplace_back(x, "");
      break;
    case Quantity::ratio: scaled.emplace_back(x, "x"); break;
    case Quantity::tokens:
      forms.insert(group_thousands(std::llround(x)));
      forms.insert(std::to_string(std::llround(x)));
      forms.insert(tokens_text(std::llround(x)));
      scaled.emplace_back(x, "");
      break;
    default: scaled.emplace_back(x, ""); break;
  }
  for (const auto& [value, unit] : scaled) {
    if (!(std::fabs(value) >= 1e-3 && std::fabs(value) < 1e7)) continue;  // no one writes 4e-09 TB
    // A bare number is the answer in the part's own unit (or a plain one); "4096" is not 4 TiB.
    const bool own_unit = unit == part.unit.name || unit.empty() || unit == "%" || unit == "x";
    for (int digits = 3; digits <= 6; ++digits) {
      const std::string number = format_number(value, digits);
      // A small whole number, as the value is or as a rounding shows it ("2" for 1.9996).
      const bool small_whole = number.find_first_not_of("0123456789-") == std::string::npos && std::fabs(value) < 100;
      if (!small_whole && own_unit) forms.insert(number);
      if (!unit.empty()) forms.insert(number + (unit == "%" || unit == "x" ? "" : " ") + unit);
    }
  }
  return {forms.begin(), forms.end()};
}

// An answer the checker reads as `value` (base units) for this part.
std::string answer_text(const Part& part, double value) {
  switch (part.quantity) {
    case Quantity::bytes:
    case Quantity::seconds:
      return format_number(value / part.unit.factor, 9) + (part.unit.name.empty() ? "" : " " + part.unit.name);
    case Quantity::ratio: return format_number(value, 9) + "x";
    case Quantity::fraction: return format_number(value * 100, 9) + "%";
    case Quantity::tokens: return std::to_string(std::llround(value));
    default: return format_number(value, 9);
  }
}

std::string list_text(const std::vector<int64_t>& list) {
  std::string text;
  for (int64_t x : list) text += (text.empty() ? "" : ",") + std::to_string(x);
  return text;
}

std::string wrong_answer(const Part& part) {
  if (part.quantity == Quantity::list) {
    std::vector<int64_t> wrong = part.expected_list;
    for (int64_t& x : wrong) x += 1;
    if (wrong.empty()) wrong.push_back(1);
    return list_text(wrong);
  }
  // Well outside the tolerance, which may be mostly absolute (a fraction near 0).
  const double allowed = part.tolerance.abs + part.tolerance.rel * std::fabs(part.expected);
  const double delta = std::max(0.37 * std::fabs(part.expected), 5 * allowed);
  return answer_text(part, part.expected + (delta > 0 ? delta : 3.0));
}

// The output with what is not the checker's verdict taken out: the echo of each answer (as typed
// and as read), the part names, the exercise's model (public: `exercises show` prints it), the
// header and the tolerances. Only whole words are taken out ("16" stays in "1.162x").
std::string verdict_text(std::string out, const nlohmann::json& results, const Exercise& e) {
  auto erase_all = [&](const std::string& what) {
    if (what.empty()) return;
    for (size_t at = out.find(what); at != std::string::npos; at = out.find(what, at + 1)) {
      const size_t end = at + what.size();
      const bool inside = (at > 0 && (word(out[at - 1]) || out[at - 1] == '.')) ||
                          (end < out.size() && (word(out[end]) || out[end] == '.'));
      if (!inside) out.erase(at, what.size());
    }
  };
  out.erase(0, out.find('\n'));  // the header line
  for (const auto& r : results) {
    erase_all(r["read_as"].get<std::string>());
    erase_all(r["answer"].get<std::string>());
  }
  for (const Part& part : e.parts) erase_all(part.name);
  std::string line;
  for (char c : e.model + "\n") {
    if (c == '\n') {
      erase_all(line);
      line.clear();
    } else {
      line += c;
    }
  }
  for (const Part& part : e.parts) erase_all(tolerance_text(part));
  return out;
}

struct Checked {
  int status = -1;
  std::string out, err;
};

Checked check(const Exercise& e, const std::vector<std::string>& answers, std::vector<std::string> flags) {
  std::vector<std::string> args{"check", e.id, "--variant", std::to_string(e.variant)};
  args.insert(args.end(), flags.begin(), flags.end());
  args.insert(args.end(), answers.begin(), answers.end());
  const auto run = run_binary(kBinary, args);
  return {run.status, run.out, run.err};
}

}  // namespace

TEST_CASE("check --hide-answers never prints an expected value (every exercise and variants 0-8)", "[exercises][cli]") {
  unsetenv("RINGLAB_HIDE_ANSWERS");
  int runs = 0, mistakes_named = 0;
  for (const CatalogEntry& entry : exercise_catalog()) {
    for (int64_t variant = 0; variant <= 8; ++variant) {
      const Exercise e = entry.make(variant);
      // Answer sets: every part wrong, then each part's k-th known mistake where it has one.
      size_t most_mistakes = 0;
      for (const Part& part : e.parts) most_mistakes = std::max(most_mistakes, part.mistakes.size());
      for (size_t round = 0; round <= most_mistakes; ++round) {
        std::vector<std::string> answers;
        std::vector<const KnownMistake*> meant;
        for (const Part& part : e.parts) {
          const KnownMistake* mistake =
              round > 0 && round - 1 < part.mistakes.size() ? &part.mistakes[round - 1] : nullptr;
          meant.push_back(mistake);
          std::string answer = wrong_answer(part);
          if (mistake)
            answer = part.quantity == Quantity::list ? list_text(mistake->list) : answer_text(part, mistake->value);
          answers.push_back(part.name + "=" + answer);
        }
        INFO(e.id << " --variant " << variant << " answers:");
        for (const std::string& a : answers) INFO(a);
        const Checked hidden = check(e, answers, {"--hide-answers", "--json"});
        const Checked hidden_text = check(e, answers, {"--hide-answers"});
        // The negative control, once per variant: without hiding, the scan finds the values.
        const Checked shown = round == 0 ? check(e, answers, {"--json"}) : Checked{1, "{\"results\": []}", ""};
        runs += round == 0 ? 3 : 2;
        INFO(hidden_text.out << hidden_text.err);
        REQUIRE(hidden.status == 1);
        REQUIRE(hidden_text.status == 1);
        REQUIRE(shown.status == 1);
        const nlohmann::json results = nlohmann::json::parse(hidden.out)["results"];
        const nlohmann::json shown_results = nlohmann::json::parse(shown.out)["results"];
        const bool control = !shown_results.empty();
        const std::string verdicts = verdict_text(hidden_text.out, results, e);
        const std::string verdicts_json = verdict_text(hidden.out, results, e);
        const std::string verdicts_shown = verdict_text(shown.out, shown_results, e);
        for (size_t i = 0; i < e.parts.size(); ++i) {
          const Part& part = e.parts[i];
          INFO("part " << part.name << " expected " << expected_text(part));
          CHECK_FALSE(results[i]["right"].get<bool>());
          CHECK_FALSE(results[i].contains("expected"));
          bool leaked = false, found_when_shown = false, echoed = false;
          const std::vector<std::string> forms = expected_forms(part);
          std::string echoes;  // what the answers print back (another part's answer can equal this one's)
          for (const auto& r : results)
            echoes += r["read_as"].get<std::string>() + "\n" + r["answer"].get<std::string>() + "\n";
          for (const std::string& form : forms) {
            echoed |= has_number(echoes, form);
            if (has_number(verdicts, form) || has_number(verdicts_json, form)) {
              UNSCOPED_INFO("leaked as '" << form << "'");
              leaked = true;
            }
            found_when_shown |= has_number(verdicts_shown, form);
          }
          CHECK_FALSE(leaked);
          // The scan finds the value where it is printed. (A small whole number has no form to scan
          // for; that "(expected " is never printed covers it.)
          const bool printed_form = std::find(forms.begin(), forms.end(), expected_text(part)) != forms.end();
          if (control && printed_form && !echoed) CHECK(found_when_shown);
          if (meant[i]) {
            REQUIRE(results[i].contains("mistake"));
            CHECK(results[i]["mistake"]["origin"] == meant[i]->origin);
            // Named, never explained: an explanation can leave the answer one step away.
            CHECK(results[i]["mistake"]["why"] == "(its explanation is withheld while answers are hidden)");
            CHECK(hidden_text.out.find(meant[i]->why) == std::string::npos);
            CHECK(hidden_text.out.find("this is " + meant[i]->origin) != std::string::npos);
            ++mistakes_named;
          }
        }
        CHECK(hidden_text.out.find("wrong") != std::string::npos);
        CHECK(hidden_text.out.find("(expected ") == std::string::npos);
        CHECK(hidden_text.out.find("--explain") == std::string::npos);
      }
    }
  }
  CHECK(runs > 700);
  CHECK(mistakes_named > 100);
}

TEST_CASE("answers hidden: RINGLAB_HIDE_ANSWERS=1 makes hiding the default and --explain is refused",
          "[exercises][cli]") {
  const std::vector<std::string> wrong{"check", "comm-volume", "ring=30 GB", "ulysses=4.295 GB", "ratio=7.5"};
  setenv("RINGLAB_HIDE_ANSWERS", "1", 1);
  const auto hidden = run_binary(kBinary, wrong);
  CHECK(hidden.status == 1);
  CHECK(hidden.out.find("answers hidden") != std::string::npos);
  CHECK(hidden.out.find("32.21") == std::string::npos);
  CHECK(hidden.out.find("4.027") == std::string::npos);
  // The natural slip of counting what an all-to-all keeps is named, not just marked wrong; its
  // explanation is withheld (it is shown once the answers are no longer hidden).
  CHECK(hidden.out.find("this is a common slip: (its explanation is withheld") != std::string::npos);
  CHECK(hidden.out.find("keeps on its own GPU") == std::string::npos);
  for (const std::vector<std::string>& explain :
       {std::vector<std::string>{"check", "comm-volume", "ring=30 GB", "--explain"},
        std::vector<std::string>{"check", "comm-volume", "--explain"},
        std::vector<std::string>{"exercises", "show", "comm-volume", "--explain"},
        std::vector<std::string>{"exercises", "show", "comm-volume", "--explain", "--json"}}) {
    const auto refused = run_binary(kBinary, explain);
    INFO(refused.out << refused.err);
    CHECK(refused.status == 2);
    CHECK(refused.err_lines().size() == 1);
    CHECK(refused.err.find("RINGLAB_HIDE_ANSWERS=1") != std::string::npos);
    CHECK(refused.out.empty());
  }
  // Showing the exercise (no answers in it) still works.
  CHECK(run_binary(kBinary, {"exercises", "show", "comm-volume"}).status == 0);
  setenv("RINGLAB_HIDE_ANSWERS", "yes please", 1);
  const auto typo = run_binary(kBinary, wrong);
  CHECK(typo.status == 2);
  CHECK(typo.err_lines().size() == 1);
  CHECK(typo.out.empty());
  setenv("RINGLAB_HIDE_ANSWERS", "0", 1);
  const auto shown = run_binary(kBinary, wrong);
  CHECK(shown.status == 1);
  CHECK(shown.out.find("expected 32.21 GB") != std::string::npos);
  CHECK(shown.out.find("keeps on its own GPU") != std::string::npos);
  unsetenv("RINGLAB_HIDE_ANSWERS");
  const auto flag = run_binary(kBinary, {"check", "comm-volume", "--hide-answers", "--explain", "ring=30 GB"});
  CHECK(flag.status == 2);
  CHECK(flag.err.find("--hide-answers") != std::string::npos);
}

TEST_CASE("ringlab --version prints the project's version and exits 0", "[exercises][cli]") {
  const auto version = run_binary(kBinary, {"--version"});
  CHECK(version.status == 0);
  CHECK(version.out == std::string("ringlab ") + RINGLAB_TEST_VERSION + "\n");
  CHECK(version.err.empty());
  CHECK(run_binary(kBinary, {"--versions"}).status == 2);  // the negative control: a wrong flag still fails
}
