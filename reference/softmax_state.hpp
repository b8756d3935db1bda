// The online-softmax state and its merge — the one idea that makes distributed attention exact.
//
// For a query row that has seen some keys K', the state is
//     m = max_{j in K'} s_j                 (running max of the scaled scores s_j = scale q.k_j)
//     l = sum_{j in K'} exp(s_j - m)        (running sum, relative to m)
//     o = sum_{j in K'} exp(s_j - m) v_j    (unnormalised output, relative to m)
// and two states over disjoint key sets merge as
//     m = max(m1, m2),  l = l1 e^{m1-m} + l2 e^{m2-m},  o = o1 e^{m1-m} + o2 e^{m2-m}.
// The merge is associative and commutative (up to rounding), and the empty state
// (m = -inf, l = 0, o = 0) is its identity. The final output is o / l and LSE = m + log l.
//
// The LSE form carries the normalised output and its log-sum-exp instead: (out, lse) with
//     lse = log(e^{lse1} + e^{lse2}),  out = out1 e^{lse1-lse} + out2 e^{lse2-lse}.
#pragma once

#include <cstdint>
#include <vector>

#include "reference/attention.hpp"

namespace ringlab {

// States of `rows` query rows, each with a `width`-wide output (width = D).
// Row r's output is out[r*width .. (r+1)*width).
template <class T>
struct SoftmaxState {
  int64_t rows = 0;
  int64_t width = 0;
  std::vector<T> max;  // m, -inf when the row has seen no key
  std::vector<T> sum;  // l
  std::vector<T> out;  // o, unnormalised

  // The identity of the merge: no keys seen.
  static SoftmaxState empty(int64_t rows, int64_t width);

  // Merges `other` (over a disjoint set of keys) into this state: *this = *this (+) other.
  void merge(const SoftmaxState& other);
  // Merges row `r` of `other` into row `row` of this state.
  void merge_row(int64_t row, const SoftmaxState& other, int64_t r);

  // out = o / l (0 when no key was seen), lse = m + log l (-inf when no key was seen).
  void finalize(std::vector<T>& normalized, std::vector<T>& lse) const;
};

// The state of one query row over the given scores and value rows, from the definition:
// scores[j] is scale * q.k_j (-inf for a masked key), values is (keys x width) row-major.
template <class T>
SoftmaxState<T> softmax_state_of(const std::vector<T>& scores, const std::vector<T>& values, int64_t width);

// (out_a, lse_a) <- (out_a, lse_a) (+) (out_b, lse_b), per row; out rows are `width` wide.
// -inf LSEs (no keys) are the identity.
template <class T>
void merge_lse_form(std::vector<T>& out_a, std::vector<T>& lse_a, const std::vector<T>& out_b,
                    const std::vector<T>& lse_b, int64_t width);

}  // namespace ringlab
