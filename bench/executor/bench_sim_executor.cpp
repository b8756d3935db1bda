// bench_sim_executor — the simulator's overhead, measured side by side in one run:
//   1. sim executor, P = 8 ring, non-causal vs the single-rank blockwise kernel on the same total
//      work (S = 8192, H = 8, D = 64), both on all cores.          target: <= 1.15x the time
//   2. zig-zag causal with skip vs non-causal, both P = 8 ring.     target: <= 0.6x the time
// Every timed result is also checked against the single-rank kernel's (fp32 vs fp32).
// Usage: bench_sim_executor [--seq S] [--repeat N]
#include <omp.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "bench/report_row.hpp"
#include "executors/sim/sim_executor.hpp"
#include "reference/compare.hpp"
#include "reference/flash_attention.hpp"
#include "reference/inputs.hpp"

using namespace ringlab;
using bench::best_seconds;

namespace {

ExecutionResult simulate(const PlanSpec& spec, const AttentionInputs<float>& x) {
  ExecutionResult result = SimExecutor().execute(build_plan(spec), x, {});
  if (result.failure) {
    std::fprintf(stderr, "bench_sim_executor: run failed: %s\n", result.failure->description.c_str());
    std::exit(1);
  }
  return result;
}

bool same(const Tensor<float>& a, const Tensor<float>& b) { return compare(a, b, {2e-5, 1e-4}).ok; }

}  // namespace

int main(int argc, char** argv) {
  int64_t seq = 8192;
  int repeat = 3;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--seq") && i + 1 < argc)
      seq = std::atoll(argv[++i]);
    else if (!std::strcmp(argv[i], "--repeat") && i + 1 < argc)
      repeat = std::atoi(argv[++i]);
    else {
      std::fprintf(stderr, "usage: bench_sim_executor [--seq S] [--repeat N]\n");
      return 2;
    }
  }
  const AttentionDims dims{1, seq, 8, 8, 64};
  const AttentionInputs<float> x = make_inputs(dims, 0, false);
  PlanSpec ring;
  ring.ranks = 8;
  ring.dims = dims;
  PlanSpec zigzag = ring;
  zigzag.layout = LayoutKind::zigzag;
  zigzag.causal = true;

  AttentionOutput<float> single = flash_attention(x.q, x.k, x.v, MaskKind::none);
  const double single_s = best_seconds(repeat, [&] { single = flash_attention(x.q, x.k, x.v, MaskKind::none); });
  ExecutionResult sim = simulate(ring, x);
  const double sim_s = best_seconds(repeat, [&] { sim = simulate(ring, x); });
  const AttentionOutput<float> causal_single = flash_attention(x.q, x.k, x.v, MaskKind::causal);
  ExecutionResult causal = simulate(zigzag, x);
  const double causal_s = best_seconds(repeat, [&] { causal = simulate(zigzag, x); });

  const bool sim_ok = same(sim.outputs.out, single.out) && same(sim.outputs.lse, single.lse);
  const bool causal_ok = same(causal.outputs.out, causal_single.out) && same(causal.outputs.lse, causal_single.lse);
  std::printf("bench_sim_executor: B=1 S=%lld H=8 D=64, %d cores, best of %d\n", static_cast<long long>(seq),
              omp_get_max_threads(), repeat);
  std::printf("%-52s %10s %8s\n", "run", "time_ms", "check");
  std::printf("%-52s %10.1f %8s\n", "single-rank blockwise kernel, non-causal", single_s * 1e3, "-");
  std::printf("%-52s %10.1f %8s\n", "sim executor, ring P=8 contiguous, non-causal", sim_s * 1e3,
              sim_ok ? "ok" : "FAIL");
  std::printf("%-52s %10.1f %8s\n", "sim executor, ring P=8 zigzag, causal with skip", causal_s * 1e3,
              causal_ok ? "ok" : "FAIL");
  std::printf("ratios\n");
  const double overhead = sim_s / single_s, saving = causal_s / sim_s;
  std::printf("  sim P=8 / single rank, same work           %5.2fx  (target <= 1.15x) %s\n", overhead,
              overhead <= 1.15 ? "met" : "MISSED");
  std::printf("  zigzag causal / non-causal, both sim P=8    %5.2fx  (target <= 0.60x) %s\n", saving,
              saving <= 0.6 ? "met" : "MISSED");
  const std::string shape =
      bench::format("S=%lld H=8 D=64, %d threads", static_cast<long long>(seq), omp_get_max_threads());
  bench::report_row(
      "simulator", "sim executor ring P=8 time / single-rank kernel time, same work (" + shape + ")",
      bench::format("%.2fx (%.0f / %.0f ms)%s", overhead, sim_s * 1e3, single_s * 1e3, sim_ok ? "" : ", CHECK FAILED"),
      "<= 1.15x", sim_ok ? bench::verdict(overhead <= 1.15) : "MISSED");
  bench::report_row(
      "simulator", "zigzag causal (skip) time / non-causal time, both sim P=8",
      bench::format("%.2fx (%.0f / %.0f ms)%s", saving, causal_s * 1e3, sim_s * 1e3, causal_ok ? "" : ", CHECK FAILED"),
      "<= 0.60x", causal_ok ? bench::verdict(saving <= 0.6) : "MISSED");
  return sim_ok && causal_ok ? 0 : 1;
}
