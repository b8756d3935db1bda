// A stand-in for the CUDA toolkit's cuda_bf16.h, for compiling a GPU lab's kernel as host C++
// under ringlab's warp emulator without the toolkit: the bf16 types the emulator names, with the
// toolkit's layout (16 bits), and the one conversion it uses. Not for nvcc: there the real header
// is found.
#pragma once

#include <cstdint>
#include <cstring>

struct __nv_bfloat16_raw {
  unsigned short x;
};

struct alignas(2) __nv_bfloat16 {
  unsigned short __x;
  __nv_bfloat16() = default;
  __nv_bfloat16(const __nv_bfloat16_raw& raw) : __x(raw.x) {}  // NOLINT(google-explicit-constructor): as CUDA's
};

// bf16 is the top half of an fp32: widening is exact.
static inline float __bfloat162float(__nv_bfloat16 value) {
  const uint32_t bits = static_cast<uint32_t>(value.__x) << 16;
  float result;
  std::memcpy(&result, &bits, sizeof result);
  return result;
}
