// Exercise ulysses-degree - the largest Ulysses degree ringlab's plans accept under grouped-query
// attention, and the ring degree that is left.
#include "exercises/catalog/catalog.hpp"
#include "exercises/catalog/support.hpp"
#include "reference/error.hpp"

namespace ringlab::exercises::catalog::ulysses_degree {

static void write(VariantDraw& draw, Exercise& e) {
  struct Params {
    int64_t heads = 64, kv_heads = 8, ranks = 32;

    static Params drawn(VariantDraw& d) {
      switch (d.integer(0, 4)) {
        case 0: return {32, 8, d.pick<int64_t>({16, 32, 64})};
        case 1: return {32, 4, d.pick<int64_t>({16, 32})};
        case 2: return {40, 8, d.pick<int64_t>({16, 32, 64})};
        case 3: return {48, 8, d.pick<int64_t>({16, 64})};
        default: return {28, 4, d.pick<int64_t>({16, 32})};
      }
    }
  };
  const Params p = variant_params<Params>(draw);
  const int64_t seq = 128 * 1024;
  int64_t best = 1;
  for (int64_t u = 1; u <= p.ranks; ++u) {
    if (p.ranks % u != 0) continue;
    PlanSpec spec = ring_spec(dims_of(1, seq, p.heads, p.kv_heads, 128), p.ranks);
    spec.algo = u == p.ranks ? Algorithm::ulysses : u == 1 ? Algorithm::ring : Algorithm::hybrid;
    spec.ulysses = u;
    try {
      (void)build_plan(spec);
      best = u;
    } catch (const UsageError&) {
      // this degree does not divide the heads
    }
  }
  int64_t head_limited = 1;  // the largest divisor of P dividing the query heads only
  for (int64_t u = 1; u <= p.ranks; ++u)
    if (p.ranks % u == 0 && p.heads % u == 0) head_limited = u;

  e.numbers = {{"heads", p.heads}, {"kv_heads", p.kv_heads}, {"P", p.ranks}};
  e.parameters = {{"n_h", cat(p.heads), "query heads"},
                  {"HKV", cat(p.kv_heads), "key/value heads (GQA)"},
                  ranks_parameter(p.ranks, "GPUs, split as U (Ulysses) x R (ring)")};
  e.statement =
      "Ulysses' all-to-all gives each of U GPUs n_h/U query heads and HKV/U key/value heads (ringlab splits whole\n"
      "heads; it does not replicate K/V heads). The rest of the parallelism is a ring of R = P/U.\n"
      "max_ulysses: the largest Ulysses degree U (a divisor of P) for which ringlab builds the plan.\n"
      "ring_degree: R = P / max_ulysses.   kv_heads_per_gpu: K/V heads per GPU at that degree.";
  Part max_part = count_part("max_ulysses", "largest Ulysses degree ringlab accepts", best);
  if (head_limited != best) {
    max_part.mistake(double(head_limited), "a common slip",
                     "that divides the query heads but not the K/V heads; a Ulysses degree must divide HKV too");
  }
  const int64_t ring_degree = p.ranks / best, kv_heads_per_gpu = p.kv_heads / best;  // both divide exactly
  e.parts = {max_part, count_part("ring_degree", "R = P / U", ring_degree),
             count_part("kv_heads_per_gpu", "K/V heads per GPU", kv_heads_per_gpu)};
  e.solution = lines({
      cat("U must divide P, n_h and HKV. Divisors of P = ", p.ranks, " that divide both ", p.heads, " and ", p.kv_heads,
          ": the largest is ", best, " (ringlab's build_plan refuses every larger one)."),
      cat("ring_degree = ", p.ranks / best, "; each GPU computes ", p.heads / best, " query heads over ",
          p.kv_heads / best, " K/V head(s)."),
      "GQA caps Ulysses at HKV; beyond it, the ring (whose volume GQA shrinks) takes over.",
  });
  e.command = cat("ringlab plan --algo hybrid --ranks ", p.ranks, " --ulysses ", best, " --seq 4096 --heads ", p.heads,
                  " --kv-heads ", p.kv_heads, " --dim 16 --show-ranks 4");
}

constexpr CatalogEntry kEntry{"ulysses-degree", "How far can Ulysses go with grouped-query attention?",
                              "the source material (Ulysses) and the notes, section 12.3 (GQA)", "source, notes §12.3",
                              write};

}  // namespace ringlab::exercises::catalog::ulysses_degree
