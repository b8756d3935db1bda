// Backward launches: the tensor-core kernel for (bf16 | fp16) x (D = 64 | 128) and the fp32 kernel.
#include "gpu/kernels/attention_kernels.hpp"
#include "gpu/kernels/launch.cuh"
#include "gpu/kernels/backward_fp32.cuh"
#include "gpu/kernels/backward_mma.cuh"
#include "reference/error.hpp"

namespace ringlab::gpu {
namespace {

template <class T, int D>
void launch_mma(const BackwardParams& p, cudaStream_t stream) {
  using Tiles = BackwardMmaTiles<D>;
  launch_attention(backward_mma_kernel<T, D>, Tiles::k_tiles(p.a), Tiles::kThreads, Tiles::kSmemBytes, p, stream);
}

void launch_fp32(const BackwardParams& p, cudaStream_t stream) {
  using Tiles = BackwardFp32Tiles;
  launch_attention(backward_fp32_kernel, Tiles::k_tiles(p.a), Tiles::kThreads, Tiles::smem_bytes(p.a.dim), p, stream);
}

}  // namespace

void backward_accumulate(Dtype dtype, const BackwardParams& p, cudaStream_t stream) {
  if (p.a.q_end <= p.a.q_begin || p.a.kv_end <= p.a.kv_begin) return;
  if (const std::string why = kernel_support(dtype, p.a.dim); !why.empty()) throw UsageError(why);
  switch (dtype) {
    case Dtype::bf16:
      return p.a.dim == 64 ? launch_mma<__nv_bfloat16, 64>(p, stream) : launch_mma<__nv_bfloat16, 128>(p, stream);
    case Dtype::fp16:
      return p.a.dim == 64 ? launch_mma<__half, 64>(p, stream) : launch_mma<__half, 128>(p, stream);
    case Dtype::fp32:
      return launch_fp32(p, stream);
  }
}

}  // namespace ringlab::gpu
