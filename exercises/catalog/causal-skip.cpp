// Exercise causal-skip - skipping the fully masked blocks of a causal ring: the work saved against
// the wall clock saved, contiguous and zig-zag (causal_work, support.hpp).
#include "exercises/catalog/catalog.hpp"
#include "exercises/catalog/support.hpp"

namespace ringlab::exercises::catalog::causal_skip {

namespace {

constexpr const char* kCausalWorkModel =
    "Compute-bound model: a step costs the (query, key) pairs its kernel computes - a full block n^2\n"
    "(n = S/P), the diagonal block n(n+1)/2 (the kernel skips masked tiles), a skipped block nothing;\n"
    "without skipping every block costs n^2. Transfers are hidden. The wall clock is the slowest\n"
    "rank's sum (ringlab: resolve_compute over every (rank, step) of the plan).";

}  // namespace

static void write(VariantDraw& draw, Exercise& e) {
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

  e.numbers = {{"P", P}, {"n", p.tokens_per_rank}, {"S", seq}};
  e.parameters = {ranks_parameter(p.ranks, "GPUs, P ring steps"),
                  seq_parameter(seq, cat("sequence length, n = S/P = ", p.tokens_per_rank, " per GPU")),
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
  e.parts = {number_part("avg_skipped", "steps skipped per GPU, averaged over the GPUs", avg_skipped),
             fraction_part("work_reduction", "skipped block steps / all P^2 block steps", work_reduction, 0.001)
                 .mistake(0.5, "a common slip",
                          "50% counts (query, key) pairs with the diagonal blocks at half cost; this part counts "
                          "block steps, a computed diagonal block being one step"),
             ratio_part("wallclock_speedup", "forward wall clock without skipping / with skipping, contiguous layout",
                        contiguous.speedup(), 0.01)
                 .mistake(P / (P - avg_skipped), "the source material's answer (exercise 4)",
                          cat("P / (P - avg_skipped) = ", num(P / (P - avg_skipped)),
                              "x compares the average GPU's steps; but every GPU waits for the ring, and the last "
                              "GPU (the latest tokens) skips nothing: it still computes ",
                              p.ranks - 1, " full blocks and its diagonal, so the wall clock barely moves")),
             ratio_part("balanced_speedup", "the same speedup with the zig-zag layout", zigzag.speedup(), 0.01)};
  const int64_t n = p.tokens_per_rank;
  e.solution = lines({
      cat("At step k GPU r holds block r-k (mod P); it is fully masked when r-k < 0, i.e. on ", p.ranks - 1,
          " - r steps of GPU r."),
      cat("avg_skipped = (0 + 1 + ... + (P-1)) / P = (P-1)/2 = ", num(avg_skipped), " (the plan skips ", skipped,
          " of ", p.ranks * p.ranks, " blocks)."),
      cat("work_reduction = (P-1)/(2P) = ", percent_text(work_reduction), " of the block steps."),
      cat("wall clock: without skipping every GPU computes P n^2 = ", group_thousands(contiguous.max_pairs_no_skip()),
          " pairs. With skipping GPU r computes r n^2 + n(n+1)/2;"),
      cat("  the slowest is GPU ", contiguous.slowest_rank, " with ", group_thousands(contiguous.max_pairs()),
          " pairs, so the speedup is only ", ratio_text(contiguous.speedup()), " (the source's 8/4.5 = 1.78x is the"),
      "  average GPU's, but the ring runs at the pace of its slowest member).",
      cat("zig-zag: every GPU holds an early and a late chunk, so all do the same ",
          group_thousands(zigzag.max_pairs()), " pairs"),
      cat("  = (P n^2 + n)/2 with n = ", n, ": speedup ", ratio_text(zigzag.speedup()),
          " - a balanced layout turns the saved work into saved time."),
  });
  e.command = demo_command("plan", p.ranks, seq, "--causal") + " ; " +
              demo_command("plan", p.ranks, seq, "--causal --layout zigzag", "per-rank pairs in the footer");
}

constexpr CatalogEntry kEntry{"causal-skip", "Skipping fully masked blocks: work saved vs time saved",
                              "the source material, exercise 4 (and the book's erratum 4)", "source ex. 4", write};

}  // namespace ringlab::exercises::catalog::causal_skip
