// A stand-in for the CUDA toolkit's cuda_fp16.h, for compiling a GPU lab's kernel as host C++
// under ringlab's warp emulator without the toolkit: the fp16 types the emulator names, with the
// toolkit's layout (16 bits), and the one conversion it uses. Not for nvcc: there the real header
// is found.
#pragma once

#include <cmath>
#include <cstdint>

struct __half_raw {
  unsigned short x;
};

struct alignas(2) __half {
  unsigned short __x;
  __half() = default;
  __half(const __half_raw& raw) : __x(raw.x) {}  // NOLINT(google-explicit-constructor): as CUDA's
};

// IEEE binary16 -> binary32, exact: normals, subnormals, zeros, infinities and NaN.
static inline float __half2float(__half value) {
  const unsigned sign = value.__x >> 15, exponent = (value.__x >> 10) & 0x1f, mantissa = value.__x & 0x3ff;
  float magnitude;
  if (exponent == 0) {
    magnitude = std::ldexp(static_cast<float>(mantissa), -24);
  } else if (exponent == 31) {
    magnitude = mantissa == 0 ? INFINITY : NAN;
  } else {
    magnitude = std::ldexp(static_cast<float>(mantissa | 0x400), static_cast<int>(exponent) - 25);
  }
  return sign ? -magnitude : magnitude;
}
