#include "reference/softmax_state.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>

namespace ringlab {

template <class T>
SoftmaxState<T> SoftmaxState<T>::empty(int64_t rows, int64_t width) {
  SoftmaxState state;
  state.rows = rows;
  state.width = width;
  state.max.assign(static_cast<size_t>(rows), -std::numeric_limits<T>::infinity());
  state.sum.assign(static_cast<size_t>(rows), T(0));
  state.out.assign(static_cast<size_t>(rows * width), T(0));
  return state;
}

template <class T>
void SoftmaxState<T>::merge_row(int64_t row, const SoftmaxState& other, int64_t r) {
  const T m2 = other.max[r];
  if (m2 == -std::numeric_limits<T>::infinity()) return;  // other saw no key: identity
  const T m1 = max[row];
  const T m = std::max(m1, m2);
  const T a1 = std::exp(m1 - m);  // 0 when this row saw no key (m1 = -inf)
  const T a2 = std::exp(m2 - m);
  max[row] = m;
  sum[row] = sum[row] * a1 + other.sum[r] * a2;
  T* o1 = &out[row * width];
  const T* o2 = &other.out[r * other.width];
  for (int64_t d = 0; d < width; ++d) o1[d] = o1[d] * a1 + o2[d] * a2;
}

template <class T>
void SoftmaxState<T>::merge(const SoftmaxState& other) {
  assert(other.rows == rows && other.width == width);
  for (int64_t r = 0; r < rows; ++r) merge_row(r, other, r);
}

template <class T>
void SoftmaxState<T>::finalize(std::vector<T>& normalized, std::vector<T>& lse) const {
  normalized.assign(static_cast<size_t>(rows * width), T(0));
  lse.assign(static_cast<size_t>(rows), -std::numeric_limits<T>::infinity());
  for (int64_t r = 0; r < rows; ++r) {
    if (max[r] == -std::numeric_limits<T>::infinity() || sum[r] == T(0)) continue;
    const T inv = T(1) / sum[r];
    for (int64_t d = 0; d < width; ++d) normalized[r * width + d] = out[r * width + d] * inv;
    lse[r] = max[r] + std::log(sum[r]);
  }
}

template <class T>
SoftmaxState<T> softmax_state_of(const std::vector<T>& scores, const std::vector<T>& values, int64_t width) {
  SoftmaxState<T> state = SoftmaxState<T>::empty(1, width);
  const T m = scores.empty() ? -std::numeric_limits<T>::infinity() : *std::max_element(scores.begin(), scores.end());
  if (m == -std::numeric_limits<T>::infinity()) return state;
  state.max[0] = m;
  for (size_t j = 0; j < scores.size(); ++j) {
    const T p = std::exp(scores[j] - m);
    state.sum[0] += p;
    for (int64_t d = 0; d < width; ++d) state.out[d] += p * values[j * width + d];
  }
  return state;
}

template <class T>
void merge_lse_form(std::vector<T>& out_a, std::vector<T>& lse_a, const std::vector<T>& out_b,
                    const std::vector<T>& lse_b, int64_t width) {
  const T neg_inf = -std::numeric_limits<T>::infinity();
  for (size_t r = 0; r < lse_a.size(); ++r) {
    if (lse_b[r] == neg_inf) continue;
    if (lse_a[r] == neg_inf) {
      lse_a[r] = lse_b[r];
      std::copy_n(&out_b[r * width], width, &out_a[r * width]);
      continue;
    }
    const T hi = std::max(lse_a[r], lse_b[r]);
    const T lse = hi + std::log(std::exp(lse_a[r] - hi) + std::exp(lse_b[r] - hi));
    const T wa = std::exp(lse_a[r] - lse);
    const T wb = std::exp(lse_b[r] - lse);
    for (int64_t d = 0; d < width; ++d) out_a[r * width + d] = out_a[r * width + d] * wa + out_b[r * width + d] * wb;
    lse_a[r] = lse;
  }
}

template struct SoftmaxState<float>;
template struct SoftmaxState<double>;
template SoftmaxState<float> softmax_state_of(const std::vector<float>&, const std::vector<float>&, int64_t);
template SoftmaxState<double> softmax_state_of(const std::vector<double>&, const std::vector<double>&, int64_t);
template void merge_lse_form(std::vector<float>&, std::vector<float>&, const std::vector<float>&,
                             const std::vector<float>&, int64_t);
template void merge_lse_form(std::vector<double>&, std::vector<double>&, const std::vector<double>&,
                             const std::vector<double>&, int64_t);

}  // namespace ringlab
