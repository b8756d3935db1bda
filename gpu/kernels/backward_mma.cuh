// Tensor-core backward of one attention block (bf16 / fp16 inputs, fp32 accumulation): recompute
// P from the saved LSE, then dV, dK (per key tile, in registers) and dQ (atomically added) —
// FlashAttention-2's backward, with the reference kernel's positions, masks, skipping and GQA.
//
// A block of 4 warps owns 64 key rows of one (batch, query head); each warp owns 16 keys. Query
// tiles (Q, dO, lse, delta, positions) stream through shared memory in two stages. Per query tile
// each warp computes, with its 16 keys as the M dimension so that no transpose is needed until dQ:
//     S^T  = K Q^T,   dP^T = V dO^T                      (mma; K, V rows A, Q, dO rows B)
//     P^T  = exp(scale S^T - lse),  dS^T = P^T o (dP^T - delta)   (masked entries 0)
//     dV  += P^T dO,  dK += dS^T Q                       (P^T, dS^T re-packed as A fragments)
//     dS^T -> shared memory, then dQ += dS K for a 16 x 64 share of the (queries x D) tile, read
//     back with ldmatrix.trans, added to global dq with fp32 atomics (FlashAttention-2 does the
//     same; the order of those adds is not fixed, so dq can differ in the last bit run to run).
// dK (times scale) and dV are added to global memory once per block, atomically because the
// query heads of a GQA group add into the same kv head.
#pragma once

#include "gpu/kernels/forward_mma.cuh"

namespace ringlab::gpu {

template <int D>
struct BackwardMmaTiles {
  static constexpr int kThreads = 128;
  static constexpr int kBlockK = 64;
  static constexpr int kBlockQ = D == 64 ? 64 : 32;  // D = 128: fewer query rows keep registers < 255
  static constexpr int kDsStride = kBlockQ + 8;      // padded rows of dS^T: conflict-free ldmatrix
  static constexpr int kSmemBytes = (2 * kBlockK * D + 2 * 2 * kBlockQ * D + kBlockK * kDsStride) * 2 +
                                    2 * kBlockQ * (2 * 4 + 2 * 4);  // lse, delta (fp32), key spans (int32)
  static int k_tiles(const AttentionParams& a) { return (a.kv_end - a.kv_begin + kBlockK - 1) / kBlockK; }
};

template <class T, int D>
RINGLAB_KERNEL void RINGLAB_LAUNCH_BOUNDS(128) backward_mma_kernel(BackwardParams p) {
  using namespace dev;
  using Tiles = BackwardMmaTiles<D>;
  constexpr int BQ = Tiles::kBlockQ, BK = Tiles::kBlockK, DS = Tiles::kDsStride;
  constexpr int kQueryTiles = BQ / 8;               // n-tiles of S^T per warp
  constexpr int kOutTiles = D / 8;                  // n-tiles of dK, dV per warp
  constexpr int kQGroups = BQ / 16;                 // dQ: warps split the (BQ x D) tile into 16-row groups...
  constexpr int kDimsPerWarp = D / (4 / kQGroups);  // ...and D-slices: 16 x 64 per warp
  RINGLAB_DYNAMIC_SMEM(smem_raw);
  T* k_smem = reinterpret_cast<T*>(smem_raw);                             // (BK, D) swizzled
  T* v_smem = k_smem + BK * D;                                            // (BK, D) swizzled
  T* q_smem = v_smem + BK * D;                                            // [stage] (BQ, D) swizzled
  T* do_smem = q_smem + 2 * BQ * D;                                       // [stage] (BQ, D) swizzled
  T* ds_smem = do_smem + 2 * BQ * D;                                      // (BK, DS): dS^T, keys x queries
  float* lse_smem = reinterpret_cast<float*>(ds_smem + BK * DS);          // [stage] BQ: lse, +inf = no keys
  float* delta_smem = lse_smem + 2 * BQ;                                  // [stage] BQ
  int32_t* first_smem = reinterpret_cast<int32_t*>(delta_smem + 2 * BQ);  // [stage] BQ: query's visible
  int32_t* last_smem = first_smem + 2 * BQ;                               // [stage] BQ  keys [first, last]

  const AttentionParams& a = p.a;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int k0 = a.kv_begin + static_cast<int>(blockIdx.x) * BK;
  const int k_count = imin(BK, a.kv_end - k0);
  const auto [b, h, hk, q_stride, kv_stride] = block_head(a, D);
  const int64_t kv_offset = (static_cast<int64_t>(b) * a.kv_seq + k0) * kv_stride + hk * D;  // row k0 of (b, hk)
  const int64_t q_offset = static_cast<int64_t>(b) * a.q_seq * q_stride + h * D;             // row 0 of (b, h)
  const int64_t lse_offset = (static_cast<int64_t>(b) * a.heads + h) * a.q_seq;              // (b, h, 0)
  const T* q_base = static_cast<const T*>(a.q) + q_offset;
  const T* do_base = static_cast<const T*>(p.dout) + q_offset;

  const bool masked = has_mask(a);
  int k_lo = 0, k_hi = 0;
  if (masked) position_range(a.k_pos, k0, k_count, lane, k_lo, k_hi);
  // This thread's two keys (tile-local rows of its warp's 16).
  const int key0 = warp * 16 + g, key1 = key0 + 8;
  const bool key_ok0 = key0 < k_count, key_ok1 = key1 < k_count;
  const int kpos0 = key_ok0 && masked ? a.k_pos[k0 + key0] : 0;
  const int kpos1 = key_ok1 && masked ? a.k_pos[k0 + key1] : 0;

  const int n_tiles = (a.q_end - a.q_begin + BQ - 1) / BQ;
  auto next_tile = [&](int tile, int& kind) {
    for (; tile < n_tiles; ++tile) {
      const int q0 = a.q_begin + tile * BQ;
      const TileSpans q_spans = masked ? tile_spans(a, q0, imin(BQ, a.q_end - q0), lane) : TileSpans{};
      kind = classify_tile(masked, a.skip_masked_tiles, q_spans, k_lo, k_hi);
      if (kind != kTileSkip) break;
    }
    return tile;
  };
  auto load_q_tile = [&](int tile, int stage) {
    const int q0 = a.q_begin + tile * BQ, count = imin(BQ, a.q_end - q0);
    load_tile_async<T, D, BQ, 128>(q_smem + stage * BQ * D, q_base + q0 * q_stride, q_stride, count);
    load_tile_async<T, D, BQ, 128>(do_smem + stage * BQ * D, do_base + q0 * q_stride, q_stride, count);
    for (int r = threadIdx.x; r < BQ; r += 128) {
      const bool ok = r < count;
      const float lse = ok ? p.lse[lse_offset + q0 + r] : INFINITY;
      lse_smem[stage * BQ + r] = lse == -INFINITY ? INFINITY : lse;  // P = exp(s - inf) = 0
      delta_smem[stage * BQ + r] = ok ? p.delta[lse_offset + q0 + r] : 0.f;
      const KeySpan keys = ok && masked ? row_keys(a, q0 + r) : KeySpan{};
      first_smem[stage * BQ + r] = keys.first;
      last_smem[stage * BQ + r] = keys.last;
    }
  };

  int kind = kTileFull;
  int tile = next_tile(0, kind);
  if (tile >= n_tiles) return;  // no query sees these keys: nothing to add
  load_tile_async<T, D, BK, 128>(k_smem, static_cast<const T*>(a.k) + kv_offset, kv_stride, k_count);
  load_tile_async<T, D, BK, 128>(v_smem, static_cast<const T*>(a.v) + kv_offset, kv_stride, k_count);
  load_q_tile(tile, 0);
  cp_async_commit();

  float dk[kOutTiles][4], dv[kOutTiles][4];
  RINGLAB_UNROLL
  for (int nt = 0; nt < kOutTiles; ++nt) RINGLAB_UNROLL
  for (int e = 0; e < 4; ++e) dk[nt][e] = dv[nt][e] = 0.f;

  int stage = 0;
  while (tile < n_tiles) {
    int next_kind = kTileFull;
    const int next = next_tile(tile + 1, next_kind);
    if (next < n_tiles) load_q_tile(next, stage ^ 1);
    cp_async_commit();
    cp_async_wait<1>();
    sync_site<1>();  // the tile (and K, V) copied by every warp have landed
    const T* qs = q_smem + stage * BQ * D;
    const T* dos = do_smem + stage * BQ * D;
    const float* lse_s = lse_smem + stage * BQ;
    const float* delta_s = delta_smem + stage * BQ;
    const int32_t* first_s = first_smem + stage * BQ;
    const int32_t* last_s = last_smem + stage * BQ;
    const int q0 = a.q_begin + tile * BQ;

    // S^T = K Q^T and dP^T = V dO^T: 16 keys x BQ queries per warp.
    float s[kQueryTiles][4], dp[kQueryTiles][4];
    RINGLAB_UNROLL
    for (int nt = 0; nt < kQueryTiles; ++nt) RINGLAB_UNROLL
    for (int e = 0; e < 4; ++e) s[nt][e] = dp[nt][e] = 0.f;
    RINGLAB_UNROLL
    for (int kc = 0; kc < D / 16; ++kc) {
      uint32_t ka[4], va[4];
      ldmatrix_x4(ka, k_smem + swizzle<D>(warp * 16 + lane % 16, kc * 16 + (lane / 16) * 8));
      ldmatrix_x4(va, v_smem + swizzle<D>(warp * 16 + lane % 16, kc * 16 + (lane / 16) * 8));
      RINGLAB_UNROLL
      for (int np = 0; np < kQueryTiles / 2; ++np) {
        uint32_t qb[4], ob[4];
        const int row = np * 16 + lane % 8 + (lane / 16) * 8, col = kc * 16 + ((lane / 8) % 2) * 8;
        ldmatrix_x4(qb, qs + swizzle<D>(row, col));
        ldmatrix_x4(ob, dos + swizzle<D>(row, col));
        mma_16816<T>(s[2 * np], ka, qb[0], qb[1]);
        mma_16816<T>(s[2 * np + 1], ka, qb[2], qb[3]);
        mma_16816<T>(dp[2 * np], va, ob[0], ob[1]);
        mma_16816<T>(dp[2 * np + 1], va, ob[2], ob[3]);
      }
    }
    // P^T and dS^T in place of S^T and dP^T. Elements e = 0, 1 are key0, e = 2, 3 key1; the
    // query is column nt*8 + 2t + (e & 1) of the tile.
    const bool cut = kind == kTilePartial;
    RINGLAB_UNROLL
    for (int nt = 0; nt < kQueryTiles; ++nt) {
      RINGLAB_UNROLL
      for (int e = 0; e < 4; ++e) {
        const int col = nt * 8 + 2 * t + (e & 1);
        const bool key_ok = e < 2 ? key_ok0 : key_ok1;
        const int kpos = e < 2 ? kpos0 : kpos1;
        const bool visible = key_ok && (!cut || (first_s[col] <= kpos && kpos <= last_s[col]));
        const float prob = visible ? fast_exp(s[nt][e] * a.scale - lse_s[col]) : 0.f;
        s[nt][e] = prob;
        dp[nt][e] = prob * (dp[nt][e] - delta_s[col]);
      }
    }
    // dV += P^T dO, dK += dS^T Q: the k dimension is the queries; dO and Q are k-major -> .trans.
    RINGLAB_UNROLL
    for (int kc = 0; kc < BQ / 16; ++kc) {
      uint32_t pa[4], dsa[4];
      a_fragment<T>(s, kc, pa);
      a_fragment<T>(dp, kc, dsa);
      RINGLAB_UNROLL
      for (int dpair = 0; dpair < D / 16; ++dpair) {
        uint32_t ob[4], qb[4];
        const int row = kc * 16 + lane % 8 + ((lane / 8) % 2) * 8, col = dpair * 16 + (lane / 16) * 8;
        ldmatrix_x4_trans(ob, dos + swizzle<D>(row, col));
        ldmatrix_x4_trans(qb, qs + swizzle<D>(row, col));
        mma_16816<T>(dv[2 * dpair], pa, ob[0], ob[1]);
        mma_16816<T>(dv[2 * dpair + 1], pa, ob[2], ob[3]);
        mma_16816<T>(dk[2 * dpair], dsa, qb[0], qb[1]);
        mma_16816<T>(dk[2 * dpair + 1], dsa, qb[2], qb[3]);
      }
    }
    // dS^T to shared memory (keys x queries), one 32-bit pair per store.
    RINGLAB_UNROLL
    for (int nt = 0; nt < kQueryTiles; ++nt) {
      const uint32_t lo = pack2<T>(dp[nt][0], dp[nt][1]), hi = pack2<T>(dp[nt][2], dp[nt][3]);
      std::memcpy(static_cast<void*>(ds_smem + key0 * DS + nt * 8 + 2 * t), &lo, sizeof lo);
      std::memcpy(static_cast<void*>(ds_smem + key1 * DS + nt * 8 + 2 * t), &hi, sizeof hi);
    }
    sync_site<2>();  // dS^T is complete: each warp reads other warps' keys
    // dQ = dS K for queries [qm, qm + 16) x dims [d0, d0 + 64): A = dS (queries x keys) read from
    // dS^T with ldmatrix.trans; B = K (keys x D), k-major -> .trans.
    {
      const int qm = (warp % kQGroups) * 16, d0 = (warp / kQGroups) * kDimsPerWarp;
      float dq[kDimsPerWarp / 8][4];
      RINGLAB_UNROLL
      for (int nt = 0; nt < kDimsPerWarp / 8; ++nt) dq[nt][0] = dq[nt][1] = dq[nt][2] = dq[nt][3] = 0.f;
      RINGLAB_UNROLL
      for (int kc = 0; kc < BK / 16; ++kc) {
        uint32_t dsq[4];
        ldmatrix_x4_trans(dsq, ds_smem + (kc * 16 + lane % 8 + (lane / 16) * 8) * DS + qm + ((lane / 8) % 2) * 8);
        RINGLAB_UNROLL
        for (int dpair = 0; dpair < kDimsPerWarp / 16; ++dpair) {
          uint32_t kb[4];
          ldmatrix_x4_trans(
              kb, k_smem + swizzle<D>(kc * 16 + lane % 8 + ((lane / 8) % 2) * 8, d0 + dpair * 16 + (lane / 16) * 8));
          mma_16816<T>(dq[2 * dpair], dsq, kb[0], kb[1]);
          mma_16816<T>(dq[2 * dpair + 1], dsq, kb[2], kb[3]);
        }
      }
      const int qa = qm + g, qb = qa + 8;  // tile-local query rows
      const int q_count = imin(BQ, a.q_end - q0);
      RINGLAB_UNROLL
      for (int nt = 0; nt < kDimsPerWarp / 8; ++nt) {
        const int d = d0 + nt * 8 + 2 * t;
        if (qa < q_count) {
          float* row = p.dq + static_cast<int64_t>(q0 + qa) * q_stride + q_offset + d;
          atomic_add(row, a.scale * dq[nt][0]);
          atomic_add(row + 1, a.scale * dq[nt][1]);
        }
        if (qb < q_count) {
          float* row = p.dq + static_cast<int64_t>(q0 + qb) * q_stride + q_offset + d;
          atomic_add(row, a.scale * dq[nt][2]);
          atomic_add(row + 1, a.scale * dq[nt][3]);
        }
      }
    }
    // Not needed (the emulated tests delete it harmlessly): the next prefetch writes this stage
    // after barrier 2, which every read of the stage precedes, and the next dS^T store comes after
    // the next barrier 1, which every read of dS^T precedes. Kept as a margin; it costs one
    // barrier per query tile.
    sync_site<3>();
    stage ^= 1;
    tile = next;
    kind = next_kind;
  }
  cp_async_wait<0>();

  // dK = scale dS^T Q and dV, added once per block.
  RINGLAB_UNROLL
  for (int nt = 0; nt < kOutTiles; ++nt) {
    const int d = nt * 8 + 2 * t;
    if (key_ok0) {
      const int64_t at = kv_offset + key0 * kv_stride + d;
      atomic_add(p.dk + at, a.scale * dk[nt][0]);
      atomic_add(p.dk + at + 1, a.scale * dk[nt][1]);
      atomic_add(p.dv + at, dv[nt][0]);
      atomic_add(p.dv + at + 1, dv[nt][1]);
    }
    if (key_ok1) {
      const int64_t at = kv_offset + key1 * kv_stride + d;
      atomic_add(p.dk + at, a.scale * dk[nt][2]);
      atomic_add(p.dk + at + 1, a.scale * dk[nt][3]);
      atomic_add(p.dv + at, dv[nt][2]);
      atomic_add(p.dv + at + 1, dv[nt][3]);
    }
  }
}

}  // namespace ringlab::gpu
