// Low-precision storage, emulated on the CPU: float32 values rounded to bfloat16 or IEEE half
// (binary16) exactly as a GPU's conversion instruction does it — round to nearest, ties to even —
// and widened back. The simulator stores tensors in a precision by keeping floats whose values
// are representable in it: round_to(p, x) is the value a bf16/fp16 kernel would have stored.
//
//   bf16: 1 sign, 8 exponent, 7 fraction bits (float32's range), unit roundoff u = 2^-8
//   fp16: 1 sign, 5 exponent, 10 fraction bits, largest finite 65504, subnormals from 2^-24,
//         unit roundoff u = 2^-11
//
// NaN stays NaN (quiet), infinities stay infinite. A finite value that rounds to infinity is an
// overflow: round_tensor reports it, with the tensor and the element, instead of leaving an inf.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>

#include "reference/tensor.hpp"

namespace ringlab {

enum class Precision : uint8_t { fp32, bf16, fp16 };

const char* precision_name(Precision precision);  // "fp32" | "bf16" | "fp16"
// Throws UsageError "unknown precision 'x'; use <flag> fp32, bf16 or fp16".
Precision parse_precision(const std::string& name, const char* flag = "--precision");
int64_t precision_bytes(Precision precision);  // 4, 2, 2
// Unit roundoff: half the distance from 1 to the next value, 2^-24, 2^-8, 2^-11.
double unit_roundoff(Precision precision);

// Bit-level conversions (round to nearest even; NaN -> quiet NaN with the sign kept).
uint16_t bf16_bits(float x);
float from_bf16_bits(uint16_t bits);
uint16_t fp16_bits(float x);
float from_fp16_bits(uint16_t bits);

// x rounded to the precision and back to float (fp32: x itself).
float round_to(Precision precision, float x);
// round_to on data[0, count) in place, with no overflow check: the blockwise kernel's rounding of
// its mma operands (P, dS), one call per tile so that the conversion inlines into the loop.
void round_floats(float* data, int64_t count, Precision precision);

// A finite value that does not fit the precision (fp16 beyond 65504 rounds to infinity).
class PrecisionOverflow : public std::runtime_error {
 public:
  PrecisionOverflow(const std::string& tensor, const Shape& index, float value, Precision precision);
  std::string tensor;
  Shape index;
  float value;
};

// Every element of t rounded to the precision, in place. Throws PrecisionOverflow naming `name`
// and the first element that was finite and is no longer.
void round_tensor(Tensor<float>& t, Precision precision, const char* name);
// The same for a double tensor (the inputs, rounded through float).
void round_tensor(Tensor<double>& t, Precision precision, const char* name);

// The two ways to write the merge of two (out, lse) states over disjoint key sets:
//   exp:         lse = m + log(e^{lse_a - m} + e^{lse_b - m}), m = max(lse_a, lse_b)
//                out = out_a e^{lse_a - lse} + out_b e^{lse_b - lse}
//   logsigmoid:  out = out_a - sigmoid(lse_b - lse_a) (out_a - out_b)
//                lse = lse_a - logsigmoid(lse_a - lse_b)
// Both are the same function exactly; the second never exponentiates a positive number, so no
// difference of LSEs can overflow it (the exp form is safe too when it shifts by the max, as here;
// written without the shift, e^{lse} overflows float for lse > 88).
enum class MergeForm : uint8_t { exp, logsigmoid };
const char* merge_form_name(MergeForm form);          // "exp" | "logsigmoid"
MergeForm parse_merge_form(const std::string& name);  // throws UsageError

// sigmoid(x) = 1 / (1 + e^-x) and logsigmoid(x) = log sigmoid(x), without overflow for any x.
template <class T>
T stable_sigmoid(T x) {
  if (x >= 0) return T(1) / (T(1) + std::exp(-x));
  const T e = std::exp(x);
  return e / (T(1) + e);
}
template <class T>
T stable_logsigmoid(T x) {
  return x >= 0 ? -std::log1p(std::exp(-x)) : x - std::log1p(std::exp(x));
}

// One row: (out_a[0..width), lse_a) <- (out_a, lse_a) (+) (out_b, lse_b). A -inf LSE (no keys) is
// the identity.
template <class T>
void merge_lse_row(T* out_a, T& lse_a, const T* out_b, T lse_b, int64_t width, MergeForm form) {
  const T none = -std::numeric_limits<T>::infinity();
  if (lse_b == none) return;
  if (lse_a == none) {
    std::copy_n(out_b, width, out_a);
    lse_a = lse_b;
    return;
  }
  if (form == MergeForm::exp) {
    const T hi = std::max(lse_a, lse_b);
    const T lse = hi + std::log(std::exp(lse_a - hi) + std::exp(lse_b - hi));
    const T wa = std::exp(lse_a - lse), wb = std::exp(lse_b - lse);
    for (int64_t d = 0; d < width; ++d) out_a[d] = out_a[d] * wa + out_b[d] * wb;
    lse_a = lse;
  } else {
    const T s = stable_sigmoid(lse_b - lse_a);
    for (int64_t d = 0; d < width; ++d) out_a[d] = out_a[d] - s * (out_a[d] - out_b[d]);
    lse_a = lse_a - stable_logsigmoid(lse_a - lse_b);
  }
}

// "(0, 17, 2, 5)"
std::string index_text(const Shape& index);

}  // namespace ringlab
