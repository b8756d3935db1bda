#include "gpu/dtype.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstring>
#include <stdexcept>

#include "reference/error.hpp"
#include "reference/names.hpp"

namespace ringlab::gpu {

namespace {

constexpr const char* kDtypeNames[] = {"bf16", "fp16", "fp32"};

}  // namespace

const char* dtype_name(Dtype dtype) { return name_of(kDtypeNames, dtype); }

Dtype parse_dtype(const std::string& name) { return parse_named<Dtype>(kDtypeNames, name, "dtype", "--dtype"); }

int64_t dtype_bytes(Dtype dtype) { return dtype == Dtype::fp32 ? 4 : 2; }

float round_to_dtype(Dtype dtype, float x) {
  switch (dtype) {
    case Dtype::bf16: return __bfloat162float(__float2bfloat16(x));
    case Dtype::fp16: return __half2float(__float2half(x));
    case Dtype::fp32: return x;
  }
  return x;
}

Tensor<double> rounded_to_dtype(const Tensor<double>& tensor, Dtype dtype) {
  Tensor<double> result(tensor.shape());
  for (int64_t i = 0; i < tensor.size(); ++i) result[i] = round_to_dtype(dtype, static_cast<float>(tensor[i]));
  return result;
}

std::vector<unsigned char> encode(std::span<const float> values, Dtype dtype) {
  std::vector<unsigned char> bytes(values.size() * static_cast<size_t>(dtype_bytes(dtype)));
  for (size_t i = 0; i < values.size(); ++i) {
    unsigned char* at = bytes.data() + i * static_cast<size_t>(dtype_bytes(dtype));
    if (dtype == Dtype::bf16) {
      const __nv_bfloat16_raw raw = __float2bfloat16(values[i]);
      std::memcpy(at, &raw.x, 2);
    } else if (dtype == Dtype::fp16) {
      const __half_raw raw = __float2half(values[i]);
      std::memcpy(at, &raw.x, 2);
    } else {
      std::memcpy(at, &values[i], 4);
    }
  }
  return bytes;
}

void decode(std::span<const unsigned char> bytes, Dtype dtype, std::span<float> values) {
  const auto size = static_cast<size_t>(dtype_bytes(dtype));
  if (bytes.size() != values.size() * size) throw std::invalid_argument("decode: byte count does not match");
  for (size_t i = 0; i < values.size(); ++i) {
    const unsigned char* at = bytes.data() + i * size;
    if (dtype == Dtype::bf16) {
      __nv_bfloat16_raw raw;
      std::memcpy(&raw.x, at, 2);
      values[i] = __bfloat162float(__nv_bfloat16(raw));
    } else if (dtype == Dtype::fp16) {
      __half_raw raw;
      std::memcpy(&raw.x, at, 2);
      values[i] = __half2float(__half(raw));
    } else {
      std::memcpy(&values[i], at, 4);
    }
  }
}

namespace {
Tolerance bf16_tolerance(const std::string& tensor) { return gpu_tolerance(Dtype::bf16, tensor); }
Tolerance fp16_tolerance(const std::string& tensor) { return gpu_tolerance(Dtype::fp16, tensor); }
Tolerance fp32_gpu_tolerance(const std::string& tensor) { return gpu_tolerance(Dtype::fp32, tensor); }
}  // namespace

ToleranceFunction gpu_tolerance_function(Dtype dtype) {
  switch (dtype) {
    case Dtype::bf16: return bf16_tolerance;
    case Dtype::fp16: return fp16_tolerance;
    case Dtype::fp32: return fp32_gpu_tolerance;
  }
  return fp32_gpu_tolerance;
}

Tolerance gpu_tolerance(Dtype dtype, const std::string& tensor) {
  const bool forward_out = tensor == "out", lse = tensor == "lse";
  switch (dtype) {
    case Dtype::fp32: return fp32_tolerance(tensor);
    case Dtype::bf16:  // 2^-9 relative rounding of P and dS
      if (lse) return {1e-3, 1e-3};
      return forward_out ? Tolerance{1e-2, 2e-2} : Tolerance{3e-2, 3e-2};
    case Dtype::fp16:  // 2^-12
      if (lse) return {1e-3, 1e-3};
      return forward_out ? Tolerance{3e-3, 5e-3} : Tolerance{1e-2, 1e-2};
  }
  return fp32_tolerance(tensor);
}

}  // namespace ringlab::gpu
