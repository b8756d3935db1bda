// Exercise erratum-causal-mask - Erratum 2: a causal mask built from block offsets and local row
// indices - the keys a query sees, the GPUs that go wrong and the pairs dropped, from the erratum
// plan.
#include <algorithm>
#include <vector>

#include "exercises/catalog/catalog.hpp"
#include "exercises/catalog/support.hpp"
#include "reference/formulas.hpp"

namespace ringlab::exercises::catalog::erratum_causal_mask {

// The keys the query in `row` of `rank`'s block sees under a plan's forward ops: each kernel's mask
// applied as the executors apply it (none; causal by position; or, in the erratum, causal by the
// query's index within its block).
static int64_t keys_seen(const Plan& plan, int64_t rank, int64_t row) {
  const int64_t q_block = plan.ring_position(rank);
  const int64_t position = plan.block_positions(q_block)[static_cast<size_t>(row)];
  int64_t seen = 0;
  for (int64_t kv = 0; kv < plan.ring(); ++kv) {
    const std::vector<int64_t> keys = plan.block_positions(kv);
    for (const KernelBlock& k : resolve_compute(plan, rank, kv, Pass::forward).kernels) {
      if (row < k.q_rows.begin || row >= k.q_rows.end) continue;
      const int64_t limit = k.erratum_local_query_index ? row : position;
      for (int64_t j = k.kv_rows.begin; j < k.kv_rows.end; ++j)
        seen += k.mask == MaskKind::none || keys[static_cast<size_t>(j)] <= limit ? 1 : 0;
    }
  }
  return seen;
}

static void write(VariantDraw& draw, Exercise& e) {
  struct Params {
    int64_t ranks = 4, tokens_per_rank = 16, position = 37;

    static Params drawn(VariantDraw& d) {
      const int64_t ranks = d.pick<int64_t>({3, 4, 6, 8});
      const int64_t n = d.pick<int64_t>({8, 16, 32});
      return {ranks, n, d.integer(n, ranks * n - 1)};
    }
  };
  const Params p = variant_params<Params>(draw);
  const int64_t seq = p.ranks * p.tokens_per_rank;
  PlanSpec spec = ring_spec(dims_of(1, seq, 1, 1, 8), p.ranks, LayoutKind::contiguous, true);
  const Plan right = build_plan(spec);
  spec.erratum = Erratum::kv_offset_mask;
  const Plan wrong = build_plan(spec);
  const int64_t rank = right.layout().rank_of(p.position), local = right.layout().local_row(p.position);
  const int64_t seen_wrong = keys_seen(wrong, rank, local), seen_right = keys_seen(right, rank, local);
  const int64_t seen_local_mask = local + 1;  // block 0 masked by the local index as well
  // Per (GPU, block): the mistaken mask shows a superset of the right keys (block 0, unmasked) or a
  // subset (every other block, masked by local index), so the allowed pairs it keeps are the
  // smaller of the two counts.
  int64_t wrong_ranks = 0, kept_pairs = 0;
  for (int64_t r = 0; r < p.ranks; ++r) {
    bool differs = false;
    for (int64_t kv = 0; kv < p.ranks; ++kv) {
      const int64_t a = resolve_compute(wrong, r, kv, Pass::forward).pairs;
      const int64_t b = resolve_compute(right, r, kv, Pass::forward).pairs;
      differs |= a != b;
      kept_pairs += std::min(a, b);
    }
    wrong_ranks += differs ? 1 : 0;
  }
  const double missing = 1 - double(kept_pairs) / double(full_pairs(seq, true));

  e.numbers = {{"P", p.ranks}, {"n", p.tokens_per_rank}, {"position", p.position}};
  e.parameters = {ranks_parameter(p.ranks, "GPUs, contiguous layout"),
                  {"S", cat(seq), cat("tokens, n = ", p.tokens_per_rank, " per GPU")},
                  {"i", cat(p.position), "the query position asked about (global, from 0)"}};
  e.statement =
      "The source's ring code computes kv_offset = (origin GPU of the K/V block) x n and, only `if kv_offset > 0`,\n"
      "hides the key at kv_offset + j from the query at index i within its own GPU's block when kv_offset + j > i\n"
      "- as if every GPU's queries started at position 0 - instead of comparing global query and key positions.\n"
      "keys_seen: how many keys does the query at global position i see with that mask?\n"
      "correct_keys: how many should it see?\n"
      "wrong_ranks: on how many GPUs is the output wrong?\n"
      "missing_fraction: what fraction of all the (query, key) pairs the causal mask allows does the mistake drop?";
  e.parts = {
      count_part("keys_seen", "keys the query at position i sees under the mistaken mask", seen_wrong)
          .mistake(double(seen_local_mask), "a common slip",
                   "that masks block 0 by the local index too; the code's `if kv_offset > 0` never masks the "
                   "block at offset 0, so all n of its keys are seen"),
      count_part("correct_keys", "keys it should see", seen_right),
      count_part("wrong_ranks", "GPUs whose outputs are wrong", wrong_ranks)
          .mistake(double(p.ranks - 1), "a common slip",
                   "GPU 0's queries do start at position 0, but its own block sits at offset 0 and is never masked: "
                   "its queries see the keys after them, so GPU 0 is wrong too"),
      fraction_part("missing_fraction", "share of the allowed pairs dropped", missing, 0.002)};
  e.solution = lines({
      cat("Position ", p.position, " is row ", local, " of GPU ", rank,
          ". Block 0 has offset 0: never masked, so all n of its keys are seen."),
      cat("Every other block has offset >= n > any local index: every key hidden. So the query sees ", seen_wrong,
          " keys (block 0), where it should see keys 0..", p.position, ": ", seen_right, "."),
      cat("Every GPU is wrong: GPU 0 sees the future within its own block (offset 0, unmasked), and GPU r > 0 misses"),
      "blocks 1..r. (The same code also produces NaN: a row whose block is masked entirely has max -inf, and",
      "exp(-inf - (-inf)) is NaN; ringlab's kernels treat such a row as empty, to show the mask on its own.)",
      cat("Of the S(S+1)/2 = ", group_thousands(full_pairs(seq, true)), " allowed pairs it keeps ",
          group_thousands(kept_pairs), ": ", percent_text(missing), " are dropped."),
      "Fix: carry each block's global positions (or compute them from its origin GPU) and mask k_pos <= q_pos.",
  });
  e.command = demo_command("run", p.ranks, seq, "--causal --erratum kv-offset-mask", "exit 1, every rank wrong");
}

constexpr CatalogEntry kEntry{"erratum-causal-mask",
                              "Erratum 2: a causal mask from block offsets",
                              "the book's erratum 2 (the source material's ring code)",
                              "erratum 2",
                              write,
                              "03-ring-forward"};

}  // namespace ringlab::exercises::catalog::erratum_causal_mask
