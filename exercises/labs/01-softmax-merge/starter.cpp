// Lab 01 — the online-softmax merge. Your file: fill in the TODOs, then
//     ringlab grade 01-softmax-merge this_file.cpp
// See README.md for the task and lab.hpp for the state's layout.
#include <algorithm>
#include <cmath>
#include <limits>

#include "lab.hpp"

namespace ringlab::lab01 {

State chunk_state(std::span<const float> q, std::span<const float> k, std::span<const float> v, int64_t rows,
                  int64_t keys, int64_t dim, std::span<const uint8_t> visible) {
  State s = State::empty(rows, dim);
  // TODO 1: for each query row i: the scores q_i.k_j / sqrt(dim) of its visible keys, their max m_i,
  //         l_i = sum exp(score - m_i), o_i = sum exp(score - m_i) v_j.
  (void)q, (void)k, (void)v, (void)keys, (void)visible;
  lab::todo("chunk_state");
  return s;
}

State merge(const State& a, const State& b) {
  // TODO 2: m = max(m_a, m_b); l = l_a e^(m_a - m) + l_b e^(m_b - m); o likewise. Mind empty rows.
  (void)b;
  lab::todo("merge");
  return a;
}

void finalize(const State& s, std::vector<float>& out, std::vector<float>& lse) {
  // TODO 3: out = o / l, lse = m + log l; 0 and -inf for a row that saw no key.
  (void)s, (void)out, (void)lse;
  lab::todo("finalize");
}

}  // namespace ringlab::lab01
