// 02 — tiled: a block of 64 query rows (one thread each) loads each 32-key K/V tile into shared
// memory once and every row reads it from there: 64x less global traffic for K and V. Causal
// blocks stop at the diagonal. Still fp32 on the CUDA cores.
#include "gpu/kernels/ladder/ladder.hpp"
#include "gpu/kernels/primitives.cuh"

namespace ringlab::gpu::ladder {

constexpr int kRows02 = 64, kKeys02 = 32;

RINGLAB_KERNEL void kernel_02(Args p) {
  RINGLAB_DYNAMIC_SMEM(smem_raw);
  float* k_tile = reinterpret_cast<float*>(smem_raw);  // (kKeys02, D)
  float* v_tile = k_tile + kKeys02 * p.D;              // (kKeys02, D)
  const int first = static_cast<int>(blockIdx.x) * kRows02, row = first + static_cast<int>(threadIdx.x);
  const int b = static_cast<int>(blockIdx.y) / p.H, h = static_cast<int>(blockIdx.y) % p.H;
  const bool valid = row < p.S;
  const int64_t head = (static_cast<int64_t>(b) * p.S * p.H + h) * p.D;  // (b, 0, h, 0)
  const int64_t stride = static_cast<int64_t>(p.H) * p.D;
  float q[128], o[128];
  for (int d = 0; d < p.D; ++d) {
    q[d] = valid ? static_cast<const float*>(p.q)[head + row * stride + d] : 0.f;
    o[d] = 0.f;
  }
  float m = -INFINITY, l = 0.f;
  const int last_row = dev::imin(first + kRows02, p.S) - 1;
  const int end = p.causal ? last_row + 1 : p.S;  // keys any row of the block can see
  for (int k0 = 0; k0 < end; k0 += kKeys02) {
    dev::sync_threads();  // every row is done with the previous tile
    for (int i = static_cast<int>(threadIdx.x); i < kKeys02 * p.D; i += kRows02) {
      const int j = k0 + i / p.D, d = i % p.D;
      k_tile[i] = j < p.S ? static_cast<const float*>(p.k)[head + j * stride + d] : 0.f;
      v_tile[i] = j < p.S ? static_cast<const float*>(p.v)[head + j * stride + d] : 0.f;
    }
    dev::sync_threads();
    if (!valid) continue;
    const int count = dev::imin(kKeys02, (p.causal ? row + 1 : p.S) - k0);
    for (int jj = 0; jj < count; ++jj) {
      float s = 0.f;
      for (int d = 0; d < p.D; ++d) s += q[d] * k_tile[jj * p.D + d];
      s *= p.scale;
      const float m_new = fmaxf(m, s);
      const float alpha = expf(m - m_new), prob = expf(s - m_new);
      l = l * alpha + prob;
      for (int d = 0; d < p.D; ++d) o[d] = o[d] * alpha + prob * v_tile[jj * p.D + d];
      m = m_new;
    }
  }
  if (!valid) return;
  float* out = p.out + head + row * stride;
  for (int d = 0; d < p.D; ++d) out[d] = o[d] / l;
  p.lse[(static_cast<int64_t>(b) * p.H + h) * p.S + row] = m + logf(l);
}

#ifdef __CUDACC__
void launch_02(const Problem& problem, const void* q, const void* k, const void* v, void* out, float* lse, void*,
               cudaStream_t stream) {
  const int smem = 2 * kKeys02 * problem.dim * static_cast<int>(sizeof(float));
  const dim3 grid(static_cast<unsigned>((problem.seq + kRows02 - 1) / kRows02),
                  static_cast<unsigned>(problem.batch * problem.heads));
  kernel_02<<<grid, kRows02, smem, stream>>>(args_of(problem, q, k, v, out, lse));
}
#endif

}  // namespace ringlab::gpu::ladder
