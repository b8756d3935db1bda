// libFuzzer target: the `run` command-line parser and validation. The input is split into
// arguments at NUL and newline bytes; any argument list either parses and validates, or fails
// with a CLI11 ParseError or a UsageError — and a valid one compiles into a plan.
#include <CLI/CLI.hpp>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "reference/error.hpp"
#include "sim/pipeline/config.hpp"
#include "sim/pipeline/problem.hpp"
#include "sim/plan/plan.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::string> args{"run"};
  std::string current;
  for (size_t i = 0; i < size; ++i) {
    const char c = static_cast<char>(data[i]);
    if (c == '\0' || c == '\n') {
      if (!current.empty()) args.push_back(current);
      current.clear();
    } else {
      current += c;
    }
  }
  if (!current.empty()) args.push_back(current);
  ringlab::RunConfig config;
  CLI::App app{"fuzz"};
  ringlab::add_run_flags(app, config);
  try {
    std::vector<std::string> reversed(args.rbegin(), args.rend() - 1);  // CLI11 parses a reversed vector
    app.parse(reversed);
    const ringlab::Problem problem = ringlab::resolve_problem(config);
    // Keep plan building to sizes a fuzzer iteration can afford.
    if (config.ranks <= 64 && config.dims.seq <= (1 << 20)) (void)ringlab::build_plan(problem.plan_spec(4));
  } catch (const CLI::Error&) {
  } catch (const ringlab::UsageError&) {
  }
  return 0;
}
