// bench_dry_run — wall time of `ringlab run --dry-run` work (plan build + dry executor + memory
// model) at scale, against the targets of issue 5:
//   1. P = 1024, S = 1,048,576, causal, fwd+bwd, every algorithm (and the zigzag layout):  < 2 s each
//   2. P = 16384, S = 1,048,576, causal, fwd+bwd:                                          < 60 s each
// Heads: H = HKV = 32, D = 128, bf16 (h100-ib preset); pure Ulysses needs H divisible by P, so
// its rows use H = HKV = P. One run per row (the dry executor is deterministic).
// Usage: bench_dry_run [--quick]   (--quick: only the P = 1024 rows)
// Exit status: 0 when every row ran (a missed target is reported in its row and the footer, as
// scripts/bench expects), 2 on bad usage.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "bench/report_row.hpp"
#include "executors/dry/dry_executor.hpp"

using namespace ringlab;

namespace {

struct Row {
  const char* label;
  Algorithm algo;
  LayoutKind layout;
  int64_t ranks, ulysses;
  double target_s;
};

struct Slowest {
  double seconds = 0, target_s = 0;
  std::string row;  // "ring zigzag"
};

}  // namespace

int main(int argc, char** argv) {
  const bool quick = bench::quick_flag(argc, argv, "bench_dry_run");
  const int64_t S = 1 << 20;
  std::vector<Row> rows;
  for (int64_t P : {int64_t{1024}, int64_t{16384}}) {
    if (quick && P > 1024) continue;
    const double target = P == 1024 ? 2.0 : 60.0;
    rows.push_back({"ring", Algorithm::ring, LayoutKind::contiguous, P, 1, target});
    rows.push_back({"ring", Algorithm::ring, LayoutKind::zigzag, P, 1, target});
    rows.push_back({"ring", Algorithm::ring, LayoutKind::striped, P, 1, target});
    rows.push_back({"allgather", Algorithm::allgather, LayoutKind::contiguous, P, 1, target});
    rows.push_back({"ulysses", Algorithm::ulysses, LayoutKind::contiguous, P, P, target});
    rows.push_back({"hybrid U=8", Algorithm::hybrid, LayoutKind::zigzag, P, 8, target});
  }
  const Hardware hw = hardware_preset("h100-ib", 128);
  std::printf("bench_dry_run: S=%lld causal fwd+bwd, D=128, hardware %s, one thread\n", static_cast<long long>(S),
              hw.name.c_str());
  std::printf("%-12s %-11s %6s %6s %10s %12s %9s %8s\n", "algorithm", "layout", "P", "H", "time_s", "simulated_ms",
              "target_s", "result");
  std::printf("%-12s %-11s %6s %6s %10s %12s %9s %8s\n", "", "", "", "", "s", "ms", "s", "");
  int missed = 0;
  std::map<int64_t, Slowest> slowest;  // per P, for the summary row
  for (const Row& row : rows) {
    PlanSpec spec;
    spec.algo = row.algo;
    spec.layout = row.layout;
    spec.ranks = row.ranks;
    spec.ulysses = row.ulysses;
    const int64_t heads = row.algo == Algorithm::ulysses ? row.ranks : 32;
    spec.dims = {1, S, heads, heads, 128};
    spec.causal = true;
    spec.backward = true;
    spec.element_bytes = hw.element_bytes;
    const auto start = std::chrono::steady_clock::now();
    const Plan plan = build_plan(spec);
    const DryResult result = run_dry_plan(plan, hw);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const bool met = seconds < row.target_s;
    missed += met ? 0 : 1;
    std::printf("%-12s %-11s %6lld %6lld %10.3f %12.3f %9.0f %8s\n", row.label, layout_name(row.layout),
                static_cast<long long>(row.ranks), static_cast<long long>(heads), seconds, result.makespan_s * 1e3,
                row.target_s, met ? "met" : "MISSED");
    std::fflush(stdout);
    Slowest& worst = slowest[row.ranks];
    if (seconds >= worst.seconds)
      worst = {seconds, row.target_s, std::string(row.label) + " " + layout_name(row.layout)};
  }
  for (const auto& [ranks, worst] : slowest) {
    bench::report_row("cost model",
                      bench::format("dry run P=%lld S=%lld causal fwd+bwd, slowest of 6 algorithms/layouts",
                                    static_cast<long long>(ranks), static_cast<long long>(S)),
                      bench::format("%.2f s (%s)", worst.seconds, worst.row.c_str()),
                      bench::format("< %.0f s", worst.target_s), bench::verdict(worst.seconds < worst.target_s));
  }
  std::printf("%s: %zu rows, %d missed\n", missed ? "MISSED" : "OK", rows.size(), missed);
  return 0;
}
