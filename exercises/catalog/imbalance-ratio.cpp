// Exercise imbalance-ratio - the contiguous layout's causal imbalance: the shares of the work on
// the first and the last GPU, and their ratio (close to 2P - 1, not the notes' 2P).
#include <vector>

#include "exercises/catalog/catalog.hpp"
#include "exercises/catalog/support.hpp"
#include "reference/formulas.hpp"

namespace ringlab::exercises::catalog {

namespace {

Exercise write(VariantDraw& draw) {
  const RanksTokens p = draw_ranks_tokens(draw, {8, 16384}, {4, 6, 8, 12, 16}, {4096, 16384});
  const int64_t seq = p.seq();
  const Layout layout(LayoutKind::contiguous, seq, p.ranks);
  const std::vector<int64_t> pairs = causal_pairs_per_rank(layout);
  const double total = double(full_pairs(seq, true));
  const double first = double(pairs.front()) / total, last = double(pairs.back()) / total;
  const double ratio = double(pairs.back()) / double(pairs.front());

  Exercise e;
  e.numbers = {{"P", double(p.ranks)}, {"n", double(p.tokens_per_rank)}};
  e.parameters = {{"P", cat(p.ranks), "GPUs"},
                  {"S", tokens_text(seq) + " tokens", cat("n = S/P = ", p.tokens_per_rank, " per GPU, contiguous")}};
  e.statement =
      "Causal attention, contiguous layout: GPU r holds tokens [r n, (r+1) n). The work of a query is the number\n"
      "of keys it may see (its position + 1, counting from 0).\n"
      "first: what fraction of all the causal work falls on GPU 0?   last: on GPU P-1?\n"
      "ratio: how many times more work does GPU P-1 do than GPU 0?";
  Part ratio_part_ = ratio_part("ratio", "work of GPU P-1 / work of GPU 0", ratio, 0.01);
  mistake(ratio_part_, 2.0 * double(p.ranks), "the notes' approximation (001, section 5.2)",
          "2P keeps s^2/P for the last GPU but drops its -s^2/(2P^2) term, which is not small next to the first "
          "GPU's s^2/(2P^2); exactly, ratio = 1 + 2(P-1) n/(n+1), which tends to 2P - 1");
  e.parts = {fraction_part("first", "share of the causal work on GPU 0", first, 0.0005),
             fraction_part("last", "share of the causal work on GPU P-1", last, 0.0005), ratio_part_};
  const int64_t n = p.tokens_per_rank;
  e.solution = cat(
      "All causal work: S(S+1)/2 = ", group_thousands(full_pairs(seq, true)), " pairs.\n"
      "GPU 0: n(n+1)/2 = ", group_thousands(pairs.front()), " -> ", percent_text(first), " (about 1/P^2).\n"
      "GPU P-1: (P-1) n^2 + n(n+1)/2 = ", group_thousands(pairs.back()), " -> ", percent_text(last),
      " (about (2P-1)/P^2).\n"
      "ratio = 1 + 2(P-1) n/(n+1) = ", num(ratio), " for n = ", n, ": close to 2P - 1 = ", 2 * p.ranks - 1,
      ", not the notes' 2P = ", 2 * p.ranks, ".");
  e.command = cat("ringlab plan --ranks ", p.ranks, " --seq ", seq, " --causal --no-skip    # per-rank visible pairs in the footer");
  return e;
}

}  // namespace

constexpr CatalogEntry kImbalanceRatio{
    .id = "imbalance-ratio",
    .title = "The contiguous layout's causal imbalance",
    .source = "context-parallelism notes 001, section 5.2",
    .source_short = "001 §5.2",
    .lab = "",
    .write = write,
};

}  // namespace ringlab::exercises::catalog
