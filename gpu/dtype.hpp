// Input precisions of the GPU backend: bf16 and fp16 run on the tensor cores, fp32 on the CUDA
// cores (the precise path, for tight checks). Accumulation is fp32 in all three.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "reference/compare.hpp"
#include "reference/tensor.hpp"

namespace ringlab::gpu {

enum class Dtype : uint8_t { bf16, fp16, fp32 };

const char* dtype_name(Dtype dtype);         // "bf16" | "fp16" | "fp32"
Dtype parse_dtype(const std::string& name);  // throws UsageError naming the choices
int64_t dtype_bytes(Dtype dtype);            // 2, 2, 4

// The value the device sees: x rounded to the dtype (round to nearest even) and back.
float round_to_dtype(Dtype dtype, float x);
// Every element of a tensor rounded to the dtype: the oracle's inputs, so that the reference is
// computed on exactly the numbers the kernels read.
Tensor<double> rounded_to_dtype(const Tensor<double>& tensor, Dtype dtype);
// Host bytes of the tensor in the dtype (dtype_bytes each), ready for cudaMemcpy.
std::vector<unsigned char> encode(std::span<const float> values, Dtype dtype);
// The inverse: host bytes of values.size() elements in the dtype, widened (exactly) to float.
void decode(std::span<const unsigned char> bytes, Dtype dtype, std::span<float> values);

// Tolerances of a GPU executor's outputs against the float64 oracle computed on inputs rounded
// to the dtype, per tensor ("out", "lse", "dq", "dk", "dv"). fp32 is reference/compare's
// fp32_tolerance. bf16 and fp16 are looser because the kernels round P (and dS) to the input
// precision before the second GEMM, as FlashAttention does: 8 (bf16) or 11 (fp16) mantissa bits.
// The CPU emulation of the kernels (gpu/emulation) uses about a sixth of these at its
// sizes; a wrong block, mask or rescale is O(1) off.
Tolerance gpu_tolerance(Dtype dtype, const std::string& tensor);
// The same as a plain function of the tensor name, the form sim/pipeline/verification.hpp's verify takes.
using ToleranceFunction = Tolerance (*)(const std::string& tensor);
ToleranceFunction gpu_tolerance_function(Dtype dtype);

}  // namespace ringlab::gpu
