// Lab 01 — the online-softmax merge and its associativity. What you implement.
//
// A state summarises what `rows` query rows have seen of some keys (reference/softmax_state.hpp):
//   max[i] = m_i   the largest score q_i.k_j / sqrt(D) seen (-inf: no key seen)
//   sum[i] = l_i   sum_j exp(score_ij - m_i)
//   out[i * width + d] = o_id   sum_j exp(score_ij - m_i) v_jd      (unnormalised, width = D)
// Two states over disjoint keys merge into the state over all of them; the merge is associative
// and commutative, with State::empty(rows, width) as its identity. That is what makes ring
// attention (and flash attention) exact.
// Not yours to call here: SoftmaxState's own merge and finalize and the library's softmax_state_of
// do this lab's work. The grader refuses a submission that names them (a member, written `.name`,
// is refused only as a member: your own free function may share its name).
// grader-refuses: softmax_state_of merge_lse_form merge_lse_row .merge_row .merge .finalize

#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "exercises/labs/common/lab_support.hpp"
#include "reference/softmax_state.hpp"

namespace ringlab::lab01 {

using State = SoftmaxState<float>;

// TODO 1: the state of `rows` queries over one chunk of `keys` keys.
//   q: rows x dim, k and v: keys x dim (row-major). visible[i * keys + j] != 0 when query i may see
//   key j. Scores are q_i.k_j / sqrt(dim). A row that sees no key of the chunk keeps m = -inf,
//   l = 0, o = 0. Subtract the row's max before exp, so large scores cannot overflow.
State chunk_state(std::span<const float> q, std::span<const float> k, std::span<const float> v, int64_t rows,
                  int64_t keys, int64_t dim, std::span<const uint8_t> visible);

// TODO 2: a (+) b for two states over disjoint keys (same rows and width): rescale both to the
//   common max m = max(m_a, m_b) before adding. Empty rows (m = -inf) must not produce NaN.
State merge(const State& a, const State& b);

// TODO 3: out[i] = o_i / l_i and lse[i] = m_i + log l_i; a row that saw no key gets out 0 and
//   lse -inf. out has rows * width entries, lse has rows.
void finalize(const State& s, std::vector<float>& out, std::vector<float>& lse);

}  // namespace ringlab::lab01
