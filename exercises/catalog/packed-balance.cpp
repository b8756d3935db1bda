// Exercise packed-balance - packed causal documents on a ring: the imbalance of the contiguous
// layout, which rank is busiest, and the per-document zig-zag's imbalance.
#include <algorithm>
#include <numeric>
#include <vector>

#include "exercises/catalog/catalog.hpp"
#include "exercises/catalog/support.hpp"
#include "sim/plan/queries.hpp"

namespace ringlab::exercises::catalog::packed_balance {

namespace {

struct Packed {
  int64_t ranks = 4, seq = 4096;
  std::vector<int64_t> documents{256, 256, 192, 256, 1280, 448, 960, 448};
};

// max/mean of the ranks' forward FLOPs and the busiest rank, from the plan.
std::pair<double, int64_t> balance(const Packed& p, LayoutKind layout, bool with_documents) {
  PlanSpec spec = ring_spec(dims_of(1, p.seq, 1, 1, 64), p.ranks, layout, true);
  if (with_documents) spec.documents = p.documents;
  const Plan plan = build_plan(spec);
  double most = 0, sum = 0;
  int64_t busiest = 0;
  for (int64_t r = 0; r < p.ranks; ++r) {
    const double flops = rank_work(plan, r, expand(plan, r)).flops;
    if (flops > most) most = flops, busiest = r;
    sum += flops;
  }
  return {most * double(p.ranks) / sum, busiest};
}

}  // namespace

static void write(VariantDraw& draw, Exercise& e) {
  Packed p;
  if (!draw.source()) {
    p.ranks = draw.pick<int64_t>({2, 4, 8});
    p.seq = p.ranks * draw.pick<int64_t>({512, 1024});
    const int64_t count = draw.pick<int64_t>({4, 6, 8});
    p.documents =
        layout_documents("random:" + std::to_string(count), p.seq, draw.next(), LayoutKind::zigzag, p.ranks, 0);
  }
  const auto [contiguous, busiest] = balance(p, LayoutKind::contiguous, true);
  const auto [zigzag, unused] = balance(p, LayoutKind::zigzag, true);
  const auto [one_sequence, last] = balance(p, LayoutKind::contiguous, false);
  (void)unused, (void)last;

  e.numbers = {{"P", p.ranks}, {"S", p.seq}, {"documents", p.documents.size()}};
  for (size_t d = 0; d < p.documents.size(); ++d) e.numbers.push_back({"doc" + std::to_string(d), p.documents[d]});
  e.parameters = {ranks_parameter(p.ranks),
                  seq_parameter(p.seq, "tokens per batch row, packed"),
                  {"documents", documents_string(p.documents, 32), "lengths in packing order"}};
  e.statement =
      "One batch row packs several documents end to end; attention is causal and never crosses a document.\n"
      "The work of a query is the number of keys it may see. A synchronous ring runs at its busiest rank's pace.\n"
      "contiguous: with the contiguous layout (rank r holds tokens [r S/P, (r+1) S/P)), the busiest rank's work\n"
      "divided by the mean work per rank.   busiest: which rank is busiest (0-based; the lowest if tied)?\n"
      "zigzag: the same ratio when every document is cut into 2P chunks and rank i takes chunks i and 2P-1-i.";
  e.parts = {ratio_part("contiguous", "max/mean work per rank, contiguous", contiguous,
                        tolerance_rejecting(contiguous, {one_sequence}, 0.005))
                 .mistake(one_sequence, "treating the packed row as one causal sequence",
                          "a packed row is not one sequence: a query sees only its own document's earlier keys, so "
                          "the work follows the documents, not the position"),
             count_part("busiest", "the busiest rank, contiguous", busiest),
             ratio_part("zigzag", "max/mean work per rank, per-document zig-zag", zigzag, 0.005)};
  e.solution = lines({
      "A query at position i of a document that starts at s sees i - s + 1 keys; a document of L tokens holds",
      "L(L+1)/2 visible pairs. Contiguous: sum, rank by rank, the pairs whose query lies in the rank's range.",
      cat("contiguous: ", ratio_text(contiguous), " (rank ", busiest, " busiest); one causal sequence would give ",
          ratio_text(one_sequence), " - the documents, not the positions, decide."),
      cat("zig-zag per document: ", ratio_text(zigzag),
          ": in every document, chunks i and 2P-1-i carry the same work for every i, so every rank gets the same."),
  });
  e.command = "ringlab plan --ranks " + std::to_string(p.ranks) + " --seq " + std::to_string(p.seq) +
              " --causal --docs " + documents_string(p.documents, 64) +
              "    # the imbalance line; add --layout zigzag for the fix";
}

constexpr CatalogEntry kEntry{"packed-balance", "Packed documents: who is busiest, and the fix",
                              "ringlab's chapter on documents and windows", "ringlab", write};

}  // namespace ringlab::exercises::catalog::packed_balance
