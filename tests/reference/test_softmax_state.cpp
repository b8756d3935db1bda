// The online-softmax merge: per-chunk states merged in every order and every bracketing give
// exact attention; the worst difference is reported in ULPs for float32 and float64.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <functional>
#include <iostream>
#include <limits>
#include <numeric>

#include "reference/exact_attention.hpp"
#include "reference/inputs.hpp"
#include "reference/softmax_state.hpp"

using namespace ringlab;

namespace {

constexpr int64_t kQueries = 6, kKeys = 40, kDim = 16;
const int64_t kCuts[] = {0, 3, 14, 21, 34, 40};  // 5 chunks of unequal sizes
constexpr int kChunks = 5;

// State of every query row over keys [begin, end), from the definition, in T.
template <class T>
SoftmaxState<T> chunk_state(const Tensor<T>& q, const Tensor<T>& k, const Tensor<T>& v, int64_t begin, int64_t end) {
  const T scale = T(1) / std::sqrt(T(kDim));
  SoftmaxState<T> state = SoftmaxState<T>::empty(kQueries, kDim);
  for (int64_t i = 0; i < kQueries; ++i) {
    std::vector<T> scores, values;
    for (int64_t j = begin; j < end; ++j) {
      T dot = 0;
      for (int64_t d = 0; d < kDim; ++d) dot += q(0, i, 0, d) * k(0, j, 0, d);
      scores.push_back(dot * scale);
      for (int64_t d = 0; d < kDim; ++d) values.push_back(v(0, j, 0, d));
    }
    state.merge_row(i, softmax_state_of(scores, values, kDim), 0);
  }
  return state;
}

// Every bracketing of items[lo, hi): all binary merge trees, in order.
template <class T>
std::vector<SoftmaxState<T>> all_bracketings(const std::vector<const SoftmaxState<T>*>& items, size_t lo, size_t hi) {
  if (hi - lo == 1) return {*items[lo]};
  std::vector<SoftmaxState<T>> results;
  for (size_t split = lo + 1; split < hi; ++split)
    for (const SoftmaxState<T>& left : all_bracketings(items, lo, split))
      for (const SoftmaxState<T>& right : all_bracketings(items, split, hi)) {
        SoftmaxState<T> merged = left;
        merged.merge(right);
        results.push_back(std::move(merged));
      }
  return results;
}

struct Worst {
  double ulps_vs_exact = 0;  // in ULPs of the row's largest |out| (and of |lse| for the LSE)
  double ulps_between_orders = 0;
  int orders = 0;
};

template <class T>
double ulp_of(double magnitude) {
  return std::nextafter(static_cast<T>(magnitude), std::numeric_limits<T>::infinity()) - static_cast<T>(magnitude);
}

template <class T>
Worst merge_everything(const AttentionInputs<double>& inputs, const AttentionOutput<double>& exact) {
  const AttentionInputs<T> x = inputs.cast<T>();
  std::vector<SoftmaxState<T>> chunks;
  for (int c = 0; c < kChunks; ++c) chunks.push_back(chunk_state(x.q, x.k, x.v, kCuts[c], kCuts[c + 1]));
  std::vector<int> order(kChunks);
  std::iota(order.begin(), order.end(), 0);
  Worst worst;
  std::vector<T> first_out, first_lse;
  do {
    std::vector<const SoftmaxState<T>*> items;
    for (int c : order) items.push_back(&chunks[c]);
    for (const SoftmaxState<T>& merged : all_bracketings(items, 0, items.size())) {
      std::vector<T> out, lse;
      merged.finalize(out, lse);
      if (first_out.empty()) {
        first_out = out;
        first_lse = lse;
      }
      for (int64_t i = 0; i < kQueries; ++i) {
        double row_scale = 0;
        for (int64_t d = 0; d < kDim; ++d) row_scale = std::max(row_scale, std::fabs(exact.out(0, i, 0, d)));
        const double ulp = ulp_of<T>(row_scale);
        for (int64_t d = 0; d < kDim; ++d) {
          worst.ulps_vs_exact =
              std::max(worst.ulps_vs_exact, std::fabs(out[i * kDim + d] - exact.out(0, i, 0, d)) / ulp);
          worst.ulps_between_orders =
              std::max(worst.ulps_between_orders, std::fabs(double(out[i * kDim + d]) - first_out[i * kDim + d]) / ulp);
        }
        const double lse_ulp = ulp_of<T>(std::fabs(exact.lse(0, 0, i)));
        worst.ulps_vs_exact = std::max(worst.ulps_vs_exact, std::fabs(lse[i] - exact.lse(0, 0, i)) / lse_ulp);
        worst.ulps_between_orders =
            std::max(worst.ulps_between_orders, std::fabs(double(lse[i]) - first_lse[i]) / lse_ulp);
      }
      ++worst.orders;
    }
  } while (std::next_permutation(order.begin(), order.end()));
  return worst;
}

}  // namespace

TEST_CASE("merging chunk states in every order and bracketing gives exact attention", "[softmax][associativity]") {
  const AttentionDims dims{1, kKeys, 1, 1, kDim};
  AttentionInputs<double> inputs = make_inputs(dims, 17, false).cast<double>();
  // Queries: the first kQueries rows of q.
  Tensor<double> q({1, kQueries, 1, kDim});
  std::copy_n(inputs.q.data(), kQueries * kDim, q.data());
  inputs.q = q;
  const AttentionOutput<double> exact = exact_attention(inputs.q, inputs.k, inputs.v, MaskKind::none);

  const Worst f32 = merge_everything<float>(inputs, exact);
  const Worst f64 = merge_everything<double>(inputs, exact);
  std::cout << "associativity over " << f64.orders << " orders x bracketings of " << kChunks << " chunks:\n"
            << "  float32: worst " << f32.ulps_vs_exact << " ULPs vs exact, " << f32.ulps_between_orders
            << " ULPs between orders\n"
            << "  float64: worst " << f64.ulps_vs_exact << " ULPs vs exact, " << f64.ulps_between_orders
            << " ULPs between orders\n";
  CHECK(f64.orders == 120 * 14);  // 5! orders x Catalan(4) bracketings
  // Rounding only: a handful of ULPs of the row scale. A wrong rescale is off by whole units.
  CHECK(f32.ulps_vs_exact < 32);
  CHECK(f64.ulps_vs_exact < 32);
  CHECK(f32.ulps_between_orders < 32);
  CHECK(f64.ulps_between_orders < 32);
}

TEST_CASE("the empty state is the identity of the merge", "[softmax]") {
  SoftmaxState<double> a = SoftmaxState<double>::empty(1, 2);
  const SoftmaxState<double> b = softmax_state_of<double>({0.5, -1.0, 2.0}, {1, 2, 3, 4, 5, 6}, 2);
  a.merge(b);
  CHECK(a.max == b.max);
  CHECK(a.sum == b.sum);
  CHECK(a.out == b.out);
  SoftmaxState<double> c = b;
  c.merge(SoftmaxState<double>::empty(1, 2));
  CHECK(c.out == b.out);
}

TEST_CASE("the LSE form merges like the (m, l, o) form", "[softmax]") {
  const SoftmaxState<double> a = softmax_state_of<double>({0.1, 3.0}, {1, 0, 0, 1}, 2);
  const SoftmaxState<double> b = softmax_state_of<double>({-2.0, 0.7, 1.5}, {2, 2, -1, 3, 0.5, 0.5}, 2);
  SoftmaxState<double> ab = a;
  ab.merge(b);
  std::vector<double> out_ab, lse_ab, out_a, lse_a, out_b, lse_b;
  ab.finalize(out_ab, lse_ab);
  a.finalize(out_a, lse_a);
  b.finalize(out_b, lse_b);
  merge_lse_form(out_a, lse_a, out_b, lse_b, 2);
  CHECK(lse_a[0] == Approx(lse_ab[0]).epsilon(1e-14));
  CHECK(out_a[0] == Approx(out_ab[0]).epsilon(1e-14));
  CHECK(out_a[1] == Approx(out_ab[1]).epsilon(1e-14));
  // -inf LSE (no keys) is the identity of the LSE form too.
  std::vector<double> out_empty{0, 0}, lse_empty{-INFINITY};
  merge_lse_form(out_empty, lse_empty, out_ab, lse_ab, 2);
  CHECK(lse_empty[0] == lse_ab[0]);
}
