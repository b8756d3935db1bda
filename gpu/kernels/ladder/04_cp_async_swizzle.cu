// 04 — pipelining and swizzling: K/V tiles arrive by cp.async into two shared-memory stages, so
// the copy of tile j+1 overlaps the math on tile j; rows are stored with their 16-byte chunks
// XOR-permuted by (row mod 8) instead of padded, so ldmatrix stays conflict-free with no wasted
// bytes and cp.async writes whole chunks. (The order of gains reported by gau-nernst's
// learn-cuda 07_attention: swizzle first, then the two-stage pipeline.) Otherwise as 03.
#include "gpu/kernels/ladder/dense_mma.cuh"
#include "gpu/kernels/primitives.cuh"  // dev::load_tile_async, the production kernels' loader

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
    scores_qk<T, D, BK>(s, qf, ks, SwizzledRows<D>{}, lane);
    scale_and_mask<BK>(s, p, k0, q0, row0, row1, t);
    online_softmax(s, o, m0, m1, l0, l1);
    accumulate_pv<T, D, BK>(s, o, vs, SwizzledRows<D>{}, lane);
    sync_threads();  // this stage is free for the copy issued next iteration
  }
  cp_async_wait<0>();
  write_rows<D>(p, o, m0, m1, l0, l1, b, h, row0, row1, t);
}

#ifdef __CUDACC__
void launch_04(const Problem& problem, const void* q, const void* k, const void* v, void* out, float* lse, void*,
               cudaStream_t stream) {
  const Args args = args_of(problem, q, k, v, out, lse);
  problem.dim == 64 ? launch_rows_of_64(kernel_04<64>, Tiles04<64>::kSmemBytes, problem, args, stream)
                    : launch_rows_of_64(kernel_04<128>, Tiles04<128>::kSmemBytes, problem, args, stream);
}
#endif

}  // namespace ringlab::gpu::ladder
