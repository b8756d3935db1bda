// Forward launches: the tensor-core kernel for (bf16 | fp16) x (D = 64 | 128) (forward_fa2.cuh) and
// the fp32 kernel.
#include "gpu/kernels/attention_kernels.hpp"
#include "gpu/kernels/forward_fa2.cuh"
#include "gpu/kernels/forward_fp32.cuh"
#include "gpu/kernels/launch.cuh"

namespace ringlab::gpu {

// The most dynamic shared memory each launch above asks for, as records in this object for the
// static resource check (tests/gpu/kernel_static.py; launch.cuh, smem_record), and checked here
// against the per-block limit (the check adds the kernels' static shared memory from the cubins).
RINGLAB_SMEM_RECORDS_16BIT(kForwardSmem, "forward_fa2_kernel", ", 256", ForwardFa2Tiles);
RINGLAB_SMEM_RECORDS_16BIT(kForwardInitSmem, "forward_fa2_init_kernel", ", 256", ForwardFa2Tiles);
static_assert(ForwardFp32Tiles::smem_bytes(ForwardFp32Tiles::kMaxDim) <= kMaxSmemPerBlock);
static_assert(ForwardFa2Tiles<64>::kChunkTiles == 256 && ForwardFa2Tiles<128>::kChunkTiles == 256,
              "the records above name the kernels' default chunk size");
extern const auto kForwardSmemFp32 =
    smem_record("forward_fp32_kernel", ForwardFp32Tiles::smem_bytes(ForwardFp32Tiles::kMaxDim));

std::string kernel_support(Dtype dtype, int64_t dim) {
  if (dtype == Dtype::fp32) {
    if (dim >= 1 && dim <= ForwardFp32Tiles::kMaxDim) return "";
    return "the fp32 kernels support D from 1 to 128, got D=" + std::to_string(dim) + "; pick --dim <= 128";
  }
  if (dim == 64 || dim == 128) return "";
  return std::string("the ") + dtype_name(dtype) +
         " tensor-core kernels support D = 64 or 128, got D=" + std::to_string(dim) +
         "; use --dim 64 or 128, or --dtype fp32 (any D <= 128)";
}

// The fused finalize and init are the tensor-core kernel's (forward_fa2.cuh); the others only
// accumulate into an initialised state.
static void refuse_fused_finalize(const ForwardParams& p, const char* kernel) {
  if (p.out != nullptr || p.lse != nullptr) {
    throw UsageError(std::string("the fused finalize (ForwardParams::out, lse) is forward_fa2's; ") + kernel +
                     " only accumulates: call finalize_accumulator after it");
  }
  if (p.init) {
    throw UsageError(std::string("the fused init (ForwardParams::init) is forward_fa2's; ") + kernel +
                     " reads the accumulator: call init_accumulator before it");
  }
}

void forward_accumulate(Dtype dtype, const ForwardParams& p, cudaStream_t stream) {
  if ((p.out == nullptr) != (p.lse == nullptr)) throw UsageError("ForwardParams: out and lse are set together");
  // The rows' first step starts them in forward_fa2_init_kernel (forward_fa2.cuh: why two kernels).
  // Its blocks in forward_launch's order: heaviest tiles first under the causal mask.
  auto fa2 = [&](auto type, auto dim) {
    using T = typename decltype(type)::type;
    constexpr int D = decltype(dim)::value;
    using Tiles = ForwardFa2Tiles<D>;
    const ForwardLaunch launch = forward_launch(p, Tiles::q_tiles(p.a));
    launch_attention(p.init ? forward_fa2_init_kernel<T, D> : forward_fa2_kernel<T, D>, Tiles::q_tiles(p.a),
                     Tiles::kThreads, Tiles::kSmemBytes, launch.params, stream, &launch.grid);
  };
  launch_by_dtype(dtype, p, fa2, [&] {
    refuse_fused_finalize(p, "the fp32 kernel");
    using Tiles = ForwardFp32Tiles;
    launch_attention(forward_fp32_kernel, Tiles::q_tiles(p.a), Tiles::kThreads, Tiles::smem_bytes(p.a.dim), p, stream);
  });
}

}  // namespace ringlab::gpu
