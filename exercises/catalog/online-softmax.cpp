// Exercise online-softmax - two online-softmax states merged by hand, through
// reference/softmax_state.hpp (code lab 01 has students implement the merge).
#include <vector>

#include "exercises/catalog/catalog.hpp"
#include "exercises/catalog/support.hpp"
#include "reference/softmax_state.hpp"

namespace ringlab::exercises::catalog::online_softmax {

static void write(VariantDraw& draw, Exercise& e) {
  struct Params {
    double a0 = 2, a1 = 1, b0 = 3, b1 = 0.5;     // scaled scores of chunks A and B
    double va0 = 1, va1 = 3, vb0 = -1, vb1 = 2;  // their (scalar) values

    static Params drawn(VariantDraw& d) {
      auto score = [&] { return double(d.integer(-6, 8)) / 2; };
      auto value = [&] { return double(d.integer(-4, 4)); };
      return {score(), score(), score(), score(), value(), value(), value(), value()};
    }
  };
  const Params p = variant_params<Params>(draw);
  const SoftmaxState<double> a = softmax_state_of<double>({p.a0, p.a1}, {p.va0, p.va1}, 1);
  const SoftmaxState<double> b = softmax_state_of<double>({p.b0, p.b1}, {p.vb0, p.vb1}, 1);
  SoftmaxState<double> merged = a;
  merged.merge(b);
  std::vector<double> out, lse;
  merged.finalize(out, lse);
  const double unrescaled_out = (a.out[0] + b.out[0]) / (a.sum[0] + b.sum[0]);

  e.numbers = {{"a0", p.a0},   {"a1", p.a1},   {"b0", p.b0},   {"b1", p.b1},
               {"va0", p.va0}, {"va1", p.va1}, {"vb0", p.vb0}, {"vb1", p.vb1}};
  e.parameters = {
      {"A", cat("scores [", num(p.a0), ", ", num(p.a1), "], values [", num(p.va0), ", ", num(p.va1), "]"), "chunk A"},
      {"B", cat("scores [", num(p.b0), ", ", num(p.b1), "], values [", num(p.vb0), ", ", num(p.vb1), "]"), "chunk B"}};
  e.statement =
      "One query row sees two chunks of keys. The scores are already scaled (s_j = q.k_j / sqrt(d)); values are\n"
      "scalars. A chunk's state is (m, l, o): m = max s_j, l = sum exp(s_j - m), o = sum exp(s_j - m) v_j.\n"
      "Merge A's and B's states into the state over all four keys.\n"
      "m, l: the merged state's max and sum.  out: the attention output o / l.  lse: the log-sum-exp m + log l.";
  e.parts = {
      number_part("m", "merged max", merged.max[0], 0, 1e-9),
      number_part("l", "merged sum, relative to the merged max", merged.sum[0], 0.001)
          .mistake(
              a.sum[0] + b.sum[0], "a common slip (the missing rescale)",
              "l_A + l_B adds sums taken relative to different maxima; each must be rescaled by exp(m_i - m) first"),
      number_part("out", "attention output o / l", out[0], 0.001, 1e-6)
          .mistake(unrescaled_out, "a common slip (the missing rescale)",
                   "(o_A + o_B) / (l_A + l_B) mixes terms relative to different maxima; rescale each by exp(m_i - m)"),
      number_part("lse", "log-sum-exp of all four scores", lse[0], 0.001, 1e-6)};
  e.solution = lines({
      cat("A: m_A = ", num(a.max[0]), ", l_A = ", num(a.sum[0]), ", o_A = ", num(a.out[0]),
          ".   B: m_B = ", num(b.max[0]), ", l_B = ", num(b.sum[0]), ", o_B = ", num(b.out[0]), "."),
      cat("m = max(m_A, m_B) = ", num(merged.max[0]), "; l = l_A exp(m_A - m) + l_B exp(m_B - m) = ",
          num(merged.sum[0]), "; o = o_A exp(m_A - m) + o_B exp(m_B - m) = ", num(merged.out[0]), "."),
      cat("out = o / l = ", num(out[0]), "; lse = m + log l = ", num(lse[0]),
          " - the same as a softmax over all four scores at once."),
      "The merge is associative and commutative, with (m, l, o) = (-inf, 0, 0) as identity: that is exercise 6,",
      "and code lab 01-softmax-merge has you implement it and prove it on P >= 3 chunks.",
  });
  e.command = "ringlab grade 01-softmax-merge solution    # the lab's reference merge against its hidden tests";
}

constexpr CatalogEntry kEntry{"online-softmax",
                              "Merging two online-softmax states by hand",
                              "the source material, exercise 6 (the associativity itself is code lab 01)",
                              "source ex. 6",
                              write,
                              "01-softmax-merge"};

}  // namespace ringlab::exercises::catalog::online_softmax
