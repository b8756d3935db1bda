#include "reference/precision.hpp"

#include <bit>
#include <cmath>
#include <cstdio>

#include "reference/error.hpp"
#include "reference/names.hpp"

namespace ringlab {

namespace {

constexpr const char* kPrecisionNames[] = {"fp32", "bf16", "fp16"};
constexpr const char* kMergeNames[] = {"exp", "logsigmoid"};

// The multi-index of flat element `flat` of a row-major shape.
Shape unravel(int64_t flat, const Shape& shape) {
  Shape index(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    index[d] = shape[d] > 0 ? flat % shape[d] : 0;
    flat = shape[d] > 0 ? flat / shape[d] : 0;
  }
  return index;
}

std::string overflow_text(const std::string& tensor, const Shape& index, float value, Precision precision) {
  char number[48];
  std::snprintf(number, sizeof number, "%.9g", static_cast<double>(value));
  return std::string(precision_name(precision)) + " overflow: " + tensor + index_text(index) + " = " + number +
         " is beyond the largest finite " + precision_name(precision) + " value (" +
         (precision == Precision::fp16 ? "65504" : "3.39e38") +
         "); scale the inputs down, or use --precision bf16 (float32's range)";
}

template <class T>
void round_elements(Tensor<T>& t, Precision precision, const char* name) {
  if (precision == Precision::fp32) return;
  for (int64_t i = 0; i < t.size(); ++i) {
    const auto x = static_cast<float>(t[i]);
    const float r = round_to(precision, x);
    if (std::isinf(r) && !std::isinf(x)) throw PrecisionOverflow(name, unravel(i, t.shape()), x, precision);
    t[i] = static_cast<T>(r);
  }
}

}  // namespace

const char* precision_name(Precision precision) { return name_of(kPrecisionNames, precision); }

Precision parse_precision(const std::string& name, const char* flag) {
  return parse_named<Precision>(kPrecisionNames, name, "precision", flag);
}

const char* merge_form_name(MergeForm form) { return name_of(kMergeNames, form); }

MergeForm parse_merge_form(const std::string& name) {
  return parse_named<MergeForm>(kMergeNames, name, "merge form", "--merge");
}

int64_t precision_bytes(Precision precision) { return precision == Precision::fp32 ? 4 : 2; }

double unit_roundoff(Precision precision) {
  switch (precision) {
    case Precision::fp32: return std::ldexp(1.0, -24);
    case Precision::bf16: return std::ldexp(1.0, -8);
    case Precision::fp16: return std::ldexp(1.0, -11);
  }
  return std::ldexp(1.0, -24);
}

uint16_t bf16_bits(float x) {
  const auto f = std::bit_cast<uint32_t>(x);
  if ((f & 0x7FFFFFFFU) > 0x7F800000U) return static_cast<uint16_t>((f >> 16) | 0x0040U);  // quiet NaN
  // Round to nearest even on the 16 bits dropped: add 0x7FFF plus the lowest kept bit. A carry
  // runs into the exponent, as it should (the largest floats round to infinity).
  const uint32_t rounded = f + 0x7FFFU + ((f >> 16) & 1U);
  return static_cast<uint16_t>(rounded >> 16);
}

float from_bf16_bits(uint16_t bits) { return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16); }

uint16_t fp16_bits(float x) {
  const auto f = std::bit_cast<uint32_t>(x);
  const auto sign = static_cast<uint16_t>((f >> 16) & 0x8000U);
  const uint32_t a = f & 0x7FFFFFFFU;
  if (a > 0x7F800000U) return static_cast<uint16_t>(sign | 0x7E00U | ((a >> 13) & 0x3FFU));  // quiet NaN
  if (a >= 0x477FF000U) return static_cast<uint16_t>(sign | 0x7C00U);  // >= 65520 (and inf): infinity
  if (a >= 0x38800000U) {  // >= 2^-14: a normal half; rebias the exponent, round 13 bits away
    uint32_t h = (a - (112U << 23)) >> 13;
    const uint32_t rest = a & 0x1FFFU;
    if (rest > 0x1000U || (rest == 0x1000U && (h & 1U))) ++h;  // a carry may make it the next binade
    return static_cast<uint16_t>(sign | h);
  }
  const uint32_t e = a >> 23;
  if (e < 102) return sign;  // below 2^-25 (float subnormals included): rounds to zero
  // A half subnormal: the value in units of 2^-24 is m 2^(e - 126), m the 24-bit significand.
  const uint32_t m = (a & 0x7FFFFFU) | 0x800000U;
  const uint32_t shift = 126 - e;  // 14 .. 24
  uint32_t h = m >> shift;
  const uint32_t rest = m & ((1U << shift) - 1U), half = 1U << (shift - 1);
  if (rest > half || (rest == half && (h & 1U))) ++h;  // 0x3FF + 1 is the smallest normal, as it should be
  return static_cast<uint16_t>(sign | h);
}

float from_fp16_bits(uint16_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000U) << 16;
  const uint32_t e = (bits >> 10) & 0x1FU, m = bits & 0x3FFU;
  if (e == 0) {
    const float magnitude = std::ldexp(static_cast<float>(m), -24);  // zero or subnormal, exact
    return sign ? -magnitude : magnitude;
  }
  if (e == 31) return std::bit_cast<float>(sign | 0x7F800000U | (m << 13));
  return std::bit_cast<float>(sign | ((e + 112U) << 23) | (m << 13));
}

float round_to(Precision precision, float x) {
  switch (precision) {
    case Precision::fp32: return x;
    case Precision::bf16: return from_bf16_bits(bf16_bits(x));
    case Precision::fp16: return from_fp16_bits(fp16_bits(x));
  }
  return x;
}

void round_floats(float* data, int64_t count, Precision precision) {
  switch (precision) {
    case Precision::fp32: return;
    case Precision::bf16:
      for (int64_t i = 0; i < count; ++i) data[i] = from_bf16_bits(bf16_bits(data[i]));
      return;
    case Precision::fp16:
      for (int64_t i = 0; i < count; ++i) data[i] = from_fp16_bits(fp16_bits(data[i]));
      return;
  }
}

PrecisionOverflow::PrecisionOverflow(const std::string& tensor_name, const Shape& element, float overflowing,
                                     Precision precision)
    : std::runtime_error(overflow_text(tensor_name, element, overflowing, precision)), tensor(tensor_name),
      index(element), value(overflowing) {}

void round_tensor(Tensor<float>& t, Precision precision, const char* name) { round_elements(t, precision, name); }
void round_tensor(Tensor<double>& t, Precision precision, const char* name) { round_elements(t, precision, name); }

std::string index_text(const Shape& index) {
  std::string text = "(";
  for (size_t i = 0; i < index.size(); ++i) text += (i ? ", " : "") + std::to_string(index[i]);
  return text + ")";
}

}  // namespace ringlab
