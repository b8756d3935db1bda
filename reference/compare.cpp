#include "reference/compare.hpp"

#include <cmath>
#include <cstdio>
#include <stdexcept>

namespace ringlab {
namespace {

Shape unflatten(int64_t flat, const Shape& shape) {
  Shape index(shape.size());
  for (size_t i = shape.size(); i-- > 0;) {
    index[i] = shape[i] ? flat % shape[i] : 0;
    flat = shape[i] ? flat / shape[i] : 0;
  }
  return index;
}

template <class A, class R>
CompareResult compare_impl(std::span<const A> actual, std::span<const R> expected, const Shape& shape,
                           Tolerance tolerance) {
  if (actual.size() != expected.size()) {
    throw std::invalid_argument("compare: " + std::to_string(actual.size()) + " values against " +
                                std::to_string(expected.size()));
  }
  CompareResult result;
  result.count = static_cast<int64_t>(actual.size());
  double squares = 0;
  int64_t finite = 0;
  for (size_t i = 0; i < actual.size(); ++i) {
    const double a = static_cast<double>(actual[i]);
    const double r = static_cast<double>(expected[i]);
    bool good;
    if (std::isnan(a) || std::isnan(r)) {
      good = false;
    } else if (std::isinf(a) || std::isinf(r)) {
      good = a == r;
    } else {
      const double error = std::fabs(a - r);
      result.max_abs_error = std::max(result.max_abs_error, error);
      squares += error * error;
      ++finite;
      // Relative error only where it means something: where |r| is large enough for the relative
      // term of the tolerance to dominate (near-zero references make any relative error huge).
      const double floor = tolerance.rel > 0 ? tolerance.abs / tolerance.rel : 0;
      if (r != 0 && std::fabs(r) >= floor) result.max_rel_error = std::max(result.max_rel_error, error / std::fabs(r));
      const double allowed = tolerance.abs + tolerance.rel * std::fabs(r);
      good = error <= allowed;
      result.tolerance_used =
          std::max(result.tolerance_used, allowed > 0 ? error / allowed : (error > 0 ? INFINITY : 0));
    }
    if (!good && !(result.tolerance_used > 1)) result.tolerance_used = INFINITY;
    if (!good) {
      if (result.bad == 0) {
        result.first_bad = static_cast<int64_t>(i);
        result.first_bad_actual = a;
        result.first_bad_expected = r;
      }
      ++result.bad;
    }
  }
  result.ok = result.bad == 0;
  result.rms_error = finite > 0 ? std::sqrt(squares / static_cast<double>(finite)) : 0;
  if (!result.ok) result.first_bad_index = unflatten(result.first_bad, shape);
  return result;
}

}  // namespace

Tolerance fp32_tolerance(const std::string& tensor) {
  if (tensor == "out") return {2e-5, 1e-4};
  if (tensor == "lse") return {2e-5, 1e-5};
  return {1e-4, 1e-3};  // dq, dk, dv: sums over many more terms
}

std::string CompareResult::describe() const {
  if (ok) return "ok";
  char values[96];
  std::snprintf(values, sizeof values, ": %.7g vs %.7g", first_bad_actual, first_bad_expected);
  return std::to_string(bad) + " of " + std::to_string(count) + " outside tolerance; first at " +
         shape_string(first_bad_index) + values;
}

CompareResult compare(std::span<const float> actual, std::span<const double> expected, const Shape& shape,
                      Tolerance tolerance) {
  return compare_impl(actual, expected, shape, tolerance);
}
CompareResult compare(std::span<const double> actual, std::span<const double> expected, const Shape& shape,
                      Tolerance tolerance) {
  return compare_impl(actual, expected, shape, tolerance);
}
CompareResult compare(std::span<const float> actual, std::span<const float> expected, const Shape& shape,
                      Tolerance tolerance) {
  return compare_impl(actual, expected, shape, tolerance);
}

}  // namespace ringlab
