// Lab 01 — broken on purpose (a negative control of the grader): NaN on empty rows.
// When both states saw no key, m = -inf and exp(m_a - m) = exp(-inf + inf) = NaN.
// Must fail criterion identity.
#include <algorithm>
#include <cmath>
#include <limits>

#include "lab.hpp"

namespace ringlab::lab01 {

namespace {
constexpr float kMinusInf = -std::numeric_limits<float>::infinity();
}

State chunk_state(std::span<const float> q, std::span<const float> k, std::span<const float> v, int64_t rows,
                  int64_t keys, int64_t dim, std::span<const uint8_t> visible) {
  State s = State::empty(rows, dim);
  const float scale = 1.0f / std::sqrt(static_cast<float>(dim));
  std::vector<float> scores(static_cast<size_t>(keys));
  for (int64_t i = 0; i < rows; ++i) {
    float m = kMinusInf;
    for (int64_t j = 0; j < keys; ++j) {
      float dot = 0;
      for (int64_t d = 0; d < dim; ++d) dot += q[i * dim + d] * k[j * dim + d];
      scores[j] = visible[i * keys + j] ? dot * scale : kMinusInf;
      m = std::max(m, scores[j]);
    }
    if (m == kMinusInf) continue;  // no visible key: the empty state
    s.max[i] = m;
    for (int64_t j = 0; j < keys; ++j) {
      if (scores[j] == kMinusInf) continue;
      const float p = std::exp(scores[j] - m);
      s.sum[i] += p;
      for (int64_t d = 0; d < dim; ++d) s.out[i * dim + d] += p * v[j * dim + d];
    }
  }
  return s;
}

State merge(const State& a, const State& b) {
  State c = State::empty(a.rows, a.width);
  for (int64_t i = 0; i < a.rows; ++i) {
    const float m = std::max(a.max[i], b.max[i]);
    const float wa = std::exp(a.max[i] - m), wb = std::exp(b.max[i] - m);  // 0 for an empty side
    c.max[i] = m;
    c.sum[i] = a.sum[i] * wa + b.sum[i] * wb;
    for (int64_t d = 0; d < a.width; ++d) c.out[i * a.width + d] = a.out[i * a.width + d] * wa + b.out[i * a.width + d] * wb;
  }
  return c;
}

void finalize(const State& s, std::vector<float>& out, std::vector<float>& lse) {
  out.assign(static_cast<size_t>(s.rows * s.width), 0.0f);
  lse.assign(static_cast<size_t>(s.rows), kMinusInf);
  for (int64_t i = 0; i < s.rows; ++i) {
    if (s.max[i] == kMinusInf || s.sum[i] == 0) continue;
    for (int64_t d = 0; d < s.width; ++d) out[i * s.width + d] = s.out[i * s.width + d] / s.sum[i];
    lse[i] = s.max[i] + std::log(s.sum[i]);
  }
}

}  // namespace ringlab::lab01
