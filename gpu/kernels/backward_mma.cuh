// Tensor-core backward of one attention block (bf16 / fp16 inputs, fp32 accumulation): recompute
// P from the saved LSE, then dV, dK (per key block, in registers) and dQ (atomically added) —
// FlashAttention-2's backward with its warp layouts, and the reference kernel's positions, masks,
// skipping and GQA.
//
// A block of 8 warps owns 128 key rows of one (batch, query head) and walks the query tiles. Query
// tiles stream through shared memory in two stages: Q and dO, and with them, by cp.async too, the
// rows' lse and delta and (masked launches) their positions and document bounds, so that no
// global load waits inside the loop but the tile classification's: one round trip per query tile
// (its rows' loads all issued before the first is used), and in the prologue, where a causal block
// passes the tiles before its keys' first query, one per kScanGroup tiles. Each query tile takes three
// steps, each splitting the block's work among the warps its own way; keys are the M dimension of
// phases 1 and 2, so that nothing is transposed until dQ:
//   phase 1  S^T = K Q^T, dP^T = V dO^T        warp (kg, qh) = (warp % 4, warp / 4): keys
//            P^T = 2^(c S^T - c lse)           [32 kg, 32 kg + 32) x the queries of half qh of the
//            dS^T = P^T o (dP^T - delta)       tile (A: K, V rows; B: Q, dO rows); masked entries
//                                              0, dS from the unrounded P; then P^T and dS^T go
//                                              to shared memory, rounded to T (pack2, cvt.rn),
//                                              four 8x8 tiles per stmatrix.x4
//   dQ       dQ = dS K                         warp: 32 queries x a slice of D (A: dS, from dS^T by
//                                              ldmatrix.trans; B: K by ldmatrix.trans), added to
//                                              global dq with vector atomics
//   phase 2  dV += P^T dO, dK += dS^T Q        warp (kg, dh) = (warp % 4, warp / 4): the same 32
//                                              keys x the dims of half dh (A: P^T, dS^T by
//                                              ldmatrix; B: dO, Q, k-major, by ldmatrix.trans)
// (c = scale log2(e): one FFMA and ex2 per entry, lse taken to log2 units once per column; a
// partial tile and the others run separate copies of that loop, chosen once per tile.)
// (red.global.add.v4.f32: FlashAttention-2 adds dQ atomically too; the order of those adds is not
// fixed, so dq can differ in the last bit run to run). A warp's key group is the same in phases 1
// and 2, so a thread accumulates dK and dV for the four keys it computed P and dS for (and adds
// them to dk / dv at the end with the same key validity). Owning 32 rows of M rather than 16 is
// what brings the shared-memory traffic per mma to FlashAttention-2's: a Q or dO fragment of
// phase 1 and a dO or Q fragment of phase 2 feed 4 mma each (not 2), every P^T / dS^T fragment 8
// (D = 128) or 4 (D = 64), every dS or K fragment of dQ 4 (static ldmatrix/mma 0.45, against
// 0.60-0.65 with 16 keys per warp). dQ runs before phase 2 and the next tile's copy is issued
// between them only because that order is the one ptxas fits in 255 registers at D = 128 without
// a spill in the loop (the others tried spill 4-40 bytes; tests/gpu/kernel_static.py sass shows
// any local memory and where); the copy still overlaps dQ and phase 2.
//
// Barriers, two per query tile:
//   sync_site<1>  the tile (and, the first time, K and V) copied by every thread has landed; and
//                 every warp has finished the previous tile: its dQ and phase 2 reads of P^T and
//                 dS^T, which this tile's phase 1 overwrites, and of the other stage's Q, dO and
//                 row data, which this tile's cp.async of the next one (after barrier 2)
//                 overwrites.
//   sync_site<2>  P^T and dS^T are complete: dQ reads every key's rows, phase 2 the rows the warp
//                 of the other query half wrote.
// dK (times scale) and dV are added to global memory once per block, atomically (.v2) because the
// query heads of a GQA group add into the same kv head; or stored, where the launch is their only
// writer (BackwardParams::store_dkv, H = HKV: FlashAttention-2 writes them once).
#pragma once

#include "gpu/kernels/kernel_params.hpp"
#include "gpu/kernels/mma_fragments.cuh"
#include "gpu/kernels/primitives.cuh"

namespace ringlab::gpu {

// Tile shapes: FlashAttention-2's for D = 64 and 128 (128 keys, 8 warps; 4 key groups of 32). A
// warp's registers hold dK and dV for 32 keys x D/2 dims through the loop (D/2 floats each per
// thread) and S^T, dP^T for 32 keys x kBlockQ/2 queries through phase 1 (kBlockQ/2 each): at
// D = 128 with 64-query tiles (FlashAttention-2's hdim-128 backward tile) 128 + 64 floats, at
// D = 64 with 128-query tiles 64 + 128. P^T and dS^T live in shared memory as (keys x queries)
// tiles of T, swizzled like Q (swizzle<kBlockQ>: kBlockQ is 64 or 128), so that both the fragment
// stores and the ldmatrix reads of phase 2 and dQ are free of bank conflicts.
template <int D>
struct BackwardMmaTiles {
  static constexpr int kWarps = 8;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kKeyGroups = 4;                    // phases 1 and 2: warp % 4 owns 32 keys
  static constexpr int kBlockK = 32 * kKeyGroups;         // 128
  static constexpr int kBlockQ = D == 64 ? 128 : 64;      // queries per tile
  static constexpr int kDqGroups = kBlockQ / 32;          // dQ: 32-query groups (2 or 4)...
  static constexpr int kDqDims = D * kDqGroups / kWarps;  // ...times D-slices of this many dims (32)
  // Per query row and stage: lse, delta (fp32), position, document first and last key (int32).
  static constexpr int kRowWords = 5;
  // Query tiles the prologue classifies per round trip, looking for the block's first: 8 at D = 64;
  // at D = 128 any group made ptxas spill (CUDA 13.0: 16 bytes even for 2), so one at a time there.
  static constexpr int kScanGroup = D == 64 ? 8 : 1;
  static constexpr int kSmemBytes =
      (2 * kBlockK * D + 2 * 2 * kBlockQ * D + 2 * kBlockK * kBlockQ) * 2 + (2 * kRowWords * kBlockQ + kBlockK) * 4;
  static int k_tiles(const AttentionParams& a) { return (a.kv_end - a.kv_begin + kBlockK - 1) / kBlockK; }
};

namespace dev {

// c (16 kM rows x 8 kN cols) += A B^T over k = D: A's rows and B's rows are rows of swizzled
// (rows x D) tiles, m-tile mi 16 mi rows below A's first, n-tile pair np 16 np rows below B's.
// `a_lane` / `b_lane`: the offset in its tile of this lane's ldmatrix row address for k-chunk 0.
// Chunk kc's is that offset XOR 16 kc (swizzle<D>(row, c + 16 kc) equals swizzle<D>(row, c) ^ 16 kc
// for c < 16: the chunk index and the row's XOR pattern combine by XOR), one instruction where a
// precomputed address per chunk would hold a register across the loop. Each B fragment feeds kM
// mma per n-tile, each A fragment kN.
template <class T, int D, int kM, int kN>
RINGLAB_DEVICE void product_bt(float (&c)[kM][kN][4], const T* a_tile, int a_lane, const T* b_tile, int b_lane) {
  RINGLAB_UNROLL
  for (int kc = 0; kc < D / 16; ++kc) {
    uint32_t af[kM][4];
    RINGLAB_UNROLL
    for (int mi = 0; mi < kM; ++mi) ldmatrix_x4(af[mi], a_tile + (a_lane ^ (kc * 16)) + mi * 16 * D);
    RINGLAB_UNROLL
    for (int np = 0; np < kN / 2; ++np) {
      uint32_t bf[4];
      ldmatrix_x4(bf, b_tile + (b_lane ^ (kc * 16)) + np * 16 * D);
      RINGLAB_UNROLL
      for (int mi = 0; mi < kM; ++mi) {
        mma_16816<T>(c[mi][2 * np], af[mi], bf[0], bf[1]);
        mma_16816<T>(c[mi][2 * np + 1], af[mi], bf[2], bf[3]);
      }
    }
  }
}

template <int kM, int kN>
RINGLAB_DEVICE void zero(float (&c)[kM][kN][4]) {
  RINGLAB_UNROLL
  for (int mi = 0; mi < kM; ++mi) {
    RINGLAB_UNROLL
    for (int nt = 0; nt < kN; ++nt) c[mi][nt][0] = c[mi][nt][1] = c[mi][nt][2] = c[mi][nt][3] = 0.f;
  }
}

}  // namespace dev

template <class T, int D>
RINGLAB_KERNEL void RINGLAB_LAUNCH_BOUNDS(BackwardMmaTiles<D>::kThreads) backward_mma_kernel(BackwardParams p) {
  using namespace dev;
  using Tiles = BackwardMmaTiles<D>;
  constexpr int BQ = Tiles::kBlockQ, BK = Tiles::kBlockK, kThreads = Tiles::kThreads;
  constexpr int kSTiles = BQ / 16;   // phase 1: n-tiles of S^T per warp (half the tile's queries)
  constexpr int kOutTiles = D / 16;  // phase 2: n-tiles of dK, dV per warp (half of D)
  constexpr int kDqGroups = Tiles::kDqGroups, kDqDims = Tiles::kDqDims;
  constexpr float kLog2e = 1.4426950408889634f;
  static_assert(kDqDims % 16 == 0 && kDqGroups * (D / kDqDims) == Tiles::kWarps, "dQ: whole warps, x4 pairs");
  RINGLAB_DYNAMIC_SMEM(smem_raw);
  T* k_smem = reinterpret_cast<T*>(smem_raw);                           // (BK, D) swizzled
  T* v_smem = k_smem + BK * D;                                          // (BK, D) swizzled
  T* q_smem = v_smem + BK * D;                                          // [stage] (BQ, D) swizzled
  T* do_smem = q_smem + 2 * BQ * D;                                     // [stage] (BQ, D) swizzled
  T* pt_smem = do_smem + 2 * BQ * D;                                    // (BK, BQ) swizzled: P^T
  T* dst_smem = pt_smem + BK * BQ;                                      // (BK, BQ) swizzled: dS^T
  float* lse_smem = reinterpret_cast<float*>(dst_smem + BK * BQ);       // [stage] BQ
  float* delta_smem = lse_smem + 2 * BQ;                                // [stage] BQ
  int32_t* pos_smem = reinterpret_cast<int32_t*>(delta_smem + 2 * BQ);  // [stage] BQ: q_pos (masked)
  int32_t* doc_first_smem = pos_smem + 2 * BQ;                          // [stage] BQ: q_doc_first (documents)
  int32_t* doc_last_smem = doc_first_smem + 2 * BQ;                     // [stage] BQ: q_doc_last (documents)
  int32_t* kpos_smem = doc_last_smem + 2 * BQ;                          // BK: k_pos of the block's keys (masked)

  const AttentionParams& a = p.a;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int half = warp / Tiles::kKeyGroups;  // phase 1: query half; phase 2: dim half
  const int key_base = (warp % Tiles::kKeyGroups) * 32;
  const int k0 = a.kv_begin + static_cast<int>(blockIdx.x) * BK;
  const int k_count = imin(BK, a.kv_end - k0);
  // Plain variables, not a structured binding: the lambdas below capture them (C++17 and clang-14
  // cannot capture structured bindings).
  const BlockHead head = block_head(a, D);
  const int b = head.b, h = head.h, hk = head.hk;
  const int64_t q_stride = head.q_stride, kv_stride = head.kv_stride;
  // Row k0 of (b, hk) in k/v and dk/dv: recomputed after the loop instead of held through it.
  auto kv_row0 = [&] { return (static_cast<int64_t>(b) * a.kv_seq + k0) * kv_stride + hk * D; };
  const int64_t q_offset = static_cast<int64_t>(b) * a.q_seq * q_stride + h * D;  // row 0 of (b, h)
  const int64_t lse_offset = (static_cast<int64_t>(b) * a.heads + h) * a.q_seq;   // (b, h, 0)
  const T* q_base = static_cast<const T*>(a.q) + q_offset;
  const T* do_base = static_cast<const T*>(p.dout) + q_offset;

  // The key side of the mask, once per block: the tile's position range and this thread's four
  // keys, tile-local rows key_base + 16 mi + g + 8 r (C-fragment rows of m-tile mi; r = e / 2).
  const bool masked = has_mask(a);
  const bool documents = a.q_doc_first != nullptr;
  const SpanReach reach = span_reach(a);
  int k_lo = 0, k_hi = 0;
  if (masked) position_range(a.k_pos, k0, k_count, lane, k_lo, k_hi);
  auto key_of = [&](int mi, int r) { return key_base + 16 * mi + g + 8 * r; };

  // The query side of the mask, once per query tile: its rows' key spans, warp-reduced to the tile's
  // kind (the same answer in every warp, so the block agrees without a barrier). Every row's loads
  // are issued before the first is reduced: one round trip to memory per tile, where a loop over the
  // rows took one per 32 of them (2 at D = 128, 4 at D = 64). kinds_of does so for G consecutive
  // tiles at once: one round trip for all G.
  const int n_tiles = (a.q_end - a.q_begin + BQ - 1) / BQ;
  auto kinds_of = [&](int first, auto group, int(&kind)[decltype(group)::value]) {
    constexpr int G = decltype(group)::value;
    TileSpans spans[G];
    RINGLAB_UNROLL
    for (int j = 0; j < G; ++j) {
      const int q0 = a.q_begin + (first + j) * BQ;
      const int count = first + j < n_tiles ? imin(BQ, a.q_end - q0) : 0;
      RINGLAB_UNROLL
      for (int i = 0; i < BQ / 32; ++i) {
        if (lane + 32 * i < count) spans[j].add(row_keys(a, q0 + lane + 32 * i));
      }
    }
    RINGLAB_UNROLL
    for (int j = 0; j < G; ++j) kind[j] = classify_tile(true, a.skip_masked_tiles, warp_reduce(spans[j]), k_lo, k_hi);
  };
  // The first tile from `tile` on that is not skipped, and its kind: in the loop, where the registers
  // are the accumulators', a tile per round trip (the next tile is rarely skipped there). Written
  // out rather than as kinds_of for one tile: that form spilled 16 bytes at D = 128 (CUDA 13.0).
  auto next_tile = [&](int tile, int& kind) {
    for (; tile < n_tiles; ++tile) {
      const int q0 = a.q_begin + tile * BQ;
      TileSpans q_spans;
      if (masked) {
        const int count = imin(BQ, a.q_end - q0);
        RINGLAB_UNROLL
        for (int i = 0; i < BQ / 32; ++i) {
          if (lane + 32 * i < count) q_spans.add(row_keys(a, q0 + lane + 32 * i));
        }
        q_spans = warp_reduce(q_spans);
      }
      kind = classify_tile(masked, a.skip_masked_tiles, q_spans, k_lo, k_hi);
      if (kind != kTileSkip) break;
    }
    return tile;
  };
  // The first tile of all: in the prologue, where a causal block passes every tile before its keys'
  // first query (half the tiles on average), Tiles::kScanGroup tiles per round trip.
  auto first_tile = [&](int& kind) {
    constexpr int G = Tiles::kScanGroup;
    if constexpr (G == 1) return next_tile(0, kind);
    kind = kTileFull;
    if (!masked) return 0;
    for (int first = 0; first < n_tiles; first += G) {
      int kinds[G];
      kinds_of(first, std::integral_constant<int, G>{}, kinds);
      RINGLAB_UNROLL
      for (int j = 0; j < G; ++j) {
        if (first + j < n_tiles && kinds[j] != kTileSkip) {
          kind = kinds[j];
          return first + j;
        }
      }
    }
    return n_tiles;
  };
  // Everything a query tile needs, by cp.async. Rows past the end are zero-filled, and contribute
  // exactly nothing: Q = dO = 0 there, so dP = 0 and dS = P (0 - delta) = 0 with delta = 0, and
  // dV += P dO adds P * 0; their dq is never written. Q and dO share their rows, so one global
  // offset per copy serves both (load_row_pair_async: four copies of each per thread at D = 128,
  // at constant shared-memory offsets, where a copy loop recomputed row, chunk, swizzle and a
  // 64-bit row offset for every copy).
  auto load_q_tile = [&](int tile, int stage) {
    const int q0 = a.q_begin + tile * BQ, count = imin(BQ, a.q_end - q0);
    load_row_pair_async<T, D, BQ, kThreads>(q_smem + stage * BQ * D, q_base, do_smem + stage * BQ * D, do_base, q0,
                                            q_stride, count);
    // The rows' words: thread x copies row x % BQ of arrays x / BQ, x / BQ + kThreads / BQ, ...
    // (kCopies of them, the last ones only in masked launches), a fixed assignment unrolled at
    // compile time. A loop over the words with a stride of kThreads, its trip count unknown,
    // cost 330-360 instructions per tile (kernel_static.py sass, the loop built unmasked: 1600 ->
    // 1244 at D = 128, 1942 -> 1612 at D = 64).
    static_assert(kThreads % BQ == 0, "a thread copies one row of several arrays");
    constexpr int kCopies = (Tiles::kRowWords * BQ + kThreads - 1) / kThreads;
    const int words = masked ? (documents ? 5 : 3) : 2;  // the per-row arrays this launch reads
    const int r = static_cast<int>(threadIdx.x) % BQ;
    const bool ok = r < count;
    const int64_t row = q0 + (ok ? r : 0);  // a zero-filled copy still needs a valid address
    RINGLAB_UNROLL
    for (int c = 0; c < kCopies; ++c) {
      const int array = static_cast<int>(threadIdx.x) / BQ + c * (kThreads / BQ);
      if (array >= words) continue;
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
  int tile = first_tile(kind);
  // No query sees these keys: nothing to add, and with store_dkv zeros to store, which the
  // epilogue does with the zeroed dK and dV when the loop below runs no tile (a separate loop of
  // zero stores here made ptxas keep a value on the stack at D = 64 and lengthened the D = 128
  // main loop by 12 instructions).
  if (tile >= n_tiles && !p.store_dkv) return;
  load_rows_async<T, D, BK, kThreads>(k_smem, static_cast<const T*>(a.k) + kv_row0(), kv_stride, k_count);
  load_rows_async<T, D, BK, kThreads>(v_smem, static_cast<const T*>(a.v) + kv_row0(), kv_stride, k_count);
  load_q_tile(imin(tile, n_tiles - 1), 0);  // n_tiles >= 1: the launch has queries
  cp_async_commit();
  // The keys' positions, read in partial tiles only: in shared memory rather than four registers
  // held through the loop (barrier 1 orders these stores before every read); a key past the
  // block's end takes kUnseenPosition.
  if (const int key = static_cast<int>(threadIdx.x); masked && key < BK) {
    kpos_smem[key] = key < k_count ? a.k_pos[k0 + key] : kUnseenPosition;
  }

  float dk[2][kOutTiles][4], dv[2][kOutTiles][4];  // keys key_of(mi, *) x dims half * D/2 + ...
  zero(dk);
  zero(dv);

  // This lane's ldmatrix row addresses for k-chunk 0 (XOR 16 kc for chunk kc, product_bt):
  // A fragments (16 rows x 16 k, rows from the 16 lanes' low bits) and B fragments (two n-tiles of
  // 8 rows, k split across lanes 8..15); the .trans forms read k-major tiles (16 k rows).
  const int kv_lane = swizzle<D>(key_base + lane % 16, (lane / 16) * 8);                    // K, V: A
  const int qo_lane = swizzle<D>(lane % 8 + (lane / 16) * 8, ((lane / 8) % 2) * 8);         // Q, dO: B
  const int qo_trans_lane = swizzle<D>(lane % 8 + ((lane / 8) % 2) * 8, (lane / 16) * 8);   // Q, dO, K: B^T
  const int pt_lane = swizzle<BQ>(key_base + lane % 16, (lane / 16) * 8);                   // P^T, dS^T: A
  const int ds_trans_lane = swizzle<BQ>(lane % 8 + (lane / 16) * 8, ((lane / 8) % 2) * 8);  // dS: A

  int stage = 0;
  while (tile < n_tiles) {
    int next_kind = kTileFull;
    const int next = next_tile(tile + 1, next_kind);
    cp_async_wait<0>();
    sync_site<1>();  // the tile has landed; the previous tile's reads are over (header)
    const T* qs = q_smem + stage * BQ * D;
    const T* dos = do_smem + stage * BQ * D;
    const float* lse_s = lse_smem + stage * BQ;
    const float* delta_s = delta_smem + stage * BQ;
    const int q0 = a.q_begin + tile * BQ;

    // Phase 1: S^T = K Q^T and dP^T = V dO^T, 32 keys x BQ/2 queries per warp.
    {
      float s[2][kSTiles][4], dp[2][kSTiles][4];
      zero(s);
      zero(dp);
      const int q_half = half * (BQ / 2);
      product_bt<T, D, 2, kSTiles>(s, k_smem, kv_lane, qs + q_half * D, qo_lane);
      product_bt<T, D, 2, kSTiles>(dp, v_smem, kv_lane, dos + q_half * D, qo_lane);
      // P^T and dS^T in place of S^T and dP^T. Element e of m-tile mi is key key_of(mi, e / 2) and
      // query column q_half + nt*8 + 2t + (e & 1) of the tile: a column's lse, delta and (partial
      // tiles) key span are read and computed once, for the thread's four keys.
      // Two copies of the loop, chosen once per tile: partial tiles test every entry against its
      // column's key span; the others only the keys past the block's end (a uniform branch, where
      // a test of `cut` per column made the full tiles branch eight times).
      const float scale_log2 = a.scale * kLog2e;
      auto to_probabilities = [&](auto partial) {
        constexpr bool kCut = decltype(partial)::value;
        // Partial tiles: the thread's four keys' positions, read once per tile, so that an
        // entry's test is two comparisons and a select (read per entry, behind the test of the
        // key's index, they were a branch per entry).
        int key_pos[2][2];
        if constexpr (kCut) {
          RINGLAB_UNROLL
          for (int mi = 0; mi < 2; ++mi) {
            RINGLAB_UNROLL
            for (int r = 0; r < 2; ++r) key_pos[mi][r] = kpos_smem[key_of(mi, r)];
          }
        }
        RINGLAB_UNROLL
        for (int nt = 0; nt < kSTiles; ++nt) {
          RINGLAB_UNROLL
          for (int j = 0; j < 2; ++j) {
            const int col = q_half + nt * 8 + 2 * t + j;
            const float lse_raw = lse_s[col];
            // In log2 units, for one FFMA and ex2 per element; a row that sees no key: P = 0.
            const float lse = lse_raw == -INFINITY ? INFINITY : lse_raw * kLog2e;
            const float delta = delta_s[col];
            KeySpan keys;
            if constexpr (kCut) {
              const int at = stage * BQ + col;
              keys = keys_of(reach, pos_smem[at], documents ? doc_first_smem[at] : -kFarPosition,
                             documents ? doc_last_smem[at] : kFarPosition);
            }
            RINGLAB_UNROLL
            for (int mi = 0; mi < 2; ++mi) {
              RINGLAB_UNROLL
              for (int e = j; e < 4; e += 2) {
                const bool visible = kCut ? keys.contains(key_pos[mi][e / 2]) : key_of(mi, e / 2) < k_count;
                const float prob = visible ? exp2_approx(s[mi][nt][e] * scale_log2 - lse) : 0.f;
                s[mi][nt][e] = prob;
                dp[mi][nt][e] = prob * (dp[mi][nt][e] - delta);
              }
            }
          }
        }
      };
      if (kind == kTilePartial) {
        to_probabilities(std::true_type{});
      } else {
        to_probabilities(std::false_type{});
      }
      // P^T and dS^T to shared memory, rounded to T: the C fragments of n-tiles 2np and 2np + 1 are
      // four 8x8 tiles, one stmatrix.x4 each for P^T and dS^T (where 32-bit stores took four each:
      // 64 at D = 64, 32 at D = 128, per thread and tile, now 16 and 8). Lane l's row address is
      // that of ldmatrix's A fragment, pt_lane (key_base + l % 16, chunk l / 16), moved down 16 mi
      // rows and right 2 np + q_half / 8 chunks: an even chunk count, so it combines with the
      // lane's chunk and the row's XOR pattern by XOR (as in product_bt). The previous tile's dQ
      // and phase 2 read them before this tile's barrier 1: free to overwrite.
      RINGLAB_UNROLL
      for (int mi = 0; mi < 2; ++mi) {
        RINGLAB_UNROLL
        for (int np = 0; np < kSTiles / 2; ++np) {
          const int at = (pt_lane ^ ((q_half / 8 + 2 * np) * 8)) + mi * 16 * BQ;
          const float(&c0)[4] = s[mi][2 * np];
          const float(&c1)[4] = s[mi][2 * np + 1];
          const float(&d0)[4] = dp[mi][2 * np];
          const float(&d1)[4] = dp[mi][2 * np + 1];
          const uint32_t pt[4] = {pack2<T>(c0[0], c0[1]), pack2<T>(c0[2], c0[3]), pack2<T>(c1[0], c1[1]),
                                  pack2<T>(c1[2], c1[3])};
          const uint32_t dst[4] = {pack2<T>(d0[0], d0[1]), pack2<T>(d0[2], d0[3]), pack2<T>(d1[0], d1[1]),
                                   pack2<T>(d1[2], d1[3])};
          stmatrix_x4(pt, pt_smem + at);
          stmatrix_x4(dst, dst_smem + at);
        }
      }
    }
    sync_site<2>();  // P^T and dS^T are complete (header)
    // The next tile into the other stage, whose last reads (the previous tile's) preceded barrier 1.
    if (next < n_tiles) load_q_tile(next, stage ^ 1);
    cp_async_commit();

    // dQ = dS K for queries [qm, qm + 32) x dims [d0, d0 + kDqDims): A = dS (queries x keys) read
    // from dS^T with ldmatrix.trans; B = K (keys x D), k-major -> .trans.
    {
      const int qm = (warp % kDqGroups) * 32, d0 = (warp / kDqGroups) * kDqDims;
      float dq[2][kDqDims / 8][4];
      zero(dq);
      RINGLAB_UNROLL
      for (int kc = 0; kc < BK / 16; ++kc) {
        uint32_t dsq[2][4];
        RINGLAB_UNROLL
        for (int mi = 0; mi < 2; ++mi)
          ldmatrix_x4_trans(dsq[mi], dst_smem + (ds_trans_lane ^ (qm + mi * 16)) + kc * 16 * BQ);
        RINGLAB_UNROLL
        for (int dpair = 0; dpair < kDqDims / 16; ++dpair) {
          uint32_t kb[4];
          ldmatrix_x4_trans(kb, k_smem + (qo_trans_lane ^ (d0 + dpair * 16)) + kc * 16 * D);
          RINGLAB_UNROLL
          for (int mi = 0; mi < 2; ++mi) {
            mma_16816<T>(dq[mi][2 * dpair], dsq[mi], kb[0], kb[1]);
            mma_16816<T>(dq[mi][2 * dpair + 1], dsq[mi], kb[2], kb[3]);
          }
        }
      }
      // One red.global.add.v4 per n-tile: lanes t and t ^ 1 trade halves so that the even one holds
      // row g's columns 2t .. 2t + 3 and the odd one row g + 8's columns 2t - 2 .. 2t + 1 (16-byte
      // aligned: q_stride and h D are multiples of 64, the columns start at a multiple of 4).
      const bool odd = (t & 1) != 0;
      const int q_count = imin(BQ, a.q_end - q0);
      RINGLAB_UNROLL
      for (int mi = 0; mi < 2; ++mi) {
        const int row = qm + 16 * mi + g + (odd ? 8 : 0);  // tile-local query row
        float* dq_row = p.dq + static_cast<int64_t>(q0 + row) * q_stride + q_offset + d0 + 2 * (t & ~1);
        RINGLAB_UNROLL
        for (int nt = 0; nt < kDqDims / 8; ++nt) {
          const float(&c)[4] = dq[mi][nt];
          const float give0 = odd ? c[0] : c[2], give1 = odd ? c[1] : c[3];
          const float got0 = shfl_xor(give0, 1), got1 = shfl_xor(give1, 1);
          const float mine0 = odd ? c[2] : c[0], mine1 = odd ? c[3] : c[1];
          const float sum[4] = {a.scale * (odd ? got0 : mine0), a.scale * (odd ? got1 : mine1),
                                a.scale * (odd ? mine0 : got0), a.scale * (odd ? mine1 : got1)};
          atomic_add_vector_if(row < q_count, dq_row + nt * 8, sum);
        }
      }
    }

    // Phase 2: dV += P^T dO, dK += dS^T Q for the warp's 32 keys x D/2 dims [d_half, + D/2). The k
    // dimension is the queries: P^T, dS^T are its rows (ldmatrix), dO and Q k-major (.trans).
    {
      const int d_half = half * (D / 2);
      RINGLAB_UNROLL
      for (int kc = 0; kc < BQ / 16; ++kc) {
        uint32_t pa[2][4], dsa[2][4];
        RINGLAB_UNROLL
        for (int mi = 0; mi < 2; ++mi) {
          ldmatrix_x4(pa[mi], pt_smem + (pt_lane ^ (kc * 16)) + mi * 16 * BQ);
          ldmatrix_x4(dsa[mi], dst_smem + (pt_lane ^ (kc * 16)) + mi * 16 * BQ);
        }
        RINGLAB_UNROLL
        for (int dpair = 0; dpair < kOutTiles / 2; ++dpair) {
          uint32_t ob[4], qb[4];
          const int at = (qo_trans_lane ^ (d_half + dpair * 16)) + kc * 16 * D;
          ldmatrix_x4_trans(ob, dos + at);
          ldmatrix_x4_trans(qb, qs + at);
          RINGLAB_UNROLL
          for (int mi = 0; mi < 2; ++mi) {
            mma_16816<T>(dv[mi][2 * dpair], pa[mi], ob[0], ob[1]);
            mma_16816<T>(dv[mi][2 * dpair + 1], pa[mi], ob[2], ob[3]);
            mma_16816<T>(dk[mi][2 * dpair], dsa[mi], qb[0], qb[1]);
            mma_16816<T>(dk[mi][2 * dpair + 1], dsa[mi], qb[2], qb[3]);
          }
        }
      }
    }
    stage ^= 1;
    tile = next;
    kind = next_kind;
  }
  cp_async_wait<0>();

  // dK = scale dS^T Q and dV, once per block: a .v2 atomic add per (key, n-tile), or with
  // store_dkv (this block the rows' only writer) a plain 8-byte store.
  const int64_t kv_offset = kv_row0();
  const bool store = p.store_dkv;
  RINGLAB_UNROLL
  for (int mi = 0; mi < 2; ++mi) {
    RINGLAB_UNROLL
    for (int r = 0; r < 2; ++r) {
      if (key_of(mi, r) >= k_count) continue;
      const int64_t row = kv_offset + key_of(mi, r) * kv_stride + half * (D / 2) + 2 * t;
      RINGLAB_UNROLL
      for (int nt = 0; nt < kOutTiles; ++nt) {
        const float dk_pair[2] = {a.scale * dk[mi][nt][2 * r], a.scale * dk[mi][nt][2 * r + 1]};
        const float dv_pair[2] = {dv[mi][nt][2 * r], dv[mi][nt][2 * r + 1]};
        if (store) {
          store_pair(p.dk + row + nt * 8, dk_pair[0], dk_pair[1]);
          store_pair(p.dv + row + nt * 8, dv_pair[0], dv_pair[1]);
        } else {
          atomic_add_vector(p.dk + row + nt * 8, dk_pair);
          atomic_add_vector(p.dv + row + nt * 8, dv_pair);
        }
      }
    }
  }
}

}  // namespace ringlab::gpu
