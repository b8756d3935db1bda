// Exercise erratum-causal-mask - Erratum 2: a causal mask built from block offsets and local row
// indices - the keys a query sees, the GPUs that go wrong and the pairs dropped, from the erratum
// plan.
#include <vector>

#include "exercises/catalog/catalog.hpp"
#include "exercises/catalog/support.hpp"
#include "reference/formulas.hpp"

namespace ringlab::exercises::catalog {

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
  const std::vector<int64_t> all = iota_positions(seq);
  const int64_t one_local[] = {local};
  const int64_t one_global[] = {p.position};
  const int64_t seen_wrong = causal_pairs_of_positions(one_local, all);
  const int64_t seen_right = causal_pairs_of_positions(one_global, all);
  int64_t wrong_ranks = 0, wrong_pairs = 0;
  for (int64_t r = 0; r < p.ranks; ++r) {
    int64_t a = 0, b = 0;
    for (int64_t kv = 0; kv < p.ranks; ++kv) {
      a += resolve_compute(wrong, r, kv, Pass::forward).pairs;
      b += resolve_compute(right, r, kv, Pass::forward).pairs;
    }
    wrong_ranks += a != b ? 1 : 0;
    wrong_pairs += a;
  }
  const double missing = 1 - double(wrong_pairs) / double(full_pairs(seq, true));

  e.numbers = {{"P", p.ranks}, {"n", p.tokens_per_rank}, {"position", p.position}};
  e.parameters = {ranks_parameter(p.ranks, "GPUs, contiguous layout"),
                  {"S", cat(seq), cat("tokens, n = ", p.tokens_per_rank, " per GPU")},
                  {"i", cat(p.position), "the query position asked about (global, from 0)"}};
  e.statement =
      "The source's ring code builds its causal mask from the K/V block's offset and each query's index within\n"
      "its own GPU's block - as if every GPU's queries started at position 0 - instead of comparing global\n"
      "query and key positions.\n"
      "keys_seen: how many keys does the query at global position i see with that mask?\n"
      "correct_keys: how many should it see?\n"
      "wrong_ranks: on how many GPUs is the output wrong?\n"
      "missing_fraction: what fraction of all the (query, key) pairs the causal mask allows does the mistake drop?";
  e.parts = {
      count_part("keys_seen", "keys the query at position i sees under the mistaken mask", seen_wrong),
      count_part("correct_keys", "keys it should see", seen_right),
      count_part("wrong_ranks", "GPUs whose outputs are wrong", wrong_ranks)
          .mistake(
              double(p.ranks), "a common slip",
              "GPU 0's queries start at position 0, so for it the local index is the global position: it is right"),
      fraction_part("missing_fraction", "share of the allowed pairs dropped", missing, 0.002)};
  e.solution = lines({
      cat("Position ", p.position, " is row ", local, " of GPU ", rank,
          ". The mistaken mask lets a key at position j through when"),
      cat("j <= ", local, " (the local index): only the first ", seen_wrong, " keys of block 0. It should see keys 0..",
          p.position, ": ", seen_right, "."),
      cat("GPU 0 is right (local index = position); the other ", wrong_ranks, " GPUs see only a triangle of block 0."),
      cat("Altogether the mistaken mask keeps P n(n+1)/2 = ", group_thousands(wrong_pairs), " of S(S+1)/2 = ",
          group_thousands(full_pairs(seq, true)), " pairs: ", percent_text(missing), " are dropped."),
      "Fix: carry each block's global positions (or compute them from its origin GPU) and mask k_pos <= q_pos.",
  });
  e.command = demo_command("run", p.ranks, seq, "--causal --erratum kv-offset-mask", "exit 1, every rank but 0 wrong");
}

constexpr CatalogEntry kErratumCausalMask{"erratum-causal-mask",
                                          "Erratum 2: a causal mask from block offsets",
                                          "the book's erratum 2 (the source material's ring code)",
                                          "erratum 2",
                                          write,
                                          "03-ring-forward"};

}  // namespace ringlab::exercises::catalog
