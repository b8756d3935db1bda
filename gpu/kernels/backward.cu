// Backward launches: the tensor-core kernel for (bf16 | fp16) x (D = 64 | 128) and the fp32 kernel.
#include "gpu/kernels/attention_kernels.hpp"
#include "gpu/kernels/backward_fp32.cuh"
#include "gpu/kernels/backward_mma.cuh"
#include "gpu/kernels/launch.cuh"

namespace ringlab::gpu {

// The most dynamic shared memory each launch above asks for, as records in this object for the
// static resource check (tests/gpu/kernel_static.py; launch.cuh, smem_record), and checked here
// against the per-block limit (the check adds the kernels' static shared memory from the cubins).
RINGLAB_SMEM_RECORDS_16BIT(kBackwardSmem, "backward_mma_kernel", "", BackwardMmaTiles);
static_assert(BackwardFp32Tiles::smem_bytes(BackwardFp32Tiles::kMaxDim) <= kMaxSmemPerBlock);
extern const auto kBackwardSmemFp32 =
    smem_record("backward_fp32_kernel", BackwardFp32Tiles::smem_bytes(BackwardFp32Tiles::kMaxDim));

void backward_accumulate(Dtype dtype, const BackwardParams& p, cudaStream_t stream) {
  if (const std::string why = store_dkv_problem(dtype == Dtype::fp32, p); !why.empty()) throw UsageError(why);
  launch_by_dtype(dtype, p, RINGLAB_MMA_LAUNCH(backward_mma_kernel, BackwardMmaTiles, k_tiles), [&] {
    using Tiles = BackwardFp32Tiles;
    launch_attention(backward_fp32_kernel, Tiles::k_tiles(p.a), Tiles::kThreads, Tiles::smem_bytes(p.a.dim), p, stream);
  });
}

}  // namespace ringlab::gpu
