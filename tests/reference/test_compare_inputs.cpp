// The shared comparison and the deterministic inputs.
#include <catch2/catch.hpp>
#include <cmath>

#include "reference/compare.hpp"
#include "reference/inputs.hpp"

using namespace ringlab;

TEST_CASE("compare reports the first bad index and both values", "[compare]") {
  Tensor<float> a({2, 3});
  Tensor<double> r({2, 3});
  for (int64_t i = 0; i < 6; ++i) a[i] = static_cast<float>(r[i] = double(i));
  CHECK(compare(a, r, {1e-6, 0}).ok);
  a[4] = 4.5f;  // index (1, 1)
  a[5] = 9.0f;
  const CompareResult result = compare(a, r, {0.1, 0.01});
  CHECK_FALSE(result.ok);
  CHECK(result.bad == 2);
  CHECK(result.first_bad == 4);
  CHECK(result.first_bad_index == Shape{1, 1});
  CHECK(result.first_bad_actual == 4.5);
  CHECK(result.first_bad_expected == 4.0);
  CHECK(result.max_abs_error == 4.0);
  CHECK(result.tolerance_used > 1);
  CHECK(result.describe().find("(1, 1)") != std::string::npos);
}

TEST_CASE("infinities compare equal, NaN always fails", "[compare]") {
  Tensor<float> a({3});
  Tensor<double> r({3});
  a[0] = -INFINITY;
  r[0] = -INFINITY;
  CHECK(compare(a, r, {1e-6, 1e-6}).ok);
  a[1] = NAN;
  CHECK_FALSE(compare(a, r, {1e9, 1e9}).ok);
  a[1] = 0;
  r[2] = -INFINITY;
  CHECK_FALSE(compare(a, r, {1e9, 1e9}).ok);
}

TEST_CASE("inputs are a pure function of (seed, tensor, index)", "[inputs]") {
  const AttentionDims dims{2, 33, 4, 2, 8};
  const AttentionInputs<float> a = make_inputs(dims, 42, true), b = make_inputs(dims, 42, true);
  CHECK(a.q == b.q);
  CHECK(a.dout == b.dout);
  CHECK(a.k[17] == input_value(42, TensorId::k, 17));
  const AttentionInputs<float> c = make_inputs(dims, 43, true);
  CHECK(c.q != a.q);
  CHECK(a.k != a.v);  // different tensors draw different values
  // Standard normal: mean ~ 0 and variance ~ 1 over many values.
  double sum = 0, squares = 0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    const double x = input_value(1, TensorId::q, static_cast<uint64_t>(i));
    sum += x;
    squares += x * x;
  }
  CHECK(std::fabs(sum / n) < 0.01);
  CHECK(std::fabs(squares / n - 1.0) < 0.02);
}
