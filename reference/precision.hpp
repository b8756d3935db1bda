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

#include <cstdint>
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

// "(0, 17, 2, 5)"
std::string index_text(const Shape& index);

}  // namespace ringlab
