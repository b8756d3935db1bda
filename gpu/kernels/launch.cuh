// One launch of an attention kernel (forward.cu, backward.cu): a block per (tile, batch x head),
// the kernel's dynamic shared memory allowed first, errors checked. The grid's y dimension holds
// B x H, which CUDA caps at 65535 blocks: a larger product is refused with a message naming the
// fix instead of failing as an invalid launch.
#pragma once

#include <cuda_runtime_api.h>

#include <string>

#include "gpu/cuda_check.hpp"
#include "gpu/kernels/kernel_params.hpp"
#include "reference/error.hpp"

namespace ringlab::gpu {

inline constexpr long long kMaxGridY = 65535;

template <class Params>
void launch_attention(void (*kernel)(Params), int tiles, int threads, int smem, const Params& p, cudaStream_t stream) {
  const long long batch_heads = static_cast<long long>(p.a.batch) * p.a.heads;
  if (batch_heads > kMaxGridY) {
    throw UsageError("B x H = " + std::to_string(batch_heads) + " (batch x heads per rank) exceeds the " +
                     std::to_string(kMaxGridY) + " blocks a CUDA grid allows in y; use a smaller --batch or fewer --heads");
  }
  RINGLAB_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  const dim3 grid(static_cast<unsigned>(tiles), static_cast<unsigned>(batch_heads));
  kernel<<<grid, threads, smem, stream>>>(p);
  RINGLAB_CUDA_CHECK(cudaGetLastError());
}

}  // namespace ringlab::gpu
