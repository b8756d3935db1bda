// Forward launches: the tensor-core kernel for (bf16 | fp16) x (D = 64 | 128) and the fp32 kernel.
#include "gpu/kernels/attention_kernels.hpp"
#include "gpu/kernels/launch.cuh"
#include "gpu/kernels/forward_fp32.cuh"
#include "gpu/kernels/forward_mma.cuh"
#include "reference/error.hpp"

namespace ringlab::gpu {
namespace {

template <class T, int D>
void launch_mma(const ForwardParams& p, cudaStream_t stream) {
  using Tiles = ForwardMmaTiles<D>;
  launch_attention(forward_mma_kernel<T, D>, Tiles::q_tiles(p.a), Tiles::kThreads, Tiles::kSmemBytes, p, stream);
}

void launch_fp32(const ForwardParams& p, cudaStream_t stream) {
  using Tiles = ForwardFp32Tiles;
  launch_attention(forward_fp32_kernel, Tiles::q_tiles(p.a), Tiles::kThreads, Tiles::smem_bytes(p.a.dim), p, stream);
}

}  // namespace

std::string kernel_support(Dtype dtype, int64_t dim) {
  if (dtype == Dtype::fp32) {
    if (dim >= 1 && dim <= ForwardFp32Tiles::kMaxDim) return "";
    return "the fp32 kernels support D from 1 to 128, got D=" + std::to_string(dim) + "; pick --dim <= 128";
  }
  if (dim == 64 || dim == 128) return "";
  return std::string("the ") + dtype_name(dtype) + " tensor-core kernels support D = 64 or 128, got D=" +
         std::to_string(dim) + "; use --dim 64 or 128, or --dtype fp32 (any D <= 128)";
}

void forward_accumulate(Dtype dtype, const ForwardParams& p, cudaStream_t stream) {
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
