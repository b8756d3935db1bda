// The command-line contract of `ringlab exercises` and `ringlab check`: listing, show
// with variants, check's exit statuses 0 / 1 / 2, one-line errors, --json and --explain.
#include <algorithm>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tests/cli/run_binary.hpp"

using ringlab::test::run_binary;

namespace {
const std::string kBinary = RINGLAB_BINARY;
}

TEST_CASE("ringlab exercises lists at least 15 exercises, as text and JSON", "[exercises][cli]") {
  const auto text = run_binary(kBinary, {"exercises"});
  CHECK(text.status == 0);
  CHECK(text.out.find("attention-memory") != std::string::npos);
  CHECK(text.out.find("erratum-initial-transfer") != std::string::npos);
  const auto json = run_binary(kBinary, {"exercises", "--json"});
  REQUIRE(json.status == 0);
  const nlohmann::json list = nlohmann::json::parse(json.out);
  CHECK(list.size() >= 15);
  for (const auto& e : list) {
    CHECK(e.contains("id"));
    CHECK_FALSE(e["parts"].empty());
  }
}

TEST_CASE("exercises show: parameters, parts, tolerances and deterministic variants", "[exercises][cli]") {
  const auto v0 = run_binary(kBinary, {"exercises", "show", "attention-memory"});
  REQUIRE(v0.status == 0);
  CHECK(v0.out.find("256K") != std::string::npos);
  CHECK(v0.out.find("\xC2\xB1 1%") != std::string::npos);
  CHECK(v0.out.find("worked solution") == std::string::npos);  // answers only with --explain
  const auto v3 = run_binary(kBinary, {"exercises", "show", "attention-memory", "--variant", "3"});
  const auto v3_again = run_binary(kBinary, {"exercises", "show", "attention-memory", "--variant", "3"});
  CHECK(v3.status == 0);
  CHECK(v3.out == v3_again.out);
  CHECK(v3.out != v0.out);
  const auto explained = run_binary(kBinary, {"exercises", "show", "overlap-time", "--explain"});
  CHECK(explained.out.find("worked solution") != std::string::npos);
  CHECK(explained.out.find("demonstrate: ringlab ") != std::string::npos);
  const auto json = run_binary(kBinary, {"exercises", "show", "causal-skip", "--json"});
  REQUIRE(json.status == 0);
  const nlohmann::json e = nlohmann::json::parse(json.out);
  CHECK(e["numbers"]["P"] == 8);
  CHECK_FALSE(e["parts"][0].contains("expected"));
  const auto unknown = run_binary(kBinary, {"exercises", "show", "nope"});
  CHECK(unknown.status == 2);
  CHECK(unknown.err_lines().size() == 1);
}

TEST_CASE("check: exit 0 when every given part is right, 1 when some are wrong", "[exercises][cli]") {
  const auto right = run_binary(kBinary, {"check", "attention-memory", "full=4.4 TB", "ring=68.7GB", "reduction=64x"});
  CHECK(right.status == 0);
  CHECK(right.out.find("(expected 68.72 GB \xC2\xB1 1%)") != std::string::npos);
  // An unquoted answer with a space still reads as one answer.
  CHECK(run_binary(kBinary, {"check", "overlap-time", "total=80", "ms"}).status == 0);
  const auto wrong = run_binary(kBinary, {"check", "overlap-time", "total=82 ms", "hidden=100%"});
  CHECK(wrong.status == 1);
  CHECK(wrong.out.find("initial transfer") != std::string::npos);  // the known mistake is named
  const auto explained = run_binary(kBinary, {"check", "causal-skip", "wallclock_speedup=1.78x", "--explain"});
  CHECK(explained.status == 1);
  CHECK(explained.out.find("worked solution") != std::string::npos);
  CHECK(explained.out.find("ringlab plan") != std::string::npos);
  const auto json =
      run_binary(kBinary, {"check", "causal-skip", "avg_skipped=3.5", "wallclock_speedup=1.78x", "--json"});
  REQUIRE(json.status == 1);
  const nlohmann::json j = nlohmann::json::parse(json.out);
  CHECK(j["right"] == 1);
  CHECK(j["results"][1]["mistake"]["origin"].get<std::string>().find("source material") != std::string::npos);
}

TEST_CASE("check: exit 2 with one line for an unknown exercise, part or unreadable answer", "[exercises][cli]") {
  const std::vector<std::vector<std::string>> bad = {
      {"check", "no-such-exercise", "x=1"},         {"check", "attention-memory", "nope=1"},
      {"check", "attention-memory", "full=4.4 TX"}, {"check", "attention-memory"},
      {"check", "attention-memory", "full"},        {"check", "attention-memory", "--variant", "-2", "full=1 TB"},
  };
  for (const auto& args : bad) {
    const auto run = run_binary(kBinary, args);
    INFO(run.err);
    CHECK(run.status == 2);
    CHECK(run.err_lines().size() == 1);
    CHECK(run.out.empty());
  }
  CHECK(run_binary(kBinary, {"check", "attention-memory", "full=4.4 TX"}).err.find("'TX'") != std::string::npos);
}

TEST_CASE("check --variant: the numbers of the variant, not the source's", "[exercises][cli]") {
  const auto json = run_binary(kBinary, {"exercises", "show", "overlap-time", "--variant", "5", "--json", "--explain"});
  REQUIRE(json.status == 0);
  const nlohmann::json e = nlohmann::json::parse(json.out);
  const std::string total = e["parts"][1]["expected"];
  CHECK(run_binary(kBinary, {"check", "overlap-time", "--variant", "5", "total=" + total}).status == 0);
}

TEST_CASE("every exercise's demonstration command runs", "[exercises][cli]") {
  const nlohmann::json list = nlohmann::json::parse(run_binary(kBinary, {"exercises", "--json"}).out);
  for (const auto& entry : list) {
    const nlohmann::json e =
        nlohmann::json::parse(run_binary(kBinary, {"exercises", "show", entry["id"], "--json"}).out);
    std::string command = e["command"];
    command = command.substr(0, command.find('#'));
    size_t start = 0;
    while (start < command.size()) {  // "a ; b": each in turn
      const size_t end = std::min(command.find(';', start), command.size());
      std::vector<std::string> words;
      std::istringstream stream(command.substr(start, end - start));
      for (std::string word; stream >> word;) words.push_back(word);
      start = end + 1;
      if (words.empty()) continue;
      INFO(entry["id"].get<std::string>() << ": " << command);
      REQUIRE(words.front() == "ringlab");
      const auto run = run_binary(kBinary, std::vector<std::string>(words.begin() + 1, words.end()), 300);
      INFO(run.err);
      // 0, or 1 where the command demonstrates a mistake (an erratum plan, a broken lab file).
      CHECK((run.status == 0 || run.status == 1));
    }
  }
}
