// Ladder rung 05 (05_masks_accumulators.cu): the executors' tensor-core forward until rung 06's
// (gpu/kernels/forward_fa2.cuh) replaced it; kept as it was, its tests and resource checks with it.
//
// Tensor-core forward of one attention block (bf16 / fp16 inputs, fp32 accumulation), merged into
// the device accumulators (m, l, o) with the online-softmax rescale — FlashAttention-2's forward
// with the reference kernel's position lists, mask kinds, tile skipping and GQA.
//
// A block of 4 warps owns 64 query rows of one (batch, head); each warp owns 16 of them. Key/value
// tiles of 64 rows stream through shared memory in two stages (cp.async double buffering, XOR
// swizzled), and each tile is:
//     S = Q K^T           mma.sync m16n8k16, Q fragments in registers, K fragments by ldmatrix
//     mask                only for tiles the mask cuts (or the ragged last tile)
//     m' = max(m, rowmax S), P = exp(scale S - m'), l = l e^{m-m'} + rowsum P, O = O e^{m-m'}
//     O += P V            P re-packed from the S accumulators as A fragments, V by ldmatrix.trans
// Tiles no query of the tile may see (the causal future, other documents, outside the window) are
// skipped unless skip_masked_tiles is off, decided from the key tile's min/max position against
// the bounds of the query rows' visible-key intervals (classify_tile, primitives.cuh).
#pragma once

#include "gpu/kernels/kernel_params.hpp"
#include "gpu/kernels/mma_fragments.cuh"
#include "gpu/kernels/primitives.cuh"

namespace ringlab::gpu {

template <int D>
struct ForwardMmaTiles {
  static constexpr int kThreads = 128;
  static constexpr int kBlockQ = 64;
  static constexpr int kBlockK = 64;
  static constexpr int kStages = 2;
  // Q tile, then K and V tiles per stage; 16-bit elements.
  static constexpr int kSmemBytes = (kBlockQ * D + kStages * 2 * kBlockK * D) * 2;
  static int q_tiles(const AttentionParams& a) { return (a.q_end - a.q_begin + kBlockQ - 1) / kBlockQ; }
};

template <class T, int D>
RINGLAB_KERNEL void RINGLAB_LAUNCH_BOUNDS(128) forward_mma_kernel(ForwardParams p) {
  using namespace dev;
  using Tiles = ForwardMmaTiles<D>;
  constexpr int BQ = Tiles::kBlockQ, BK = Tiles::kBlockK;
  constexpr int kScoreTiles = BK / 8;  // n-tiles of S per warp (8 keys each)
  constexpr int kOutTiles = D / 8;     // n-tiles of O per warp
  constexpr int kDimChunks = D / 16;   // k-chunks of Q K^T
  RINGLAB_DYNAMIC_SMEM(smem_raw);
  T* q_smem = reinterpret_cast<T*>(smem_raw);  // (BQ, D) swizzled
  T* k_smem = q_smem + BQ * D;                 // [stage] (BK, D) swizzled
  T* v_smem = k_smem + 2 * BK * D;             // [stage] (BK, D) swizzled

  const AttentionParams& a = p.a;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int q0 = a.q_begin + static_cast<int>(blockIdx.x) * BQ;
  const int q_count = imin(BQ, a.q_end - q0);
  const auto [b, h, hk, q_stride, kv_stride] = block_head(a, D);
  // q: (B, Sq, H, D) -> rows q0.. of (b, h); k, v: (B, Sk, HKV, D) -> row 0 of (b, hk)
  const T* q_base = static_cast<const T*>(a.q) + ((static_cast<int64_t>(b) * a.q_seq + q0) * a.heads + h) * D;
  const T* k_base = static_cast<const T*>(a.k) + static_cast<int64_t>(b) * a.kv_seq * kv_stride + hk * D;
  const T* v_base = static_cast<const T*>(a.v) + static_cast<int64_t>(b) * a.kv_seq * kv_stride + hk * D;

  const bool masked = has_mask(a);
  const TileSpans q_spans = masked ? tile_spans(a, q0, q_count, lane) : TileSpans{};

  // This thread's two query rows (tile-local), their positions and accumulator rows.
  const int row0 = warp * 16 + g, row1 = row0 + 8;
  const bool valid0 = row0 < q_count, valid1 = row1 < q_count;
  const KeySpan keys0 = valid0 && masked ? row_keys(a, q0 + row0) : KeySpan{};
  const KeySpan keys1 = valid1 && masked ? row_keys(a, q0 + row1) : KeySpan{};
  const int64_t acc0 = (static_cast<int64_t>(b) * a.heads + h) * a.q_seq + q0 + row0, acc1 = acc0 + 8;

  // Key tiles over [kv_begin, kv_end); the next one that is not skipped, with its kind.
  const int n_tiles = (a.kv_end - a.kv_begin + BK - 1) / BK;
  auto next_tile = [&](int tile, int& kind) {
    for (; tile < n_tiles; ++tile) {
      const int k0 = a.kv_begin + tile * BK;
      int k_lo = 0, k_hi = 0;
      if (masked) position_range(a.k_pos, k0, imin(BK, a.kv_end - k0), lane, k_lo, k_hi);
      kind = classify_tile(masked, a.skip_masked_tiles, q_spans, k_lo, k_hi);
      if (kind != kTileSkip) break;
    }
    return tile;
  };
  auto load_kv = [&](int tile, int stage) {
    const int k0 = a.kv_begin + tile * BK, count = imin(BK, a.kv_end - k0);
    load_tile_async<T, D, BK, 128>(k_smem + stage * BK * D, k_base + k0 * kv_stride, kv_stride, count);
    load_tile_async<T, D, BK, 128>(v_smem + stage * BK * D, v_base + k0 * kv_stride, kv_stride, count);
  };

  int kind = kTileFull;
  int tile = next_tile(0, kind);
  if (tile >= n_tiles) return;  // every key tile is masked for these queries: the state is unchanged
  load_tile_async<T, D, BQ, 128>(q_smem, q_base, q_stride, q_count);
  load_kv(tile, 0);
  cp_async_commit();

  // The running state of rows row0 / row1: m, l (a partial sum over this thread's columns; the
  // accumulator's l is carried by the t == 0 thread) and O as C fragments.
  float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.f, l1 = 0.f;
  float o[kOutTiles][4];
  RINGLAB_UNROLL
  for (int nt = 0; nt < kOutTiles; ++nt) o[nt][0] = o[nt][1] = o[nt][2] = o[nt][3] = 0.f;
  if (valid0) {
    m0 = p.acc_max[acc0];
    l0 = t == 0 ? p.acc_sum[acc0] : 0.f;
    RINGLAB_UNROLL
    for (int nt = 0; nt < kOutTiles; ++nt) {
      o[nt][0] = p.acc_out[acc0 * D + nt * 8 + 2 * t];
      o[nt][1] = p.acc_out[acc0 * D + nt * 8 + 2 * t + 1];
    }
  }
  if (valid1) {
    m1 = p.acc_max[acc1];
    l1 = t == 0 ? p.acc_sum[acc1] : 0.f;
    RINGLAB_UNROLL
    for (int nt = 0; nt < kOutTiles; ++nt) {
      o[nt][2] = p.acc_out[acc1 * D + nt * 8 + 2 * t];
      o[nt][3] = p.acc_out[acc1 * D + nt * 8 + 2 * t + 1];
    }
  }

  uint32_t qf[kDimChunks][4];  // this warp's 16 query rows as A fragments, loaded once
  int stage = 0;
  bool q_in_registers = false;
  while (tile < n_tiles) {
    int next_kind = kTileFull;
    const int next = next_tile(tile + 1, next_kind);
    if (next < n_tiles) load_kv(next, stage ^ 1);  // prefetch while this tile computes
    cp_async_commit();
    cp_async_wait<1>();  // everything but the prefetch has landed
    sync_site<1>();      // ...for every thread: the tile (and Q) were copied by all four warps
    if (!q_in_registers) {
      RINGLAB_UNROLL
      for (int kc = 0; kc < kDimChunks; ++kc)
        ldmatrix_x4(qf[kc], q_smem + swizzle<D>(warp * 16 + lane % 16, kc * 16 + (lane / 16) * 8));
      q_in_registers = true;
    }
    const T* ks = k_smem + stage * BK * D;
    const T* vs = v_smem + stage * BK * D;
    const int k0 = a.kv_begin + tile * BK, k_count = imin(BK, a.kv_end - k0);

    // S = Q K^T: 16 rows x 64 keys per warp.
    float s[kScoreTiles][4];
    scores_qk<T, D, BK>(s, qf, ks, SwizzledRows<D>{}, lane);
    // Scale; mask where the mask cuts the tile or the tile is ragged.
    const bool cut = kind == kTilePartial;
    const bool mask = cut || k_count < BK;
    RINGLAB_UNROLL
    for (int nt = 0; nt < kScoreTiles; ++nt) {
      RINGLAB_UNROLL
      for (int e = 0; e < 2; ++e) {
        s[nt][e] *= a.scale;
        s[nt][2 + e] *= a.scale;
        if (mask) {
          const int j = nt * 8 + 2 * t + e;
          const bool key_ok = j < k_count;
          const int kpos = key_ok && cut ? a.k_pos[k0 + j] : 0;
          if (!key_ok || (cut && !keys0.contains(kpos))) s[nt][e] = -INFINITY;
          if (!key_ok || (cut && !keys1.contains(kpos))) s[nt][2 + e] = -INFINITY;
        }
      }
    }
    online_softmax(s, o, m0, m1, l0, l1);
    accumulate_pv<T, D, BK>(s, o, vs, SwizzledRows<D>{}, lane);
    sync_site<2>();  // every warp is done with this stage before the next prefetch overwrites it
    stage ^= 1;
    tile = next;
    kind = next_kind;
  }
  cp_async_wait<0>();

  // Write the state back: l summed over the quad, O as float pairs.
  l0 = quad_sum(l0);
  l1 = quad_sum(l1);
  if (valid0) {
    if (t == 0) {
      p.acc_max[acc0] = m0;
      p.acc_sum[acc0] = l0;
    }
    RINGLAB_UNROLL
    for (int nt = 0; nt < kOutTiles; ++nt) {
      p.acc_out[acc0 * D + nt * 8 + 2 * t] = o[nt][0];
      p.acc_out[acc0 * D + nt * 8 + 2 * t + 1] = o[nt][1];
    }
  }
  if (valid1) {
    if (t == 0) {
      p.acc_max[acc1] = m1;
      p.acc_sum[acc1] = l1;
    }
    RINGLAB_UNROLL
    for (int nt = 0; nt < kOutTiles; ++nt) {
      p.acc_out[acc1 * D + nt * 8 + 2 * t] = o[nt][2];
      p.acc_out[acc1 * D + nt * 8 + 2 * t + 1] = o[nt][3];
    }
  }
}

}  // namespace ringlab::gpu
