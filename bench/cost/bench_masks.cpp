// bench_masks — packed documents and sliding windows, against their targets:
//   1. balance: P=8, S=65536, --docs random:16 --causal (and --window 4096): max/mean FLOPs of the
//      per-document zig-zag <= 1.05 and of the balanced layout <= 1.02, contiguous printed beside;
//   2. window: S=131072, P=16, W=4096, contiguous causal: the window-bounded ring's K/V bytes
//      <= (hops + 1)/P of the full causal ring's, and its simulated time <= 0.25x (h100-nvlink);
//   3. redundant traffic under a document mask: K/V bytes received that the receiver never uses,
//      for the plain ring (every block to every rank) and for the plans ringlab builds (target 0);
//   4. simulator speed with masks: a packed-document run at P=8 within 1.15x of the single-rank
//      blockwise kernel on the same mask (same threads);
//   5. dry run P=1024, S=1M, --docs random:512 --causal, fwd+bwd: < 2 s.
// Usage: bench_masks [--quick]   (--quick: smaller sizes, figures printed, nothing judged)
// Exit status: 0 when every row ran and the simulator's output matched the kernel's, 1 when not,
// 2 on bad usage.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "bench/report_row.hpp"
#include "executors/dry/dry_executor.hpp"
#include "executors/sim/sim_executor.hpp"
#include "reference/compare.hpp"
#include "reference/flash_attention.hpp"
#include "reference/inputs.hpp"
#include "sim/plan/queries.hpp"

using namespace ringlab;
using bench::format;
using bench::report_row;

namespace {

struct Traffic {
  double imbalance = 0;      // max/mean FLOPs over ranks
  int64_t received = 0;      // K/V bytes received, all ranks
  int64_t unused = 0;        // of them, blocks the receiver never uses
  int64_t plain_unused = 0;  // the same for a plain ring: every other block to every rank
  int64_t plain_received = 0;
};

Traffic traffic(const Plan& plan) {
  Traffic t;
  double max_flops = 0, sum = 0;
  const int64_t block = payload_bytes(plan, Payload::kv);
  for (int64_t r = 0; r < plan.ranks(); ++r) {
    const RankWork w = rank_work(plan, r, expand(plan, r));
    max_flops = std::max(max_flops, w.flops), sum += w.flops;
    t.received += w.kv_bytes_received, t.unused += w.kv_bytes_unused;
    for (int64_t g = 0; g < plan.ring(); ++g) {
      if (g == plan.ring_position(r)) continue;
      t.plain_received += block;
      if (resolve_compute(plan, r, g, Pass::forward).pairs == 0) t.plain_unused += block;
    }
  }
  t.imbalance = sum > 0 ? max_flops * static_cast<double>(plan.ranks()) / sum : 1.0;
  return t;
}

PlanSpec spec_of(LayoutKind layout, int64_t P, int64_t S, const std::vector<int64_t>& documents, int64_t window) {
  PlanSpec spec;
  spec.layout = layout;
  spec.ranks = P;
  spec.dims = {1, S, 8, 8, 128};
  spec.causal = true;
  spec.window = window;
  spec.documents = documents;
  spec.element_bytes = 2;
  return spec;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = bench::quick_flag(argc, argv, "bench_masks");
  auto judged = [&](bool met) { return quick ? "-" : bench::verdict(met); };
  bool ok = true;

  // ---- 1. balance and 3. redundant traffic ------------------------------------------------------
  const int64_t P = 8, S = quick ? 8192 : 65536;
  // One set of documents for every layout: lengths in the per-document zig-zag's multiples.
  const std::vector<int64_t> docs = layout_documents("random:16", S, 0, LayoutKind::zigzag, P, 0);
  std::printf("bench_masks: P=%lld S=%lld causal, 16 documents (seed 0): %s\n", static_cast<long long>(P),
              static_cast<long long>(S), documents_string(docs, 16).c_str());
  std::printf("%-34s %12s %14s %14s %12s\n", "layout", "max/mean", "K/V recv MB", "unused MB", "plain unused");
  struct BalanceRow {
    const char* label;
    LayoutKind layout;
    std::vector<int64_t> documents;
    int64_t window;
    double target;
  };
  const std::vector<BalanceRow> balance = {
      {"contiguous, documents", LayoutKind::contiguous, docs, 0, 0},
      {"zig-zag per document, documents", LayoutKind::zigzag, docs, 0, 1.05},
      {"balanced, documents", LayoutKind::balanced, docs, 0, 1.02},
      {"contiguous, window 4096", LayoutKind::contiguous, {}, 4096, 0},
      {"zig-zag, window 4096", LayoutKind::zigzag, {}, 4096, 1.05},
      {"balanced, window 4096", LayoutKind::balanced, {}, 4096, 1.02},
  };
  double contiguous_docs = 0, contiguous_window = 0;
  for (const BalanceRow& row : balance) {
    const Plan plan = build_plan(spec_of(row.layout, P, S, row.documents, row.window));
    const Traffic t = traffic(plan);
    std::printf("%-34s %12.3f %14.3f %14.3f %11.1f%%\n", row.label, t.imbalance, t.received / 1e6, t.unused / 1e6,
                100.0 * static_cast<double>(t.plain_unused) / static_cast<double>(t.plain_received));
    if (row.target == 0) {
      (row.window ? contiguous_window : contiguous_docs) = t.imbalance;
      continue;
    }
    report_row("masks",
               format("max/mean FLOPs, P=%lld S=%lld causal, %s", static_cast<long long>(P), static_cast<long long>(S),
                      row.label),
               format("%.3f (contiguous %.3f)", t.imbalance, row.window ? contiguous_window : contiguous_docs),
               format("<= %.2f", row.target), judged(t.imbalance <= row.target));
    if (!row.documents.empty() && row.layout != LayoutKind::contiguous) {
      report_row("masks", format("K/V bytes received and never used, documents, %s", row.label),
                 format("%.1f%% (plain ring %.1f%%)", 100.0 * static_cast<double>(t.unused) / t.received,
                        100.0 * static_cast<double>(t.plain_unused) / t.plain_received),
                 "0", judged(t.unused == 0));
    }
  }
  {
    const Plan plan = build_plan(spec_of(LayoutKind::contiguous, P, S, docs, 0));
    const Traffic t = traffic(plan);
    report_row("masks",
               "K/V bytes received and never used, documents, contiguous ring (trimmed: a block stops at the last rank "
               "that needs it)",
               format("%.1f%% (plain ring %.1f%%)", 100.0 * static_cast<double>(t.unused) / t.received,
                      100.0 * static_cast<double>(t.plain_unused) / t.plain_received),
               "0", judged(t.unused == 0));
  }

  // ---- 2. the window-bounded ring ----------------------------------------------------------------
  {
    const int64_t WP = 16, WS = quick ? 16384 : 131072, W = quick ? 512 : 4096;
    const Hardware hw = hardware_preset("h100-nvlink", 128);
    const Plan window = build_plan(spec_of(LayoutKind::contiguous, WP, WS, {}, W));
    const Plan full = build_plan(spec_of(LayoutKind::contiguous, WP, WS, {}, 0));
    const Traffic tw = traffic(window), tf = traffic(full);
    const int64_t hops = ring_hops(window.spec());
    const double bytes_ratio = static_cast<double>(tw.received) / static_cast<double>(tf.received);
    const double bound = static_cast<double>(hops + 1) / static_cast<double>(WP);
    const double t_window = run_dry_plan(window, hw).makespan_s, t_full = run_dry_plan(full, hw).makespan_s;
    std::printf("\nwindow: S=%lld P=%lld W=%lld contiguous causal, %s: hops %lld of %lld\n", static_cast<long long>(WS),
                static_cast<long long>(WP), static_cast<long long>(W), hw.name.c_str(), static_cast<long long>(hops),
                static_cast<long long>(WP - 1));
    std::printf("  K/V received: window ring %.3f MB, full causal ring %.3f MB (%.4f of it)\n", tw.received / 1e6,
                tf.received / 1e6, bytes_ratio);
    std::printf("  simulated time: window ring %.3f ms, full causal ring %.3f ms (%.3fx)\n", t_window * 1e3,
                t_full * 1e3, t_window / t_full);
    report_row("masks",
               format("window ring K/V bytes / full causal ring's (S=%lld P=16 W=%lld)", static_cast<long long>(WS),
                      static_cast<long long>(W)),
               format("%.4f (%lld hops)", bytes_ratio, static_cast<long long>(hops)),
               format("<= %.4f ((hops+1)/P)", bound), judged(bytes_ratio <= bound + 1e-12));
    report_row("masks", "window ring simulated time / full causal ring's (cost model, h100-nvlink)",
               format("%.3fx (%.3f / %.3f ms)", t_window / t_full, t_window * 1e3, t_full * 1e3), "<= 0.25x",
               judged(t_window / t_full <= 0.25));
  }

  // ---- 4. the simulator with documents ---------------------------------------------------------
  {
    const int64_t SS = quick ? 2048 : 8192;
    const std::vector<int64_t> sim_docs = layout_documents("random:16", SS, 1, LayoutKind::zigzag, P, 0);
    PlanSpec spec = spec_of(LayoutKind::contiguous, P, SS, sim_docs, 0);
    spec.dims = {1, SS, 8, 8, 64};
    spec.element_bytes = 4;
    const AttentionInputs<float> x = make_inputs(spec.dims, 0, false);
    const Mask mask = spec.mask();
    const int repeat = quick ? 1 : 3;
    AttentionOutput<float> single = flash_attention(x.q, x.k, x.v, mask);
    const double single_s = bench::best_seconds(repeat, [&] { single = flash_attention(x.q, x.k, x.v, mask); });
    const Plan plan = build_plan(spec);
    ExecutionResult sim = SimExecutor().execute(plan, x, {});
    const double sim_s = bench::best_seconds(repeat, [&] { sim = SimExecutor().execute(plan, x, {}); });
    const bool same = !sim.failure && compare(sim.outputs.out, single.out, {2e-5, 1e-4}).ok &&
                      compare(sim.outputs.lse, single.lse, {2e-5, 1e-4}).ok;
    ok = ok && same;
    std::printf("\nsimulator: S=%lld H=8 D=64 causal, 16 documents, contiguous, %d threads, best of %d\n",
                static_cast<long long>(SS), omp_get_max_threads(), repeat);
    std::printf("  single-rank blockwise kernel %.1f ms, sim executor P=8 %.1f ms (%.2fx)%s\n", single_s * 1e3,
                sim_s * 1e3, sim_s / single_s, same ? "" : "  OUTPUTS DIFFER");
    report_row(
        "masks",
        format("sim P=8 time / single-rank kernel time, packed documents (S=%lld)", static_cast<long long>(SS)),
        format("%.2fx (%.0f / %.0f ms)%s", sim_s / single_s, sim_s * 1e3, single_s * 1e3, same ? "" : ", CHECK FAILED"),
        "<= 1.15x", same ? judged(sim_s / single_s <= 1.15) : "MISSED");
  }

  // ---- 5. a dry run at scale -------------------------------------------------------------------
  {
    const int64_t DP = quick ? 128 : 1024, DS = quick ? 131072 : 1 << 20;
    const Hardware hw = hardware_preset("h100-ib", 128);
    const auto start = std::chrono::steady_clock::now();
    PlanSpec spec = spec_of(LayoutKind::contiguous, DP, DS,
                            layout_documents("random:512", DS, 0, LayoutKind::contiguous, DP, 0), 0);
    spec.dims = {1, DS, 32, 32, 128};
    spec.backward = true;
    const DryResult result = run_dry_plan(build_plan(spec), hw);
    const double seconds = seconds_since(start);
    std::printf("\ndry run: P=%lld S=%lld causal fwd+bwd, 512 documents, contiguous: %.3f s (simulated %.3f ms)\n",
                static_cast<long long>(DP), static_cast<long long>(DS), seconds, result.makespan_s * 1e3);
    report_row("masks",
               format("dry run P=%lld S=%lld --docs random:512 --causal fwd+bwd", static_cast<long long>(DP),
                      static_cast<long long>(DS)),
               format("%.2f s", seconds), "< 2 s", judged(seconds < 2.0));
  }
  std::printf("%s\n", quick ? "QUICK: every mask figure printed" : "done");
  return ok ? 0 : 1;
}
