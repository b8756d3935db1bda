// 06 — FlashAttention-2's tiles: the production forward (gpu/kernels/forward_fa2.cuh, what
// forward_accumulate launches). Over 05: 128-row query tiles with 32 rows per warp, so each
// ldmatrix'd K/V fragment feeds four mma instead of two (at D = 128 Q is re-read from shared memory
// per tile to stay within 255 registers); scale * log2(e) folded into one FFMA before
// ex2.approx.ftz; each key tile classified (skip / full / cut) once per block before the loop
// instead of by every warp inside it; K and V in separate cp.async groups, so S = Q K^T starts
// while V is still landing. Same problem and accumulator path as 05.
#include "gpu/kernels/attention_kernels.hpp"
#include "gpu/kernels/ladder/ladder.hpp"

namespace ringlab::gpu::ladder {

void launch_06(const Problem& problem, const void* q, const void* k, const void* v, void* out, float* lse,
               void* workspace, cudaStream_t stream) {
  launch_through_accumulator(problem, q, k, v, out, lse, workspace, stream, forward_accumulate);
}

}  // namespace ringlab::gpu::ladder
