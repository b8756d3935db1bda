// Launching the attention kernels (forward.cu, backward.cu):
//   launch_by_dtype    an empty block does nothing; an unsupported D is refused (kernel_support);
//                      then the tensor-core kernel of (bf16 | fp16) x (D = 64 | 128), or fp32
//   launch_attention   a block per (tile, batch x head), the kernel's dynamic shared memory
//                      allowed first, errors checked. The grid's y dimension holds B x H, which
//                      CUDA caps at 65535 blocks: a larger product is refused with a message
//                      naming the fix instead of failing as an invalid launch.
#pragma once

#include <cuda_runtime_api.h>

#include <string>
#include <type_traits>

#include "gpu/cuda_check.hpp"
#include "gpu/kernels/attention_kernels.hpp"
#include "gpu/kernels/kernel_params.hpp"
#include "reference/error.hpp"

namespace ringlab::gpu {

inline constexpr long long kMaxGridY = 65535;

template <class Params>
void launch_attention(void (*kernel)(Params), int tiles, int threads, int smem, const Params& p, cudaStream_t stream) {
  const long long batch_heads = static_cast<long long>(p.a.batch) * p.a.heads;
  if (batch_heads > kMaxGridY) {
    throw UsageError("B x H = " + std::to_string(batch_heads) + " (batch x heads per rank) exceeds the " +
                     std::to_string(kMaxGridY) +
                     " blocks a CUDA grid allows in y; use a smaller --batch or fewer --heads");
  }
  RINGLAB_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  const dim3 grid(static_cast<unsigned>(tiles), static_cast<unsigned>(batch_heads));
  kernel<<<grid, threads, smem, stream>>>(p);
  RINGLAB_CUDA_CHECK(cudaGetLastError());
}

// The element type of a tensor-core launch, as a value: mma(DtypeTag<T>{}, std::integral_constant<int, D>{}).
template <class T>
struct DtypeTag {
  using type = T;
};

template <class Params, class Mma, class Fp32>
void launch_by_dtype(Dtype dtype, const Params& p, Mma&& mma, Fp32&& fp32) {
  if (p.a.q_end <= p.a.q_begin || p.a.kv_end <= p.a.kv_begin) return;
  if (const std::string why = kernel_support(dtype, p.a.dim); !why.empty()) throw UsageError(why);
  using D64 = std::integral_constant<int, 64>;
  using D128 = std::integral_constant<int, 128>;
  switch (dtype) {
    case Dtype::bf16:
      return p.a.dim == 64 ? mma(DtypeTag<__nv_bfloat16>{}, D64{}) : mma(DtypeTag<__nv_bfloat16>{}, D128{});
    case Dtype::fp16: return p.a.dim == 64 ? mma(DtypeTag<__half>{}, D64{}) : mma(DtypeTag<__half>{}, D128{});
    case Dtype::fp32: return fp32();
  }
}

}  // namespace ringlab::gpu
