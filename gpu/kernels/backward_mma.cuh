// Tensor-core backward of one attention block (bf16 / fp16 inputs, fp32 accumulation): recompute
// P from the saved LSE, then dV, dK (per key tile, in registers) and dQ (atomically added) —
// FlashAttention-2's backward, with the reference kernel's positions, masks, skipping and GQA.
//
// A block of 8 warps owns 128 key rows of one (batch, query head); each warp owns 16 keys. Query
// tiles stream through shared memory in two stages: Q and dO, and with them, by cp.async too, the
// rows' lse and delta and (masked launches) their positions and document bounds, so that no
// global load waits inside the loop but the tile classification's. Per query tile each warp
// computes, with its 16 keys as the M dimension so that no transpose is needed until dQ:
//     S^T  = K Q^T,   dP^T = V dO^T                      (mma; K, V rows A, Q, dO rows B)
//     P^T  = exp(scale S^T - lse),  dS^T = P^T o (dP^T - delta)   (masked entries 0)
//     dV  += P^T dO,  dK += dS^T Q                       (P^T, dS^T re-packed as A fragments)
//     dS^T -> shared memory, then dQ += dS K for a 16-row share of the (queries x D) tile, read
//     back with ldmatrix.trans, added to global dq with vector atomics (red.global.add.v4.f32:
//     FlashAttention-2 adds dQ atomically too; the order of those adds is not fixed, so dq can
//     differ in the last bit run to run).
// Two barriers per query tile: one after the tile has landed, one after dS^T is complete.
// dK (times scale) and dV are added to global memory once per block, atomically (.v2) because the
// query heads of a GQA group add into the same kv head.
#pragma once

#include "gpu/kernels/kernel_params.hpp"
#include "gpu/kernels/mma_fragments.cuh"
#include "gpu/kernels/primitives.cuh"

namespace ringlab::gpu {

// Tile shapes. 128 keys per block (16 per warp, 8 warps), as FlashAttention-2's backward uses for
// D = 64 and 128: every query tile streamed in (Q, dO, and the dq atomics it costs) serves twice
// the keys of a 64-key block, halving that traffic per FLOP. A warp's registers hold dK and dV for
// its 16 keys x D (D floats per thread) plus S^T and dP^T for 16 keys x kBlockQ queries (kBlockQ
// floats per thread). D = 64 affords 64-query tiles (ptxas: 243 registers, no spill); at D = 128,
// 64-query tiles spill (255 registers and a 16-byte stack frame, CUDA 13), so D = 128 takes 32
// (253 registers, no spill): the largest spill-free shape.
template <int D>
struct BackwardMmaTiles {
  static constexpr int kWarps = 8;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kBlockK = 16 * kWarps;
  static constexpr int kBlockQ = D == 64 ? 64 : 32;
  static constexpr int kDsStride = kBlockQ + 8;  // padded rows of dS^T: conflict-free ldmatrix
  // Per query row and stage: lse, delta (fp32), position, document first and last key (int32).
  static constexpr int kRowWords = 5;
  static constexpr int kSmemBytes =
      (2 * kBlockK * D + 2 * 2 * kBlockQ * D + kBlockK * kDsStride) * 2 + 2 * kRowWords * kBlockQ * 4;
  static int k_tiles(const AttentionParams& a) { return (a.kv_end - a.kv_begin + kBlockK - 1) / kBlockK; }
};

namespace dev {

// c (16 x 8 kTiles) += A B^T over k = D: A's 16 rows and B's 8 kTiles rows are rows of swizzled
// (rows x D) tiles. `a_lane` / `b_lane`: the offset in its tile of this lane's ldmatrix row address
// for k-chunk 0. Chunk kc's is that offset XOR 16 kc (swizzle<D>(row, c + 16 kc) equals
// swizzle<D>(row, c) ^ 16 kc for c < 16: the chunk index and the row's XOR pattern combine by XOR),
// one instruction where a precomputed address per chunk would hold a register across the loop.
template <class T, int D, int kTiles>
RINGLAB_DEVICE void product_bt(float (&c)[kTiles][4], const T* a_tile, int a_lane, const T* b_tile, int b_lane) {
  RINGLAB_UNROLL
  for (int kc = 0; kc < D / 16; ++kc) {
    uint32_t af[4];
    ldmatrix_x4(af, a_tile + (a_lane ^ (kc * 16)));
    RINGLAB_UNROLL
    for (int np = 0; np < kTiles / 2; ++np) {
      uint32_t bf[4];
      ldmatrix_x4(bf, b_tile + (b_lane ^ (kc * 16)) + np * 16 * D);
      mma_16816<T>(c[2 * np], af, bf[0], bf[1]);
      mma_16816<T>(c[2 * np + 1], af, bf[2], bf[3]);
    }
  }
}

}  // namespace dev

template <class T, int D>
RINGLAB_KERNEL void RINGLAB_LAUNCH_BOUNDS(BackwardMmaTiles<D>::kThreads) backward_mma_kernel(BackwardParams p) {
  using namespace dev;
  using Tiles = BackwardMmaTiles<D>;
  constexpr int BQ = Tiles::kBlockQ, BK = Tiles::kBlockK, DS = Tiles::kDsStride, kThreads = Tiles::kThreads;
  constexpr int kQueryTiles = BQ / 8;  // n-tiles of S^T per warp
  constexpr int kOutTiles = D / 8;     // n-tiles of dK, dV per warp
  constexpr int kQGroups = BQ / 16;    // dQ: warps split the (BQ x D) tile into 16-row groups...
  constexpr int kDimsPerWarp = D / (Tiles::kWarps / kQGroups);  // ...and D-slices of this many dims
  static_assert(Tiles::kWarps % kQGroups == 0 && kDimsPerWarp % 16 == 0, "dQ: whole ldmatrix.x4 pairs per warp");
  RINGLAB_DYNAMIC_SMEM(smem_raw);
  T* k_smem = reinterpret_cast<T*>(smem_raw);                           // (BK, D) swizzled
  T* v_smem = k_smem + BK * D;                                          // (BK, D) swizzled
  T* q_smem = v_smem + BK * D;                                          // [stage] (BQ, D) swizzled
  T* do_smem = q_smem + 2 * BQ * D;                                     // [stage] (BQ, D) swizzled
  T* ds_smem = do_smem + 2 * BQ * D;                                    // (BK, DS): dS^T, keys x queries
  float* lse_smem = reinterpret_cast<float*>(ds_smem + BK * DS);        // [stage] BQ
  float* delta_smem = lse_smem + 2 * BQ;                                // [stage] BQ
  int32_t* pos_smem = reinterpret_cast<int32_t*>(delta_smem + 2 * BQ);  // [stage] BQ: q_pos (masked)
  int32_t* doc_first_smem = pos_smem + 2 * BQ;                          // [stage] BQ: q_doc_first (documents)
  int32_t* doc_last_smem = doc_first_smem + 2 * BQ;                     // [stage] BQ: q_doc_last (documents)

  const AttentionParams& a = p.a;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int k0 = a.kv_begin + static_cast<int>(blockIdx.x) * BK;
  const int k_count = imin(BK, a.kv_end - k0);
  // Plain variables, not a structured binding: the lambdas below capture them (C++17 and clang-14
  // cannot capture structured bindings).
  const BlockHead head = block_head(a, D);
  const int b = head.b, h = head.h, hk = head.hk;
  const int64_t q_stride = head.q_stride, kv_stride = head.kv_stride;
  // Row k0 of (b, hk) in k/v and dk/dv: recomputed after the loop instead of held through it (at
  // D = 128 those two registers are the difference between 253 registers and a 16-byte spill).
  auto kv_row0 = [&] { return (static_cast<int64_t>(b) * a.kv_seq + k0) * kv_stride + hk * D; };
  const int64_t q_offset = static_cast<int64_t>(b) * a.q_seq * q_stride + h * D;  // row 0 of (b, h)
  const int64_t lse_offset = (static_cast<int64_t>(b) * a.heads + h) * a.q_seq;   // (b, h, 0)
  const T* q_base = static_cast<const T*>(a.q) + q_offset;
  const T* do_base = static_cast<const T*>(p.dout) + q_offset;

  // The key side of the mask, once per block: the tile's position range and this thread's two keys
  // (tile-local rows of its warp's 16).
  const bool masked = has_mask(a);
  const bool documents = a.q_doc_first != nullptr;
  int k_lo = 0, k_hi = 0;
  if (masked) position_range(a.k_pos, k0, k_count, lane, k_lo, k_hi);
  const int key0 = warp * 16 + g, key1 = key0 + 8;
  const bool key_ok0 = key0 < k_count, key_ok1 = key1 < k_count;
  const int kpos0 = key_ok0 && masked ? a.k_pos[k0 + key0] : 0;
  const int kpos1 = key_ok1 && masked ? a.k_pos[k0 + key1] : 0;

  // The query side of the mask, once per query tile: its rows' key spans, warp-reduced to the tile's
  // kind (the same answer in every warp, so the block agrees without a barrier).
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
  // Everything a query tile needs, by cp.async. Rows past the end are zero-filled, and contribute
  // exactly nothing: Q = dO = 0 there, so dP = 0 and dS = P (0 - delta) = 0 with delta = 0, and
  // dV += P dO adds P * 0; their dq is never written.
  auto load_q_tile = [&](int tile, int stage) {
    const int q0 = a.q_begin + tile * BQ, count = imin(BQ, a.q_end - q0);
    load_tile_async<T, D, BQ, kThreads>(q_smem + stage * BQ * D, q_base + q0 * q_stride, q_stride, count);
    load_tile_async<T, D, BQ, kThreads>(do_smem + stage * BQ * D, do_base + q0 * q_stride, q_stride, count);
    const int words = masked ? (documents ? 5 : 3) : 2;  // the per-row arrays this launch reads
    for (int i = threadIdx.x; i < words * BQ; i += kThreads) {
      const int array = i / BQ, r = i % BQ;
      const bool ok = r < count;
      const int64_t row = q0 + (ok ? r : 0);  // a zero-filled copy still needs a valid address
      const void* from = array == 0   ? static_cast<const void*>(p.lse + lse_offset + row)
                         : array == 1 ? static_cast<const void*>(p.delta + lse_offset + row)
                         : array == 2 ? static_cast<const void*>(a.q_pos + row)
                         : array == 3 ? static_cast<const void*>(a.q_doc_first + row)
                                      : static_cast<const void*>(a.q_doc_last + row);
      // The five arrays lie one after the other, 2 BQ words each (lse_smem ... doc_last_smem).
      cp_async_4(reinterpret_cast<int32_t*>(lse_smem) + (2 * array + stage) * BQ + r, from, ok);
    }
  };

  int kind = kTileFull;
  int tile = next_tile(0, kind);
  if (tile >= n_tiles) return;  // no query sees these keys: nothing to add
  load_tile_async<T, D, BK, kThreads>(k_smem, static_cast<const T*>(a.k) + kv_row0(), kv_stride, k_count);
  load_tile_async<T, D, BK, kThreads>(v_smem, static_cast<const T*>(a.v) + kv_row0(), kv_stride, k_count);
  load_q_tile(tile, 0);
  cp_async_commit();

  float dk[kOutTiles][4], dv[kOutTiles][4];
  RINGLAB_UNROLL
  for (int nt = 0; nt < kOutTiles; ++nt) {
    RINGLAB_UNROLL
    for (int e = 0; e < 4; ++e) dk[nt][e] = dv[nt][e] = 0.f;
  }

  int stage = 0;
  while (tile < n_tiles) {
    int next_kind = kTileFull;
    const int next = next_tile(tile + 1, next_kind);
    // The other stage was last read before the previous tile's barrier 2: free to overwrite.
    if (next < n_tiles) load_q_tile(next, stage ^ 1);
    cp_async_commit();
    cp_async_wait<1>();
    sync_site<1>();  // the tile (and K, V) copied by every thread have landed
    const T* qs = q_smem + stage * BQ * D;
    const T* dos = do_smem + stage * BQ * D;
    const float* lse_s = lse_smem + stage * BQ;
    const float* delta_s = delta_smem + stage * BQ;
    const int q0 = a.q_begin + tile * BQ;

    // S^T = K Q^T and dP^T = V dO^T: 16 keys x BQ queries per warp.
    float s[kQueryTiles][4], dp[kQueryTiles][4];
    RINGLAB_UNROLL
    for (int nt = 0; nt < kQueryTiles; ++nt) {
      RINGLAB_UNROLL
      for (int e = 0; e < 4; ++e) s[nt][e] = dp[nt][e] = 0.f;
    }
    const int kv_lane = swizzle<D>(warp * 16 + lane % 16, (lane / 16) * 8);
    const int qo_lane = swizzle<D>(lane % 8 + (lane / 16) * 8, ((lane / 8) % 2) * 8);
    product_bt<T, D, kQueryTiles>(s, k_smem, kv_lane, qs, qo_lane);
    product_bt<T, D, kQueryTiles>(dp, v_smem, kv_lane, dos, qo_lane);
    // P^T and dS^T in place of S^T and dP^T. Elements e = 0, 1 are key0, e = 2, 3 key1; the query
    // is column nt*8 + 2t + (e & 1) of the tile. A column's lse, delta and (partial tiles) key
    // span are read and computed once, for both of its keys.
    const bool cut = kind == kTilePartial;
    RINGLAB_UNROLL
    for (int nt = 0; nt < kQueryTiles; ++nt) {
      RINGLAB_UNROLL
      for (int j = 0; j < 2; ++j) {
        const int col = nt * 8 + 2 * t + j;
        const float lse_raw = lse_s[col];
        const float lse = lse_raw == -INFINITY ? INFINITY : lse_raw;  // a row that sees no key: P = 0
        const float delta = delta_s[col];
        KeySpan keys;
        if (cut) {
          const int at = stage * BQ + col;
          keys = keys_of(a, pos_smem[at], documents ? doc_first_smem[at] : 0, documents ? doc_last_smem[at] : 0);
        }
        RINGLAB_UNROLL
        for (int e = j; e < 4; e += 2) {
          const bool visible =
              e < 2 ? key_ok0 && (!cut || keys.contains(kpos0)) : key_ok1 && (!cut || keys.contains(kpos1));
          const float prob = visible ? fast_exp(s[nt][e] * a.scale - lse) : 0.f;
          s[nt][e] = prob;
          dp[nt][e] = prob * (dp[nt][e] - delta);
        }
      }
    }
    // dV += P^T dO, dK += dS^T Q: the k dimension is the queries; dO and Q are k-major -> .trans.
    const int qo_trans_lane = swizzle<D>(lane % 8 + ((lane / 8) % 2) * 8, (lane / 16) * 8);
    RINGLAB_UNROLL
    for (int kc = 0; kc < BQ / 16; ++kc) {
      uint32_t pa[4], dsa[4];
      a_fragment<T>(s, kc, pa);
      a_fragment<T>(dp, kc, dsa);
      RINGLAB_UNROLL
      for (int dpair = 0; dpair < D / 16; ++dpair) {
        uint32_t ob[4], qb[4];
        const int at = (qo_trans_lane ^ (dpair * 16)) + kc * 16 * D;
        ldmatrix_x4_trans(ob, dos + at);
        ldmatrix_x4_trans(qb, qs + at);
        mma_16816<T>(dv[2 * dpair], pa, ob[0], ob[1]);
        mma_16816<T>(dv[2 * dpair + 1], pa, ob[2], ob[3]);
        mma_16816<T>(dk[2 * dpair], dsa, qb[0], qb[1]);
        mma_16816<T>(dk[2 * dpair + 1], dsa, qb[2], qb[3]);
      }
    }
    // dS^T to shared memory (keys x queries), one 32-bit pair per store. The previous tile's dQ
    // read dS^T before this tile's barrier 1: free to overwrite.
    RINGLAB_UNROLL
    for (int nt = 0; nt < kQueryTiles; ++nt) {
      const uint32_t lo = pack2<T>(dp[nt][0], dp[nt][1]), hi = pack2<T>(dp[nt][2], dp[nt][3]);
      std::memcpy(static_cast<void*>(ds_smem + key0 * DS + nt * 8 + 2 * t), &lo, sizeof lo);
      std::memcpy(static_cast<void*>(ds_smem + key1 * DS + nt * 8 + 2 * t), &hi, sizeof hi);
    }
    sync_site<2>();  // dS^T is complete: each warp reads other warps' keys
    // dQ = dS K for queries [qm, qm + 16) x dims [d0, d0 + kDimsPerWarp): A = dS (queries x keys)
    // read from dS^T with ldmatrix.trans; B = K (keys x D), k-major -> .trans.
    {
      const int qm = (warp % kQGroups) * 16, d0 = (warp / kQGroups) * kDimsPerWarp;
      float dq[kDimsPerWarp / 8][4];
      RINGLAB_UNROLL
      for (int nt = 0; nt < kDimsPerWarp / 8; ++nt) dq[nt][0] = dq[nt][1] = dq[nt][2] = dq[nt][3] = 0.f;
      const int k_trans_lane = swizzle<D>(lane % 8 + ((lane / 8) % 2) * 8, (lane / 16) * 8);
      RINGLAB_UNROLL
      for (int kc = 0; kc < BK / 16; ++kc) {
        uint32_t dsq[4];
        ldmatrix_x4_trans(dsq, ds_smem + (kc * 16 + lane % 8 + (lane / 16) * 8) * DS + qm + ((lane / 8) % 2) * 8);
        RINGLAB_UNROLL
        for (int dpair = 0; dpair < kDimsPerWarp / 16; ++dpair) {
          uint32_t kb[4];
          ldmatrix_x4_trans(kb, k_smem + (k_trans_lane ^ (d0 + dpair * 16)) + kc * 16 * D);
          mma_16816<T>(dq[2 * dpair], dsq, kb[0], kb[1]);
          mma_16816<T>(dq[2 * dpair + 1], dsq, kb[2], kb[3]);
        }
      }
      // One red.global.add.v4 per n-tile: lanes t and t ^ 1 trade halves so that the even one holds
      // row g's columns 2t .. 2t + 3 and the odd one row g + 8's columns 2t - 2 .. 2t + 1 (16-byte
      // aligned: q_stride and h D are multiples of 64, the columns start at a multiple of 4).
      const bool odd = (t & 1) != 0;
      const int row = qm + g + (odd ? 8 : 0);  // tile-local query row
      const bool row_ok = row < imin(BQ, a.q_end - q0);
      float* dq_row = p.dq + static_cast<int64_t>(q0 + row) * q_stride + q_offset + d0 + 2 * (t & ~1);
      RINGLAB_UNROLL
      for (int nt = 0; nt < kDimsPerWarp / 8; ++nt) {
        const float give0 = odd ? dq[nt][0] : dq[nt][2], give1 = odd ? dq[nt][1] : dq[nt][3];
        const float got0 = shfl_xor(give0, 1), got1 = shfl_xor(give1, 1);
        const float mine0 = odd ? dq[nt][2] : dq[nt][0], mine1 = odd ? dq[nt][3] : dq[nt][1];
        const float sum[4] = {a.scale * (odd ? got0 : mine0), a.scale * (odd ? got1 : mine1),
                              a.scale * (odd ? mine0 : got0), a.scale * (odd ? mine1 : got1)};
        if (row_ok) atomic_add_vector(dq_row + nt * 8, sum);
      }
    }
    stage ^= 1;
    tile = next;
    kind = next_kind;
  }
  cp_async_wait<0>();

  // dK = scale dS^T Q and dV, added once per block, a .v2 atomic per (key, n-tile).
  const int64_t kv_offset = kv_row0();
  RINGLAB_UNROLL
  for (int nt = 0; nt < kOutTiles; ++nt) {
    const int d = nt * 8 + 2 * t;
    if (key_ok0) {
      const int64_t at = kv_offset + key0 * kv_stride + d;
      const float dk_pair[2] = {a.scale * dk[nt][0], a.scale * dk[nt][1]}, dv_pair[2] = {dv[nt][0], dv[nt][1]};
      atomic_add_vector(p.dk + at, dk_pair);
      atomic_add_vector(p.dv + at, dv_pair);
    }
    if (key_ok1) {
      const int64_t at = kv_offset + key1 * kv_stride + d;
      const float dk_pair[2] = {a.scale * dk[nt][2], a.scale * dk[nt][3]}, dv_pair[2] = {dv[nt][2], dv[nt][3]};
      atomic_add_vector(p.dk + at, dk_pair);
      atomic_add_vector(p.dv + at, dv_pair);
    }
  }
}

}  // namespace ringlab::gpu
