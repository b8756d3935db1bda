// `ringlab-gpu` as users call it (gpu_main with an argv): exit statuses, the pinned table format,
// JSON and trace. The usage checks run everywhere; the runs need a device.
#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "cli/ringlab-gpu/gpu_command.hpp"
#include "sim/pipeline/trace.hpp"
#include "tests/gpu/gpu_test_support.hpp"

namespace ringlab {
namespace {

using Outcome = test::CliOutcome;
Outcome run_cli(std::vector<std::string> args) { return test::run_gpu_cli(std::move(args)); }

// Each usage error with words its one line must hold: the problem it names, so that another exit 2
// (a missing device is one) cannot pass for it. All are found before the device is looked for.
struct UsageCase {
  std::vector<std::string> args;
  std::string names;
};

std::vector<UsageCase> usage_cases() {
  return {{{"run", "--no-such-flag"}, "--no-such-flag"},
          {{"run", "--dtype", "fp64"}, "fp64"},
          {{"run", "--executor", "mpi"}, "mpi"},
          {{"run", "--dry-run"}, "--dry-run"},
          {{"run", "--inject", "drop@1:0"}, "--inject"},
          {{"run", "--dim", "96"}, "D = 64 or 128"},
          {{"run", "--heads", "8", "--kv-heads", "3"}, "HKV=3 does not divide H=8"}};
}

}  // namespace

TEST_CASE("ringlab-gpu: usage errors exit 2 with one line naming the problem, with or without a device", "[gpu][cli]") {
  std::string why;
  const bool device = gpu::device_available(&why);
  for (const UsageCase& c : usage_cases()) {
    const Outcome o = run_cli(c.args);
    INFO(c.args[1] << ": " << o.err);
    CHECK(o.status == 2);
    CHECK(o.err.rfind("ringlab-gpu: error: ", 0) == 0);
    CHECK(std::count(o.err.begin(), o.err.end(), '\n') == 1);
    CHECK_THAT(o.err, Catch::Contains(c.names));
  }
  // Uneven S is padded, not refused: on a device the run verifies (without one it stops at the check).
  const Outcome padded = run_cli(
      {"run", "--ranks", "3", "--seq", "1000", "--layout", "zigzag", "--heads", "2", "--kv-heads", "1", "--dim", "64"});
  INFO(padded.out << padded.err);
  CHECK(padded.status == (device ? 0 : 2));
}

TEST_CASE("ringlab-gpu: without a device, run says so and exits 2", "[gpu][cli]") {
  std::string why;
  if (gpu::device_available(&why)) {
    SUCCEED("a device is present: the no-device message is not reachable here");
    return;
  }
  const Outcome o = run_cli({"run", "--ranks", "2"});
  CHECK(o.status == 2);
  CHECK_THAT(o.err, Catch::Contains("no CUDA device visible"));
  CHECK_THAT(o.err, Catch::Contains("ringlab run"));
}

TEST_CASE("ringlab-gpu run: the verification table, PASS and exit 0", "[gpu][cli]") {
  RINGLAB_REQUIRE_GPU();
  const Outcome o = run_cli({"run", "--ranks", "4", "--layout", "zigzag", "--causal", "--backward", "--seq", "1024",
                             "--heads", "8", "--kv-heads", "2", "--dim", "128"});
  INFO(o.out << o.err);
  CHECK(o.status == 0);
  CHECK_THAT(o.out, Catch::StartsWith("ringlab-gpu run | ring | zigzag"));
  CHECK_THAT(o.out, Catch::Contains("executor: gpu-streams, 4 virtual ranks"));
  CHECK_THAT(o.out, Catch::Contains(
                        "tensor shape                max_abs_err max_rel_err   tol_abs   tol_rel tol_used  result"));
  CHECK_THAT(o.out, Catch::Contains("PASS: 5 of 5 tensors within tolerance"));
  CHECK_THAT(o.out, Catch::Contains("device time:"));
}

TEST_CASE("ringlab-gpu run: an erratum exits 1 with FAIL", "[gpu][cli]") {
  RINGLAB_REQUIRE_GPU();
  const Outcome o = run_cli({"run", "--ranks", "3", "--seq", "192", "--backward", "--erratum", "reverse-dkv"});
  CHECK(o.status == 1);
  CHECK_THAT(o.out, Catch::Contains("FAIL"));
  CHECK_THAT(o.out, Catch::Contains("plan checker: this erratum variant is wrong by construction"));
}

TEST_CASE("ringlab-gpu run: --json and --trace", "[gpu][cli]") {
  RINGLAB_REQUIRE_GPU();
  const std::string trace = (std::filesystem::temp_directory_path() / "ringlab_gpu_cli_trace.json").string();
  std::filesystem::remove(trace);
  const Outcome o =
      run_cli({"run", "--ranks", "2", "--algo", "ulysses", "--dtype", "fp32", "--json", "--trace", trace});
  REQUIRE(o.status == 0);
  const nlohmann::json summary = nlohmann::json::parse(o.out);
  CHECK(summary["dtype"] == "fp32");
  CHECK(summary["verification"]["ok"] == true);
  CHECK(summary["ranks"].size() == 2);
  CHECK(summary["device_ms"].get<double>() > 0);
  const std::vector<TraceEvent> events = read_chrome_trace(trace);
  bool compute = false, comm = false;
  for (const TraceEvent& e : events) {
    compute = compute || (e.lane == TraceLane::compute && e.flops > 0);
    comm = comm || (e.lane == TraceLane::comm && e.name == "all_to_all" && e.bytes > 0);
  }
  CHECK(compute);
  CHECK(comm);
  std::filesystem::remove(trace);
}

}  // namespace ringlab
