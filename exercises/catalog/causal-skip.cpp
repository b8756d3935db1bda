// Exercise causal-skip - skipping the fully masked blocks of a causal ring: the work saved against
// the wall clock saved, contiguous and zig-zag (causal_work, support.hpp).
#include "exercises/catalog/catalog.hpp"
#include "exercises/catalog/support.hpp"

namespace ringlab::exercises::catalog {

namespace {

constexpr const char* kCausalWorkModel =
    "Compute-bound model: a step costs the (query, key) pairs its kernel computes - a full block n^2\n"
    "(n = S/P), the diagonal block n(n+1)/2 (the kernel skips masked tiles), a skipped block nothing;\n"
    "without skipping every block costs n^2. Transfers are hidden. The wall clock is the slowest\n"
    "rank's sum (ringlab: resolve_compute over every (rank, step) of the plan).";

Exercise write(VariantDraw& draw) {
  const RanksTokens p = draw_ranks_tokens(draw, {8, 8192}, {4, 6, 8, 12, 16, 32}, {4096, 8192});
  const int64_t seq = p.seq();
  const AttentionDims dims = dims_of(1, seq, 1, 1, 128);
  const CausalWork contiguous = causal_work(dims, p.ranks, LayoutKind::contiguous);
  const CausalWork zigzag = causal_work(dims, p.ranks, LayoutKind::zigzag);
  int64_t skipped = 0;
  for (int64_t s : contiguous.rank_skipped) skipped += s;
  const double P = double(p.ranks);
  const double avg_skipped = double(skipped) / P;
  const double work_reduction = double(skipped) / (P * P);

  Exercise e;
  e.numbers = {{"P", P}, {"n", double(p.tokens_per_rank)}, {"S", double(seq)}};
  e.parameters = {{"P", cat(p.ranks), "GPUs, P ring steps"},
                  {"S", tokens_text(seq) + " tokens", cat("sequence length, n = S/P = ", p.tokens_per_rank, " per GPU")},
                  {"mask", "causal", "by global token position"},
                  {"layout", "contiguous", "GPU r holds tokens [r n, (r+1) n)"}};
  e.statement =
      "Causal Ring Attention with the contiguous layout: at step k GPU r holds the K/V of GPU r-k (mod P).\n"
      "A block whose keys all come after all of the GPU's queries is fully masked and can be skipped.\n"
      "avg_skipped: how many of the P steps does a GPU skip, on average?\n"
      "work_reduction: what fraction of all block steps is skipped?\n"
      "wallclock_speedup: by what factor does skipping shorten the forward's wall clock (cost model below)?\n"
      "balanced_speedup: the same with the zig-zag layout (2P chunks, GPU r holds chunks r and 2P-1-r).";
  e.model = kCausalWorkModel;
  Part avg = number_part("avg_skipped", "steps skipped per GPU, averaged over the GPUs", avg_skipped);
  Part reduction = fraction_part("work_reduction", "skipped block steps / all P^2 block steps", work_reduction, 0.001);
  mistake(reduction, 0.5, "a common slip",
          "50% counts (query, key) pairs with the diagonal blocks at half cost; this part counts block steps, a "
          "computed diagonal block being one step");
  Part wall = ratio_part("wallclock_speedup", "forward wall clock without skipping / with skipping, contiguous layout",
                         contiguous.speedup(), 0.01);
  mistake(wall, P / (P - avg_skipped), "the source material's answer (000, exercise 4)",
          cat("P / (P - avg_skipped) = ", num(P / (P - avg_skipped)),
              "x compares the average GPU's steps; but every GPU waits for the ring, and the last GPU (the latest "
              "tokens) skips nothing: it still computes ", p.ranks - 1,
              " full blocks and its diagonal, so the wall clock barely moves"));
  Part balanced = ratio_part("balanced_speedup", "the same speedup with the zig-zag layout", zigzag.speedup(), 0.01);
  e.parts = {avg, reduction, wall, balanced};
  const int64_t n = p.tokens_per_rank;
  e.solution = cat(
      "At step k GPU r holds block r-k (mod P); it is fully masked when r-k < 0, i.e. on ", p.ranks - 1,
      " - r steps of GPU r.\n"
      "avg_skipped = (0 + 1 + ... + (P-1)) / P = (P-1)/2 = ", num(avg_skipped), " (the plan skips ", skipped,
      " of ", p.ranks * p.ranks, " blocks).\n"
      "work_reduction = (P-1)/(2P) = ", percent_text(work_reduction), " of the block steps.\n"
      "wall clock: without skipping every GPU computes P n^2 = ", group_thousands(contiguous.max_pairs_no_skip()),
      " pairs. With skipping GPU r computes r n^2 + n(n+1)/2;\n"
      "  the slowest is GPU ", contiguous.slowest_rank, " with ", group_thousands(contiguous.max_pairs()),
      " pairs, so the speedup is only ", ratio_text(contiguous.speedup()), " (the source's 8/4.5 = 1.78x is the\n"
      "  average GPU's, but the ring runs at the pace of its slowest member).\n"
      "zig-zag: every GPU holds an early and a late chunk, so all do the same ", group_thousands(zigzag.max_pairs()),
      " pairs\n  = (P n^2 + n)/2 with n = ", n, ": speedup ", ratio_text(zigzag.speedup()),
      " - a balanced layout turns the saved work into saved time.");
  e.command = cat("ringlab plan --ranks ", p.ranks, " --seq ", seq, " --causal ; ringlab plan --ranks ", p.ranks,
                  " --seq ", seq, " --causal --layout zigzag    # per-rank pairs in the footer");
  return e;
}

}  // namespace

constexpr CatalogEntry kCausalSkip{
    .id = "causal-skip",
    .title = "Skipping fully masked blocks: work saved vs time saved",
    .source = "source material 000, exercise 4 (and DESIGN.md erratum 4)",
    .source_short = "000 ex. 4",
    .lab = "",
    .write = write,
};

}  // namespace ringlab::exercises::catalog
