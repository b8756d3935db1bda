// The one shared comparison: |a - r| <= abs + rel |r|, elementwise.
//
// It returns what a person debugging needs — max absolute and relative error, how many elements
// fail, and the first failing index with both values — and never prints or exits by itself.
// Equal infinities (a -inf LSE on both sides) compare equal; NaN on either side always fails.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "reference/tensor.hpp"

namespace ringlab {

struct Tolerance {
  double abs = 0;
  double rel = 0;
};

struct CompareResult {
  bool ok = true;
  int64_t count = 0;          // elements compared
  int64_t bad = 0;            // elements outside the tolerance
  double max_abs_error = 0;   // over all finite pairs
  double rms_error = 0;       // sqrt(mean (a - r)^2) over all finite pairs
  double max_rel_error = 0;   // |a - r| / |r| where the relative term dominates: |r| >= abs / rel
  double tolerance_used = 0;  // max |a - r| / (abs + rel |r|): <= 1 passes (inf for NaN / inf mismatch)
  int64_t first_bad = -1;     // flat index, -1 when ok
  Shape first_bad_index;      // the same as a multi-index of the shape
  double first_bad_actual = 0, first_bad_expected = 0;

  // "first bad element at (0, 17, 2, 5): 0.4131 vs 0.4127" or "ok"
  std::string describe() const;
};

CompareResult compare(std::span<const float> actual, std::span<const double> expected, const Shape& shape,
                      Tolerance tolerance);
CompareResult compare(std::span<const double> actual, std::span<const double> expected, const Shape& shape,
                      Tolerance tolerance);
CompareResult compare(std::span<const float> actual, std::span<const float> expected, const Shape& shape,
                      Tolerance tolerance);

// Tolerances of a float32 kernel or executor (fp32 storage and accumulation) against the float64
// oracle, per output tensor: "out", "lse", "dq", "dk", "dv". The worst errors measured over the
// test suite's shapes use a few percent of these; a wrong block, a missing rescale or a misrouted
// gradient is orders of magnitude above them.
Tolerance fp32_tolerance(const std::string& tensor);

template <class A, class R>
CompareResult compare(const Tensor<A>& actual, const Tensor<R>& expected, Tolerance tolerance) {
  return compare(actual.span(), expected.span(), expected.shape(), tolerance);
}

}  // namespace ringlab
