// Exercise erratum-skip-speedup - Erratum 4: skipped work is saved time only with a balanced layout
// (causal_work, support.hpp).
#include "exercises/catalog/catalog.hpp"
#include "exercises/catalog/support.hpp"

namespace ringlab::exercises::catalog::erratum_skip_speedup {

static void write(VariantDraw& draw, Exercise& e) {
  const RanksTokens p = draw_ranks_tokens(draw, {8, 8192}, {4, 6, 8, 12, 16}, {2048, 8192});
  const int64_t seq = p.seq();
  const AttentionDims dims = dims_of(1, seq, 1, 1, 128);
  const CausalWork contiguous = causal_work(dims, p.ranks, LayoutKind::contiguous);
  const CausalWork zigzag = causal_work(dims, p.ranks, LayoutKind::zigzag);
  const CausalWork striped = causal_work(dims, p.ranks, LayoutKind::striped);
  const double slowest_work = double(contiguous.max_pairs()) / double(contiguous.max_pairs_no_skip());
  const double P = double(p.ranks);

  p.write_parameters(e, "causal, fully masked blocks skipped");
  e.statement =
      "The source calls P / (P - (P-1)/2) (1.78x for P = 8) the speedup of skipping fully masked blocks.\n"
      "slowest_rank: with the contiguous layout, which GPU finishes last?\n"
      "slowest_work: what fraction of its no-skip work does that GPU still do?\n"
      "zigzag / striped: the wall-clock speedup of skipping with the zig-zag and the striped layouts.";
  e.model =
      "as in exercise causal-skip: a step costs the pairs its kernel computes (diagonal ~ half), transfers\n"
      "are hidden, the wall clock is the slowest GPU's sum";
  e.parts = {count_part("slowest_rank", "the GPU that finishes last (contiguous)", contiguous.slowest_rank),
             fraction_part("slowest_work", "the slowest GPU's work with skipping / without", slowest_work, 0.002)
                 .mistake((P + 1) / (2 * P), "the source material's reasoning (exercise 4)",
                          "4.5 of 8 steps is the average GPU; the slowest GPU (the latest tokens) skips nothing"),
             ratio_part("zigzag", "wall-clock speedup of skipping, zig-zag", zigzag.speedup(), 0.01),
             ratio_part("striped", "wall-clock speedup of skipping, striped", striped.speedup(), 0.01)};
  e.solution = lines({
      cat("Contiguous: GPU P-1 = ", contiguous.slowest_rank,
          " holds the latest tokens and needs every block: (P-1) full blocks"),
      cat("and its diagonal, ", percent_text(slowest_work), " of its no-skip work. The wall clock follows it: speedup ",
          ratio_text(contiguous.speedup()), ", not 1.78x."),
      cat("zig-zag: every GPU pairs an early chunk with a late one and does half its no-skip work: ",
          ratio_text(zigzag.speedup()), "."),
      cat("striped: every GPU's tokens are spread evenly: ", ratio_text(striped.speedup()), "."),
      "Skipping removes about half of the pairs; only a balanced layout turns that into time.",
  });
  e.command = demo_command("run", p.ranks, 128 * p.ranks, "--causal --layout zigzag",
                           "compare the load-imbalance line with --layout contiguous");
}

constexpr CatalogEntry kEntry{"erratum-skip-speedup", "Erratum 4: work saved is not time saved",
                              "the book's erratum 4 (the source material, exercise 4)", "erratum 4", write};

}  // namespace ringlab::exercises::catalog::erratum_skip_speedup
