// 01 — naive: one thread per query row walks every key in global memory with the online softmax
// (running max m, sum l, output o rescaled by e^{m-m'}), fp32 throughout. The baseline.
#include "gpu/kernels/ladder/ladder.hpp"
#include "gpu/kernels/primitives.cuh"

namespace ringlab::gpu::ladder {

RINGLAB_KERNEL void kernel_01(Args p) {
  const int row = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  const int b = static_cast<int>(blockIdx.y) / p.H, h = static_cast<int>(blockIdx.y) % p.H;
  if (row >= p.S) return;
  const float* q = static_cast<const float*>(p.q) + ((static_cast<int64_t>(b) * p.S + row) * p.H + h) * p.D;
  float o[128];  // D <= 128; indexed by a runtime d, so it lives in local memory: part of "naive"
  for (int d = 0; d < p.D; ++d) o[d] = 0.f;
  float m = -INFINITY, l = 0.f;
  const int last = p.causal ? row : p.S - 1;
  for (int j = 0; j <= last; ++j) {
    const int64_t at = ((static_cast<int64_t>(b) * p.S + j) * p.H + h) * p.D;
    const float* k = static_cast<const float*>(p.k) + at;
    const float* v = static_cast<const float*>(p.v) + at;
    float s = 0.f;
    for (int d = 0; d < p.D; ++d) s += q[d] * k[d];
    s *= p.scale;
    const float m_new = fmaxf(m, s);
    const float alpha = expf(m - m_new), prob = expf(s - m_new);
    l = l * alpha + prob;
    for (int d = 0; d < p.D; ++d) o[d] = o[d] * alpha + prob * v[d];
    m = m_new;
  }
  float* out = p.out + ((static_cast<int64_t>(b) * p.S + row) * p.H + h) * p.D;
  for (int d = 0; d < p.D; ++d) out[d] = o[d] / l;
  p.lse[(static_cast<int64_t>(b) * p.H + h) * p.S + row] = m + logf(l);
}

#ifdef __CUDACC__
void launch_01(const Problem& problem, const void* q, const void* k, const void* v, void* out, float* lse, void*,
               cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>((problem.seq + 127) / 128),
                  static_cast<unsigned>(problem.batch * problem.heads));
  kernel_01<<<grid, 128, 0, stream>>>(args_of(problem, q, k, v, out, lse));
}
#endif

}  // namespace ringlab::gpu::ladder
