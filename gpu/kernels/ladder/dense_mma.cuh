// What the tensor-core rungs (03, 04) do the same way on the ladder's dense problem (positions are
// token indices; Args in ladder.hpp): the scale and mask of a score tile, the epilogue that
// normalises the rows and writes out and lse, and the launch. The tile loop itself is
// gpu/kernels/mma_fragments.cuh, shared with the production kernel; each rung shows only what it
// changes — how K/V tiles reach shared memory.
#pragma once

#include "gpu/kernels/ladder/ladder.hpp"
#include "gpu/kernels/mma_fragments.cuh"

namespace ringlab::gpu::ladder {

// Scales the scores of keys [k0, k0 + kKeys) for rows row0 and row1 (token indices); where the
// tile is ragged (keys past S) or crosses the causal diagonal, masks the keys a row must not see.
template <int kKeys>
RINGLAB_DEVICE void scale_and_mask(float (&s)[kKeys / 8][4], const Args& p, int k0, int q0, int row0, int row1, int t) {
  const bool mask = k0 + kKeys > p.S || (p.causal && k0 + kKeys - 1 > q0);  // ragged, or crosses the diagonal
  RINGLAB_UNROLL
  for (int nt = 0; nt < kKeys / 8; ++nt) {
    RINGLAB_UNROLL
    for (int e = 0; e < 2; ++e) {
      const int j = k0 + nt * 8 + 2 * t + e;
      s[nt][e] = mask && (j >= p.S || (p.causal && j > row0)) ? -INFINITY : s[nt][e] * p.scale;
      s[nt][2 + e] = mask && (j >= p.S || (p.causal && j > row1)) ? -INFINITY : s[nt][2 + e] * p.scale;
    }
  }
}

// out = O / l and lse = m + log l of rows row0 and row1 of (b, h); l is this thread's share of the
// row sums (summed over the quad here).
template <int D>
RINGLAB_DEVICE void write_rows(const Args& p, const float (&o)[D / 8][4], float m0, float m1, float l0, float l1, int b,
                               int h, int row0, int row1, int t) {
  const int64_t stride = static_cast<int64_t>(p.H) * D;
  const int64_t head = (static_cast<int64_t>(b) * p.S * p.H + h) * D;  // (b, 0, h, 0)
  const int rows[2] = {row0, row1};
  const float sums[2] = {dev::quad_sum(l0), dev::quad_sum(l1)}, maxes[2] = {m0, m1};
  for (int r = 0; r < 2; ++r) {
    if (rows[r] >= p.S) continue;
    float* out = p.out + head + rows[r] * stride;
    RINGLAB_UNROLL
    for (int nt = 0; nt < D / 8; ++nt) {
      out[nt * 8 + 2 * t] = o[nt][2 * r] / sums[r];
      out[nt * 8 + 2 * t + 1] = o[nt][2 * r + 1] / sums[r];
    }
    if (t == 0) p.lse[(static_cast<int64_t>(b) * p.H + h) * p.S + rows[r]] = maxes[r] + logf(sums[r]);
  }
}

#ifdef __CUDACC__
// One block of 128 threads per 64 query rows of each (batch, head), `smem` bytes of shared memory.
template <class Kernel>
void launch_rows_of_64(Kernel kernel, int smem, const Problem& problem, const Args& args, cudaStream_t stream) {
  cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  const dim3 grid(static_cast<unsigned>((problem.seq + 63) / 64), static_cast<unsigned>(problem.batch * problem.heads));
  kernel<<<grid, 128, smem, stream>>>(args);
}
#endif

}  // namespace ringlab::gpu::ladder
