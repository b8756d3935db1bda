// Exercise erratum-merge-weights - erratum 13 of the book: merging two normalised partial outputs
// with weights exp(lse_i - max lse), which do not sum to 1, against reference/softmax_state.hpp's
// merge in log-sum-exp form.
#include <algorithm>
#include <cmath>
#include <vector>

#include "exercises/catalog/catalog.hpp"
#include "exercises/catalog/support.hpp"
#include "reference/softmax_state.hpp"

namespace ringlab::exercises::catalog::erratum_merge_weights {

static void write(VariantDraw& draw, Exercise& e) {
  struct Params {
    double a0 = 2, a1 = 0, b0 = 1, b1 = 1;       // scaled scores of chunks A and B
    double va0 = 4, va1 = 0, vb0 = 2, vb1 = -1;  // their (scalar) values

    static Params drawn(VariantDraw& d) {
      auto score = [&] { return double(d.integer(-4, 6)) / 2; };
      auto value = [&] { return double(d.integer(-4, 4)); };
      return {score(), score(), score(), score(), value(), value(), value(), value()};
    }
  };
  const Params p = variant_params<Params>(draw);
  // Each chunk's partial result as a ring step produces it: normalised output and log-sum-exp.
  std::vector<double> out_a, lse_a, out_b, lse_b;
  softmax_state_of<double>({p.a0, p.a1}, {p.va0, p.va1}, 1).finalize(out_a, lse_a);
  softmax_state_of<double>({p.b0, p.b1}, {p.vb0, p.vb1}, 1).finalize(out_b, lse_b);
  std::vector<double> out = out_a, lse = lse_a;
  merge_lse_form(out, lse, out_b, lse_b, 1);
  const double weight_a = std::exp(lse_a[0] - lse[0]);
  // The write-up's step: weights exp(lse_i - m) with m = max(lse_a, lse_b).
  const double m = std::max(lse_a[0], lse_b[0]);
  const double wrong_a = std::exp(lse_a[0] - m), wrong_b = std::exp(lse_b[0] - m);
  const double wrong_out = wrong_a * out_a[0] + wrong_b * out_b[0];

  e.numbers = {{"a0", p.a0},   {"a1", p.a1},   {"b0", p.b0},   {"b1", p.b1},
               {"va0", p.va0}, {"va1", p.va1}, {"vb0", p.vb0}, {"vb1", p.vb1}};
  e.parameters = {
      {"A", cat("scores [", num(p.a0), ", ", num(p.a1), "], values [", num(p.va0), ", ", num(p.va1), "]"), "chunk A"},
      {"B", cat("scores [", num(p.b0), ", ", num(p.b1), "], values [", num(p.vb0), ", ", num(p.vb1), "]"), "chunk B"}};
  e.statement = lines({
      "One query row sees two chunks of keys (scores already scaled, scalar values). A ring step returns each",
      "chunk's partial result normalised: out_i = its softmax-weighted value, lse_i = log sum exp(s_j) over it.",
      "A ring-attention write-up merges them step by step with m = max(lse_A, lse_B),",
      "  out = exp(lse_A - m) out_A + exp(lse_B - m) out_B.",
      "weight_a: the weight out_A should get in the exact merge.",
      "out: the exact attention output over all four keys.",
      "weight_sum: the sum exp(lse_A - m) + exp(lse_B - m) of the write-up's two weights.",
  });
  e.parts = {
      number_part("weight_a", "exact weight of out_A: exp(lse_A - lse)", weight_a, 0.002)
          .mistake(wrong_a, "the ring-attention write-up's merge",
                   "exp(lse_A - max lse) is the weight for unnormalised sums; normalised outputs need "
                   "exp(lse_A - lse), with lse the merged log-sum-exp"),
      number_part("out", "exact attention output", out[0], 0.002, 1e-6)
          .mistake(wrong_out, "the ring-attention write-up's merge",
                   "weights exp(lse_i - max lse) sum to more than 1 (unless one chunk dominates entirely), so the "
                   "output is scaled up"),
      number_part("weight_sum", "sum of the write-up's weights", wrong_a + wrong_b, 0.002)
          .mistake(1.0, "a common slip",
                   "only the exact weights exp(lse_i - lse) sum to 1; exp(lse_i - max lse) sum to "
                   "1 + exp(-|lse_A - lse_B|)")};
  e.solution = lines({
      cat("lse_A = ", num(lse_a[0]), ", out_A = ", num(out_a[0]), ";  lse_B = ", num(lse_b[0]),
          ", out_B = ", num(out_b[0]), "."),
      cat("lse = log(exp(lse_A) + exp(lse_B)) = ", num(lse[0]), "; weight_a = exp(lse_A - lse) = ", num(weight_a),
          ", weight_b = ", num(1 - weight_a), "."),
      cat("out = weight_a out_A + weight_b out_B = ", num(out[0]), " - the softmax over all four keys."),
      cat("The write-up's weights are exp(lse_A - m) = ", num(wrong_a), " and exp(lse_B - m) = ", num(wrong_b),
          ": they sum to ", num(wrong_a + wrong_b), ", and its output is ", num(wrong_out), "."),
      "Its lse update is right; only the output's weights are wrong. (exp(lse_i - m) is right for unnormalised",
      "sums o_i, as code lab 01's (m, l, o) state keeps them.)",
  });
  e.command = "ringlab grade 01-softmax-merge solution    # a merge that is exact, on normalised states too";
}

constexpr CatalogEntry kEntry{"erratum-merge-weights",
                              "Erratum 13: merge weights that do not sum to 1",
                              "the book's erratum 13 (the ring-attention write-up's merge)",
                              "erratum 13",
                              write,
                              "01-softmax-merge"};

}  // namespace ringlab::exercises::catalog::erratum_merge_weights
