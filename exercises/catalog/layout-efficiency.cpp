// Exercise layout-efficiency - balance efficiency (mean / largest causal work per GPU) of the
// contiguous, zig-zag and striped layouts.
#include <algorithm>
#include <numeric>
#include <vector>

#include "exercises/catalog/catalog.hpp"
#include "exercises/catalog/support.hpp"

namespace ringlab::exercises::catalog::layout_efficiency {

static void write(VariantDraw& draw, Exercise& e) {
  const RanksTokens p = draw_ranks_tokens(draw, {8, 8192}, {2, 4, 6, 8, 16, 32}, {1024, 8192});
  const int64_t seq = p.seq();
  auto efficiency = [&](LayoutKind kind) {
    const std::vector<int64_t> pairs = causal_pairs_per_rank(Layout(kind, seq, p.ranks));
    const double mean = double(std::accumulate(pairs.begin(), pairs.end(), int64_t{0})) / double(pairs.size());
    return mean / double(*std::max_element(pairs.begin(), pairs.end()));
  };
  const double contiguous = efficiency(LayoutKind::contiguous), zigzag = efficiency(LayoutKind::zigzag),
               striped = efficiency(LayoutKind::striped);

  p.write_parameters(e, "causal");
  e.statement =
      "A synchronous ring runs at the pace of its busiest GPU. Call a layout's balance efficiency the mean\n"
      "causal work per GPU divided by the largest (100% = perfectly balanced).\n"
      "contiguous: the efficiency of the contiguous layout.   zigzag: of the 2P-chunk zig-zag layout.\n"
      "striped: of the striped layout (token i on GPU i mod P).";
  e.parts = {fraction_part("contiguous", "balance efficiency, contiguous", contiguous, 0.002),
             fraction_part("zigzag", "balance efficiency, zig-zag", zigzag, 0.002),
             fraction_part("striped", "balance efficiency, striped", striped, 0.002)};
  e.solution = lines({
      cat("contiguous: mean S(S+1)/(2P), max (P-1) n^2 + n(n+1)/2 -> ", percent_text(contiguous), " (about P/(2P-1))."),
      cat("zig-zag: GPU r holds chunks r and 2P-1-r, whose work adds up to the same on every GPU -> ",
          percent_text(zigzag), "."),
      cat("striped: GPU r's tokens r, r+P, ... are late by at most P-1 positions -> ", percent_text(striped), "."),
      "For comparison, zhuzilin/ring-flash-attention measured 52.1% (contiguous) and 85.2% (zig-zag) of ideal on",
      "8 H800s: the contiguous figure is this balance limit; zig-zag loses the rest to communication and kernels.",
  });
  e.command = demo_command("run", p.ranks, 128 * p.ranks, "--causal --layout zigzag", "load imbalance line");
}

constexpr CatalogEntry kEntry{
    "layout-efficiency", "How balanced is each layout?",
    "context-parallelism notes, sections 5-6 (and the zhuzilin ring-flash-attention benchmark)", "notes §5-6", write};

}  // namespace ringlab::exercises::catalog::layout_efficiency
