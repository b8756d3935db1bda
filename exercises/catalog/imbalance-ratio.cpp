// Exercise imbalance-ratio - the contiguous layout's causal imbalance: the shares of the work on
// the first and the last GPU, and their ratio (close to 2P - 1, not the notes' 2P).
#include <vector>

#include "exercises/catalog/catalog.hpp"
#include "exercises/catalog/support.hpp"
#include "reference/formulas.hpp"

namespace ringlab::exercises::catalog::imbalance_ratio {

static void write(VariantDraw& draw, Exercise& e) {
  const RanksTokens p = draw_ranks_tokens(draw, {8, 16384}, {4, 6, 8, 12, 16}, {4096, 16384});
  const int64_t seq = p.seq();
  const Layout layout(LayoutKind::contiguous, seq, p.ranks);
  const std::vector<int64_t> pairs = causal_pairs_per_rank(layout);
  const double total = double(full_pairs(seq, true));
  const double first = double(pairs.front()) / total, last = double(pairs.back()) / total;
  const double ratio = double(pairs.back()) / double(pairs.front());

  p.write_parameters(e, cat("n = S/P = ", p.tokens_per_rank, " per GPU, contiguous"));
  e.statement =
      "Causal attention, contiguous layout: GPU r holds tokens [r n, (r+1) n). The work of a query is the number\n"
      "of keys it may see (its position + 1, counting from 0).\n"
      "first: what fraction of all the causal work falls on GPU 0?   last: on GPU P-1?\n"
      "ratio: how many times more work does GPU P-1 do than GPU 0?";
  e.parts = {
      fraction_part("first", "share of the causal work on GPU 0", first, 0.0005),
      fraction_part("last", "share of the causal work on GPU P-1", last, 0.0005),
      ratio_part("ratio", "work of GPU P-1 / work of GPU 0", ratio, 0.01)
          .mistake(2.0 * double(p.ranks), "the notes' approximation (section 5.2)",
                   "2P keeps s^2/P for the last GPU but drops its -s^2/(2P^2) term, which is not small next to the "
                   "first GPU's s^2/(2P^2); exactly, ratio = 1 + 2(P-1) n/(n+1), which tends to 2P - 1")};
  const int64_t n = p.tokens_per_rank;
  e.solution = lines({
      cat("All causal work: S(S+1)/2 = ", group_thousands(full_pairs(seq, true)), " pairs."),
      cat("GPU 0: n(n+1)/2 = ", group_thousands(pairs.front()), " -> ", percent_text(first), " (about 1/P^2)."),
      cat("GPU P-1: (P-1) n^2 + n(n+1)/2 = ", group_thousands(pairs.back()), " -> ", percent_text(last),
          " (about (2P-1)/P^2)."),
      cat("ratio = 1 + 2(P-1) n/(n+1) = ", num(ratio), " for n = ", n, ": close to 2P - 1 = ", 2 * p.ranks - 1,
          ", not the notes' 2P = ", 2 * p.ranks, "."),
  });
  e.command = demo_command("plan", p.ranks, seq, "--causal --no-skip", "per-rank visible pairs in the footer");
}

constexpr CatalogEntry kEntry{"imbalance-ratio", "The contiguous layout's causal imbalance",
                              "context-parallelism notes, section 5.2", "notes §5.2", write};

}  // namespace ringlab::exercises::catalog::imbalance_ratio
