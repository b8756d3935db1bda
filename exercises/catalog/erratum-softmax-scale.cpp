// Exercise erratum-softmax-scale - Erratum 3: softmax weights without 1/sqrt(d), through the exact
// oracle.
#include <cmath>

#include "exercises/catalog/catalog.hpp"
#include "exercises/catalog/support.hpp"
#include "reference/exact_attention.hpp"

namespace ringlab::exercises::catalog::erratum_softmax_scale {

namespace {

// Weight of key 1 in softmax over two keys with raw dot products s1, s2, through the exact oracle:
// q = e_0, k_i = s_i e_0, v_1 = e_0, v_2 = 0, so out[0] is key 1's weight. `q_factor` scales q
// (sqrt(D) undoes the oracle's 1/sqrt(D): the scale-less softmax).
double first_key_weight(int64_t dim, double s1, double s2, double q_factor) {
  Tensor<double> q({1, 1, 1, dim}), k({1, 2, 1, dim}), v({1, 2, 1, dim});
  q(0, 0, 0, 0) = q_factor;
  k(0, 0, 0, 0) = s1;
  k(0, 1, 0, 0) = s2;
  v(0, 0, 0, 0) = 1;
  return exact_attention(q, k, v, MaskKind::none).out(0, 0, 0, 0);
}

}  // namespace

static void write(VariantDraw& draw, Exercise& e) {
  struct Params {
    int64_t dim = 16, s1 = 8, s2 = 4;

    static Params drawn(VariantDraw& d) {
      const int64_t dim = d.pick<int64_t>({16, 64, 128});
      const int64_t s2 = d.integer(-4, 6);
      return {dim, s2 + d.integer(2, 12), s2};
    }
  };
  const Params p = variant_params<Params>(draw);
  const double scale = dims_of(1, 1, 1, 1, p.dim).scale();
  const double weight = first_key_weight(p.dim, double(p.s1), double(p.s2), 1);
  const double unscaled = first_key_weight(p.dim, double(p.s1), double(p.s2), std::sqrt(double(p.dim)));

  e.numbers = {{"dim", p.dim}, {"s1", p.s1}, {"s2", p.s2}};
  e.parameters = {{"d", cat(p.dim), "head dimension"},
                  {"q.k1, q.k2", cat(p.s1, ", ", p.s2), "raw dot products of one query with two keys"}};
  e.statement =
      "Attention weights are softmax(q.k / sqrt(d)). The source's flash-attention solution computes\n"
      "scores = q @ k^T and never applies the scale.\n"
      "scale: the factor the scores must be multiplied by.\n"
      "weight: the correct attention weight on key 1.\n"
      "weight_unscaled: the weight on key 1 that the source's kernel computes.";
  e.parts = {number_part("scale", "1 / sqrt(d)", scale, 0.001),
             number_part("weight", "correct softmax weight on key 1", weight, 0, 0.002)
                 .mistake(unscaled, "the source material's flash solution (exercise 7)",
                          "without 1/sqrt(d) the scores are sqrt(d) times too large, so the softmax is far too sharp"),
             number_part("weight_unscaled", "weight on key 1 without the scale", unscaled, 0, 0.002)};
  e.solution = lines({
      cat("scale = 1/sqrt(", p.dim, ") = ", num(scale), "."),
      cat("weight = 1 / (1 + exp(-(", p.s1, " - ", p.s2, ") x ", num(scale), ")) = ", num(weight),
          " (ringlab's exact oracle gives the same)."),
      cat("Without the scale: 1 / (1 + exp(-(", p.s1, " - ", p.s2, "))) = ", num(unscaled),
          ": the logits are sqrt(d) = ", num(std::sqrt(double(p.dim))), " times too large,"),
      "which works like a temperature of 1/sqrt(d): the output is wrong on every row, not just at the edges.",
  });
  e.command = "ringlab grade 01-softmax-merge broken/missing_scale    # the lab's scale criterion catches it";
}

constexpr CatalogEntry kEntry{"erratum-softmax-scale",
                              "Erratum 3: the flash solution without 1/sqrt(d)",
                              "the book's erratum 3 (the flash-attention solution of the source material, exercise 7)",
                              "erratum 3",
                              write,
                              "01-softmax-merge"};

}  // namespace ringlab::exercises::catalog::erratum_softmax_scale
