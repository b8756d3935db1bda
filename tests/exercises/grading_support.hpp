// What the grader tests share: a graded file's JSON report read back, and the labs this build has.
#pragma once

#include <catch2/catch.hpp>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "tests/cli/run_binary.hpp"

namespace ringlab::test {

// `ringlab grade ... --json`: its exit status and report (each test file adds its own questions).
struct GradedReport {
  int status = -1;
  nlohmann::json report;
  std::string err;
  std::string status_of(const std::string& criterion) const {
    for (const auto& c : report["criteria"])
      if (c["id"] == criterion) return c["status"];
    return "absent";
  }
  const nlohmann::json& criterion(const std::string& id) const {
    for (const auto& c : report["criteria"])
      if (c["id"] == id) return c;
    static const nlohmann::json none;
    return none;
  }
};

// `BINARY grade LAB FILE --json EXTRA...` with the tests' grade cache (RINGLAB_GRADE_CACHE_DIR), read
// back into `Graded` (a GradedReport with a test file's own questions).
template <class Graded = GradedReport>
Graded grade_json(const std::string& binary, const std::string& lab, const std::string& file,
                  const std::vector<std::string>& extra = {}) {
  setenv("RINGLAB_GRADE_CACHE", RINGLAB_GRADE_CACHE_DIR, 1);
  std::vector<std::string> args{"grade", lab, file, "--json"};
  args.insert(args.end(), extra.begin(), extra.end());
  const auto run = run_binary(binary, args, 600);
  Graded g;
  g.status = run.status;
  g.err = run.err;
  INFO(lab << " " << file << "\n" << run.err);
  REQUIRE_NOTHROW(g.report = nlohmann::json::parse(run.out));
  return g;
}

// The labs `ringlab grade --list` names as built (lines "  0N-name ..."), in its order.
inline std::vector<std::string> labs_in_build(const std::string& binary) {
  const auto list = run_binary(binary, {"grade", "--list"});
  std::vector<std::string> labs;
  std::istringstream lines(list.out);
  for (std::string line; std::getline(lines, line);)
    if (line.rfind("  0", 0) == 0 && line.find("not in this build") == std::string::npos)
      labs.push_back(line.substr(2, line.find(' ', 2) - 2));
  return labs;
}

}  // namespace ringlab::test
