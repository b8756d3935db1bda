// 04 — pipelining and swizzling: K/V tiles arrive by cp.async into two shared-memory stages, so
// the copy of tile j+1 overlaps the math on tile j; rows are stored with their 16-byte chunks
// XOR-permuted by (row mod 8) instead of padded, so ldmatrix stays conflict-free with no wasted
// bytes and cp.async writes whole chunks. (The order of gains reported by gau-nernst's
// learn-cuda 07_attention: swizzle first, then the two-stage pipeline.) Otherwise as 03.
#include "gpu/kernels/forward_mma.cuh"  // dev::load_tile_async, the production kernel's loader
#include "gpu/kernels/ladder/ladder.hpp"
#include "gpu/kernels/primitives.cuh"

namespace ringlab::gpu::ladder {

template <int D>
struct Tiles04 {
  static constexpr int kRows = 64, kKeys = 64;
  static constexpr int kSmemBytes = (kRows + 2 * 2 * kKeys) * D * 2;  // Q, then [stage] K and V
};

template <int D>
RINGLAB_KERNEL void RINGLAB_LAUNCH_BOUNDS(128) kernel_04(Args p) {
  using namespace dev;
  using T = __nv_bfloat16;
  constexpr int BQ = Tiles04<D>::kRows, BK = Tiles04<D>::kKeys;
  RINGLAB_DYNAMIC_SMEM(smem_raw);
  T* q_s = reinterpret_cast<T*>(smem_raw);
  T* k_s = q_s + BQ * D;      // [stage]
  T* v_s = k_s + 2 * BK * D;  // [stage]
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int g = lane / 4, t = lane % 4;
  const int q0 = static_cast<int>(blockIdx.x) * BQ;
  const int b = static_cast<int>(blockIdx.y) / p.H, h = static_cast<int>(blockIdx.y) % p.H;
  const int64_t stride = static_cast<int64_t>(p.H) * D;
  const int64_t head = (static_cast<int64_t>(b) * p.S * p.H + h) * D;
  const T* q = static_cast<const T*>(p.q) + head;
  const T* k = static_cast<const T*>(p.k) + head;
  const T* v = static_cast<const T*>(p.v) + head;
  const int end = p.causal ? imin(p.S, q0 + BQ) : p.S;
  const int n_tiles = (end + BK - 1) / BK;
  auto load_kv = [&](int tile, int stage) {
    const int k0 = tile * BK, count = imin(BK, p.S - k0);
    load_tile_async<T, D, BK, 128>(k_s + stage * BK * D, k + k0 * stride, stride, count);
    load_tile_async<T, D, BK, 128>(v_s + stage * BK * D, v + k0 * stride, stride, count);
  };
  load_tile_async<T, D, BQ, 128>(q_s, q + q0 * stride, stride, imin(BQ, p.S - q0));
  load_kv(0, 0);
  cp_async_commit();

  const int row0 = q0 + warp * 16 + g, row1 = row0 + 8;
  float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.f, l1 = 0.f, o[D / 8][4];
  RINGLAB_UNROLL
  for (int nt = 0; nt < D / 8; ++nt) o[nt][0] = o[nt][1] = o[nt][2] = o[nt][3] = 0.f;
  uint32_t qf[D / 16][4];
  for (int tile = 0; tile < n_tiles; ++tile) {
    const int stage = tile % 2;
    if (tile + 1 < n_tiles) load_kv(tile + 1, stage ^ 1);  // the next tile's copy overlaps this math
    cp_async_commit();
    cp_async_wait<1>();
    sync_threads();
    if (tile == 0) {
      RINGLAB_UNROLL
      for (int kc = 0; kc < D / 16; ++kc)
        ldmatrix_x4(qf[kc], q_s + swizzle<D>(warp * 16 + lane % 16, kc * 16 + (lane / 16) * 8));
    }
    const T* ks = k_s + stage * BK * D;
    const T* vs = v_s + stage * BK * D;
    const int k0 = tile * BK;
    float s[BK / 8][4];
    RINGLAB_UNROLL
    for (int nt = 0; nt < BK / 8; ++nt) s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.f;
    RINGLAB_UNROLL
    for (int kc = 0; kc < D / 16; ++kc) {
      RINGLAB_UNROLL
      for (int np = 0; np < BK / 16; ++np) {
        uint32_t kb[4];
        ldmatrix_x4(kb, ks + swizzle<D>(np * 16 + lane % 8 + (lane / 16) * 8, kc * 16 + ((lane / 8) % 2) * 8));
        mma_16816<T>(s[2 * np], qf[kc], kb[0], kb[1]);
        mma_16816<T>(s[2 * np + 1], qf[kc], kb[2], kb[3]);
      }
    }
    const bool mask = k0 + BK > p.S || (p.causal && k0 + BK - 1 > q0);
    float max0 = -INFINITY, max1 = -INFINITY;
    RINGLAB_UNROLL
    for (int nt = 0; nt < BK / 8; ++nt) {
      RINGLAB_UNROLL
      for (int e = 0; e < 2; ++e) {
        const int j = k0 + nt * 8 + 2 * t + e;
        s[nt][e] = mask && (j >= p.S || (p.causal && j > row0)) ? -INFINITY : s[nt][e] * p.scale;
        s[nt][2 + e] = mask && (j >= p.S || (p.causal && j > row1)) ? -INFINITY : s[nt][2 + e] * p.scale;
      }
      max0 = fmaxf(max0, fmaxf(s[nt][0], s[nt][1]));
      max1 = fmaxf(max1, fmaxf(s[nt][2], s[nt][3]));
    }
    max0 = fmaxf(max0, shfl_xor(max0, 1));
    max0 = fmaxf(max0, shfl_xor(max0, 2));
    max1 = fmaxf(max1, shfl_xor(max1, 1));
    max1 = fmaxf(max1, shfl_xor(max1, 2));
    const float new0 = fmaxf(m0, max0), new1 = fmaxf(m1, max1);
    const float shift0 = new0 == -INFINITY ? 0.f : new0, shift1 = new1 == -INFINITY ? 0.f : new1;
    const float alpha0 = fast_exp(m0 - shift0), alpha1 = fast_exp(m1 - shift1);
    m0 = new0, m1 = new1;
    float sum0 = 0.f, sum1 = 0.f;
    RINGLAB_UNROLL
    for (int nt = 0; nt < BK / 8; ++nt) {
      s[nt][0] = fast_exp(s[nt][0] - shift0);
      s[nt][1] = fast_exp(s[nt][1] - shift0);
      s[nt][2] = fast_exp(s[nt][2] - shift1);
      s[nt][3] = fast_exp(s[nt][3] - shift1);
      sum0 += s[nt][0] + s[nt][1];
      sum1 += s[nt][2] + s[nt][3];
    }
    l0 = l0 * alpha0 + sum0;
    l1 = l1 * alpha1 + sum1;
    RINGLAB_UNROLL
    for (int nt = 0; nt < D / 8; ++nt) {
      o[nt][0] *= alpha0, o[nt][1] *= alpha0, o[nt][2] *= alpha1, o[nt][3] *= alpha1;
    }
    RINGLAB_UNROLL
    for (int kc = 0; kc < BK / 16; ++kc) {
      const uint32_t pa[4] = {pack2<T>(s[2 * kc][0], s[2 * kc][1]), pack2<T>(s[2 * kc][2], s[2 * kc][3]),
                              pack2<T>(s[2 * kc + 1][0], s[2 * kc + 1][1]),
                              pack2<T>(s[2 * kc + 1][2], s[2 * kc + 1][3])};
      RINGLAB_UNROLL
      for (int dp = 0; dp < D / 16; ++dp) {
        uint32_t vb[4];
        ldmatrix_x4_trans(vb, vs + swizzle<D>(kc * 16 + lane % 8 + ((lane / 8) % 2) * 8, dp * 16 + (lane / 16) * 8));
        mma_16816<T>(o[2 * dp], pa, vb[0], vb[1]);
        mma_16816<T>(o[2 * dp + 1], pa, vb[2], vb[3]);
      }
    }
    sync_threads();  // this stage is free for the copy issued next iteration
  }
  cp_async_wait<0>();
  l0 += shfl_xor(l0, 1);
  l0 += shfl_xor(l0, 2);
  l1 += shfl_xor(l1, 1);
  l1 += shfl_xor(l1, 2);
  const int rows[2] = {row0, row1};
  const float sums[2] = {l0, l1}, maxes[2] = {m0, m1};
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
template <int D>
void launch_04_d(const Problem& problem, const Args& args, cudaStream_t stream) {
  constexpr int smem = Tiles04<D>::kSmemBytes;
  cudaFuncSetAttribute(kernel_04<D>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  const dim3 grid(static_cast<unsigned>((problem.seq + 63) / 64), static_cast<unsigned>(problem.batch * problem.heads));
  kernel_04<D><<<grid, 128, smem, stream>>>(args);
}

void launch_04(const Problem& problem, const void* q, const void* k, const void* v, float* out, float* lse, void*,
               cudaStream_t stream) {
  const Args args = args_of(problem, q, k, v, out, lse);
  problem.dim == 64 ? launch_04_d<64>(problem, args, stream) : launch_04_d<128>(problem, args, stream);
}
#endif

}  // namespace ringlab::gpu::ladder
