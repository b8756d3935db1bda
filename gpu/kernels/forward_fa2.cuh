// The production tensor-core forward (bf16 / fp16 inputs, fp32 accumulation), on FlashAttention-2's
// design, with the reference kernel's position lists, mask kinds, tile skipping and GQA. Merged into
// the device accumulators (m, l, o) with the online-softmax rescale. (How it grew from the previous
// kernel, ladder rung 05: gpu/kernels/ladder/README.md.)
//
// Tiles: a block of 4 warps owns 128 query rows of one (batch, head) and each warp owns 32 of them,
// two m16 row blocks — so every K or V fragment one ldmatrix.x4 brings in feeds four mma.sync
// instead of two. Key/value tiles are FlashAttention-2's: 64 rows at D = 128, 128 at D = 64.
//   D = 128: per thread O is 2 x 16 x 4 = 128 fp32 registers and S 2 x 8 x 4 = 64; Q's fragments
//            (another 64) do not fit beside them under 255 registers, so Q is re-read from shared
//            memory by ldmatrix at every tile, as FlashAttention-2 does at hdim 128 (static
//            ldmatrix/mma 0.3125). Shared memory 98 KiB: two blocks per SM.
//   D = 64:  128-key tiles: O 64 registers, S 128; Q (32 more) is re-read from shared memory
//            (0.28125), as FA2 does. The per-tile work that does not grow with the keys (barriers,
//            waits, copies' addresses, the rescale of o, the row reductions' shuffles) is paid once
//            per 128 keys rather than per 64: about a tenth fewer instructions per key for a full
//            tile (kernel_static.py sass; gpu/README.md). (Until 2026-11-28: 64-key tiles with Q
//            kept in registers after the first; with 128-key tiles that spills.) 82.5 KiB: two
//            blocks per SM.
// FlashAttention-2 also runs 4 warps x 32 rows for its 128-row hdim-128 forward; 8 warps x 16 rows
// would feed each fragment to two mma again, and 8 x 32 = 256 rows would halve the blocks of a ring step's
// short query blocks (a rank's share of a 1M sequence at P = 64 is 16K rows: 128 blocks per head).
//
// Per key tile, in the order the loop runs it:
//   wait K(t), barrier 1        K(t) has landed for every warp; every warp is done with tile t-1
//   prefetch K(t+1)             into the other stage, its own cp.async group
//   S = Q K^T                   mma.sync m16n8k16, K (and at D=128 Q) fragments by ldmatrix
//   mask                        only for tiles the mask cuts (or the ragged last tile)
//   online softmax              max on the raw scores; p = ex2(s c - m c), c = scale log2(e): one FFMA
//                               feeding ex2.approx.ftz per element (m kept as m c, "log2 units")
//   wait V(t), barrier 2        V(t) landed while S was computed
//   prefetch V(t+1)
//   O += P V                    P re-packed from the S accumulators, V by ldmatrix.trans
// On the rows' last step (ForwardParams::out set) the merged state is finalised here, out = o / l
// (stored in T, pairs packed by cvt.rn) and lse = m + log l (fp32), instead of going back to the accumulator for finalize_accumulator: one pass
// over the (B H Sq) x D fp32 state less per forward, and no finalize launch.
// On the rows' first step (ForwardParams::init) the state starts empty in registers instead of being
// loaded: no init_accumulator launch before the forward, and no read of the fp32 state by its first
// block; with both, a row's only block neither reads nor writes the state.
// The state (m, l, o) in the accumulators is in natural units (m = max of scale s): converted to
// log2 units on loading (m log2(e)) and back on storing (m ln 2). Needs scale > 0 (1/sqrt(D)), so
// that the max of the raw scores is the max of the scaled ones.
//
// Tile skipping: which key tiles the block's queries may see is decided ONCE per tile, before the
// loop, by the whole block: each warp classifies groups of kClassifyGroup consecutive tiles (the
// tiles' key position ranges against the query tile's span bounds, classify_tile) into a table of
// kinds in shared memory, then barrier 3. The loop reads the table: a skipped tile costs one
// shared-memory byte read. The prologue is latency, not work, so its global loads are issued
// together: Q's cp.async first, then the rows' key spans (4 rows per lane, one round trip), then
// the key positions of a warp's whole group of tiles before any is reduced (one round trip per
// 4 kClassifyGroup tiles: one for S = 1K causal, 8 for 16K, where a tile at a time took 4 and 64).
// The mask inside the loop reads no global memory either: each row's key span is kept in shared
// memory from the prologue, and each key tile's positions arrive by cp.async with K.
// The table covers kChunkTiles tiles; a longer key range is classified chunk by chunk, the pipeline
// draining at each chunk's end (one tile's load latency per 256 tiles = 16K keys). Two tables
// alternate, so the next chunk's writes never meet a slow warp's reads of the last one.
#pragma once

#include "gpu/kernels/kernel_params.hpp"
#include "gpu/kernels/mma_fragments.cuh"
#include "gpu/kernels/primitives.cuh"

namespace ringlab::gpu {

template <int D>
struct ForwardFa2Tiles {
  static constexpr int kThreads = 128;
  static constexpr int kWarps = kThreads / 32;
  static constexpr int kRowsPerWarp = 32;  // two m16 row blocks
  static constexpr int kBlockQ = kWarps * kRowsPerWarp;
  static constexpr int kBlockK = D == 64 ? 128 : 64;  // see the top of the file
  static constexpr int kStages = 2;
  static constexpr int kChunkTiles = 256;   // key tiles per table of tile kinds
  static constexpr int kClassifyGroup = 8;  // key tiles a warp classifies per round of loads
  // Q tile, then K and V tiles per stage (16-bit elements), then two tables of tile kinds (padded
  // to 4 bytes), then for masked launches the rows' key spans (first, last) and each stage's key
  // positions (int32).
  static constexpr int table_bytes(int chunk_tiles) { return (2 * chunk_tiles + 3) / 4 * 4; }
  static constexpr int smem_bytes(int chunk_tiles) {
    return (kBlockQ * D + kStages * 2 * kBlockK * D) * 2 + table_bytes(chunk_tiles) +
           (2 * kBlockQ + kStages * kBlockK) * 4;
  }
  static constexpr int kSmemBytes = smem_bytes(kChunkTiles);
  static int q_tiles(const AttentionParams& a) { return (a.q_end - a.q_begin + kBlockQ - 1) / kBlockQ; }
};

namespace dev {

// The online-softmax step of one 16-row block (rows g and g + 8 of it: index 0 and 1 below) on raw,
// masked scores (-inf where a key is not visible). m: the rows' running maxima in log2 units (the
// max of scale * log2(e) * s); l: this thread's share of the rows' sums; o rescaled; s becomes P.
// scale_log2 = scale * log2(e) > 0. A row that has seen no visible key keeps m = -inf.
template <int kScoreTiles, int kOutTiles>
RINGLAB_DEVICE void online_softmax_log2(float (&s)[kScoreTiles][4], float (&o)[kOutTiles][4], float (&m)[2],
                                        float (&l)[2], float scale_log2) {
  float row_max[2] = {-INFINITY, -INFINITY};
  RINGLAB_UNROLL
  for (int nt = 0; nt < kScoreTiles; ++nt) {
    row_max[0] = fmaxf(row_max[0], fmaxf(s[nt][0], s[nt][1]));
    row_max[1] = fmaxf(row_max[1], fmaxf(s[nt][2], s[nt][3]));
  }
  float alpha[2], shift[2];
  RINGLAB_UNROLL
  for (int r = 0; r < 2; ++r) {
    const float fresh = fmaxf(m[r], quad_max(row_max[r]) * scale_log2);
    shift[r] = fresh == -INFINITY ? 0.f : fresh;  // a row with no visible key stays empty
    alpha[r] = exp2_approx(m[r] - shift[r]);
    m[r] = fresh;
  }
  float sum[2] = {0.f, 0.f};
  RINGLAB_UNROLL
  for (int nt = 0; nt < kScoreTiles; ++nt) {
    RINGLAB_UNROLL
    for (int e = 0; e < 4; ++e) {
      s[nt][e] = exp2_approx(fmaf(s[nt][e], scale_log2, -shift[e / 2]));
      sum[e / 2] += s[nt][e];
    }
  }
  RINGLAB_UNROLL
  for (int r = 0; r < 2; ++r) l[r] = l[r] * alpha[r] + sum[r];
  // o times 1 is o, bit for bit: when no row of the block got a new maximum in this tile (alpha =
  // 2^0 = 1 in every lane), the warp skips the rescale, a uniform branch. A row's maximum moves at
  // its k-th key tile with probability about 1/k for keys in random order, so long rows skip most
  // tiles' rescale (D/2 multiplications per thread and row block).
  if (!warp_any(alpha[0] != 1.f || alpha[1] != 1.f)) return;
  RINGLAB_UNROLL
  for (int nt = 0; nt < kOutTiles; ++nt) {
    o[nt][0] *= alpha[0];
    o[nt][1] *= alpha[0];
    o[nt][2] *= alpha[1];
    o[nt][3] *= alpha[1];
  }
}

// swizzle<D>(row, 16 c + 8 half) as lane_part ^ (c << 4), lane_part = swizzled_lane_part<D>(row, half):
// (2c + half) ^ (row & 7) = (2c) ^ (half ^ (row & 7)) since 2c has no bit 0, and the XOR stays below
// D, under the row's multiple of D. The fragment loops below unroll over c with the lane's part in
// one register, so each of their addresses is one XOR with a constant instead of a hoisted
// register per c (registers are what bounds the D = 128 kernel).
template <int D>
RINGLAB_DEVICE int swizzled_lane_part(int row, int half) {
  return row * D + ((half ^ (row & 7)) << 3);
}

}  // namespace dev

namespace dev {

// The kernels' body; kInit: the rows' first step (ForwardParams::init), forward_fa2_init_kernel below.
template <class T, int D, int kChunkTiles, bool kInit>
RINGLAB_DEVICE void forward_fa2_body(const ForwardParams& p) {
  using Tiles = ForwardFa2Tiles<D>;
  constexpr int BQ = Tiles::kBlockQ, BK = Tiles::kBlockK, kWarps = Tiles::kWarps;
  constexpr int kRowBlocks = Tiles::kRowsPerWarp / 16;
  constexpr int kScoreTiles = BK / 8;  // n-tiles of S per row block (8 keys each)
  constexpr int kOutTiles = D / 8;     // n-tiles of O per row block
  constexpr int kDimChunks = D / 16;   // k-chunks of Q K^T
  constexpr float kLog2e = 1.4426950408889634f, kLn2 = 0.6931471805599453f;
  RINGLAB_DYNAMIC_SMEM(smem_raw);
  T* q_smem = reinterpret_cast<T*>(smem_raw);  // (BQ, D) swizzled
  T* k_smem = q_smem + BQ * D;                 // [stage] (BK, D) swizzled
  T* v_smem = k_smem + Tiles::kStages * BK * D;
  auto* kind_tables = reinterpret_cast<int8_t*>(v_smem + Tiles::kStages * BK * D);  // [2][kChunkTiles]
  // Masked launches: row r's visible keys [span_smem[2r], span_smem[2r + 1]] (a row past q_count:
  // KeySpan{}, sees all; its results are never stored), and [stage] the key tile's positions.
  constexpr int kTableBytes = (2 * kChunkTiles + 3) / 4 * 4;                // Tiles::table_bytes (a host function)
  auto* span_smem = reinterpret_cast<int32_t*>(kind_tables + kTableBytes);  // [BQ][2]
  int32_t* kpos_smem = span_smem + 2 * BQ;                                  // [stage][BK]

  const AttentionParams& a = p.a;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  // This block's query tile and head (b H + h) in the grid forward_launch made: heaviest tiles
  // first under the causal mask (kernel_params.hpp, the forward's block order), else (tiles, B H).
  // Recomputed where used from special registers and the launch's parameters, like blockIdx itself.
  auto block_of = [&] {
    return forward_block(p.heavy_first, blockIdx.x, blockIdx.y, blockIdx.z, gridDim.x, gridDim.y);
  };
  auto head = [&] { return block_head(a, D, block_of().head); };
  const int q0 = a.q_begin + block_of().tile * BQ;
  const int q_count = imin(BQ, a.q_end - q0);
  // Offsets of this block's rows, recomputed where used from the launch's parameters and the
  // block's head rather than held across the loop in registers.
  // q: (B, Sq, H, D) -> rows q0.. of (b, h); k, v: (B, Sk, HKV, D) -> row 0 of (b, hk);
  // accumulator rows (b H + h) Sq + q0..
  auto q_offset = [&] {
    const BlockHead bh = head();
    return ((static_cast<int64_t>(bh.b) * a.q_seq + q0) * a.heads + bh.h) * D;
  };
  auto kv_offset = [&](int key) {
    const BlockHead bh = head();
    return (static_cast<int64_t>(bh.b) * a.kv_seq + key) * bh.kv_stride + bh.hk * D;
  };
  auto acc_offset = [&] { return static_cast<int64_t>(block_of().head) * a.q_seq + q0; };  // (b H + h) Sq + q0
  const float scale_log2 = a.scale * kLog2e;

  const bool masked = has_mask(a);

  // This thread's rows: row (mb, r) = warp * 32 + 16 mb + 8 r + g of the tile (accumulator row
  // acc_row + 16 mb + 8 r), its state m (log2 units), l (this thread's share), O (C fragments).
  // Row indices, validity and visible keys are recomputed where used rather than kept: at D = 128
  // O and S take 192 of the 255 registers.
  const int warp_row = warp * Tiles::kRowsPerWarp + g;
  auto row_of = [&](int mb, int r) { return warp_row + 16 * mb + 8 * r; };
  // The rows' first step (p.init) starts from the empty state: nothing is loaded. Otherwise the
  // state is loaded after the first chunk's tile classification, so that O's registers are not
  // live across the classification's loads (at D = 128 that spilled).
  float m[kRowBlocks][2], l[kRowBlocks][2];
  float o[kRowBlocks][kOutTiles][4];
  auto load_state = [&] {
    RINGLAB_UNROLL
    for (int mb = 0; mb < kRowBlocks; ++mb) {
      RINGLAB_UNROLL
      for (int r = 0; r < 2; ++r) {
        const bool valid = !kInit && row_of(mb, r) < q_count;
        const int64_t at = acc_offset() + row_of(mb, r);
        m[mb][r] = valid ? p.acc_max[at] * kLog2e : -INFINITY;
        l[mb][r] = valid && t == 0 ? p.acc_sum[at] : 0.f;
        RINGLAB_UNROLL
        for (int nt = 0; nt < kOutTiles; ++nt) {  // columns 2t, 2t + 1: one 8-byte load
          o[mb][nt][2 * r] = o[mb][nt][2 * r + 1] = 0.f;
          if (valid) load_pair(p.acc_out + at * D + nt * 8 + 2 * t, o[mb][nt][2 * r], o[mb][nt][2 * r + 1]);
        }
      }
    }
  };

  auto load_k = [&](int tile, int stage) {  // with the tile's key positions when masked
    const int k0 = a.kv_begin + tile * BK, count = imin(BK, a.kv_end - k0);
    load_rows_async<T, D, BK, 128>(k_smem + stage * BK * D, static_cast<const T*>(a.k) + kv_offset(k0),
                                   head().kv_stride, count);
    const int key = static_cast<int>(threadIdx.x);
    if (masked && key < BK)
      cp_async_4(kpos_smem + stage * BK + key, a.k_pos + k0 + (key < count ? key : 0), key < count);
  };
  auto load_v = [&](int tile, int stage) {
    const int k0 = a.kv_begin + tile * BK, count = imin(BK, a.kv_end - k0);
    load_rows_async<T, D, BK, 128>(v_smem + stage * BK * D, static_cast<const T*>(a.v) + kv_offset(k0),
                                   head().kv_stride, count);
  };

  // The lane's parts of its ldmatrix addresses (swizzled_lane_part): Q's A fragments (rows
  // lane % 16 of the row block, dims 8 (lane / 16) of the 16-dim chunk), K's B fragments (keys
  // lane % 8 + 8 (lane / 16), dims 8 ((lane / 8) % 2)) and V's, transposed (keys lane % 8 +
  // 8 ((lane / 8) % 2), dims 8 (lane / 16)).
  const int q_lane = swizzled_lane_part<D>(warp * Tiles::kRowsPerWarp + lane % 16, lane / 16);
  const int k_lane = swizzled_lane_part<D>(lane % 8 + (lane / 16) * 8, (lane / 8) % 2);
  const int v_lane = swizzled_lane_part<D>(lane % 8 + ((lane / 8) % 2) * 8, lane / 16);
  bool computed = false;  // at least one key tile was computed
  int stage = 0;
  // Q first, before the tile classification's loads: its latency overlaps theirs. (Loaded even when
  // every tile turns out skipped; the wait after the loop drains it before the block exits.)
  load_rows_async<T, D, BQ, 128>(q_smem, static_cast<const T*>(a.q) + q_offset(), head().q_stride, q_count);
  cp_async_commit();  // group: Q
  const int n_tiles = (a.kv_end - a.kv_begin + BK - 1) / BK;
  // Without a mask every tile is full: one chunk, no table.
  const int chunk_tiles = masked ? kChunkTiles : n_tiles;
  for (int chunk0 = 0; chunk0 < n_tiles; chunk0 += chunk_tiles) {
    const int chunk_end = imin(n_tiles, chunk0 + chunk_tiles);
    // The chunk's table of kinds; a pointer from chunk0 rather than one more register in the loop.
    auto kinds = [&] { return kind_tables + (chunk0 / kChunkTiles % 2) * kChunkTiles; };
    if (masked) {
      // The rows' key spans: lane l of every warp reads rows l, l + 32, l + 64, l + 96 (loads issued
      // together), reduced to the tile's bounds; warp w also keeps rows 32 w + l for the mask (the
      // first chunk: the spans do not change). Recomputed per chunk (once per 256 tiles) rather
      // than held in registers across the loop.
      TileSpans q_spans;
      RINGLAB_UNROLL
      for (int i = 0; i < BQ / 32; ++i) {
        const int r = lane + 32 * i;
        const KeySpan keys = r < q_count ? row_keys(a, q0 + r) : KeySpan{};
        if (r < q_count) q_spans.add(keys);
        if (i == warp && chunk0 == 0) span_smem[2 * r] = keys.first, span_smem[2 * r + 1] = keys.last;
      }
      q_spans = warp_reduce(q_spans);
      // The key tiles' position ranges, kClassifyGroup consecutive tiles per warp and round: every
      // load of the group before the first reduction.
      constexpr int G = Tiles::kClassifyGroup;
      for (int first = chunk0 + warp * G; first < chunk_end; first += kWarps * G) {
        int lo[G], hi[G];
        RINGLAB_UNROLL
        for (int j = 0; j < G; ++j) {
          const int k0 = a.kv_begin + (first + j) * BK;
          const int count = first + j < chunk_end ? imin(BK, a.kv_end - k0) : 0;
          lo[j] = kFarPosition, hi[j] = -kFarPosition;
          RINGLAB_UNROLL
          for (int r = lane; r < BK; r += 32) {  // BK / 32 keys per lane
            if (r >= count) break;
            const int position = a.k_pos[k0 + r];
            lo[j] = imin(lo[j], position), hi[j] = imax(hi[j], position);
          }
        }
        RINGLAB_UNROLL
        for (int j = 0; j < G; ++j) {
          warp_min_max(lo[j], hi[j]);
          if (lane == 0 && first + j < chunk_end)
            kinds()[first + j - chunk0] =
                static_cast<int8_t>(classify_tile(true, a.skip_masked_tiles, q_spans, lo[j], hi[j]));
        }
      }
      sync_site<3>();  // the table (and the rows' spans) complete for every warp
    }
    if (chunk0 == 0) load_state();
    auto kind_of = [&](int tile) { return masked ? static_cast<int>(kinds()[tile - chunk0]) : kTileFull; };
    auto computed_from = [&](int tile) {  // the first tile >= `tile` of the chunk that is not skipped
      while (tile < chunk_end && kind_of(tile) == kTileSkip) ++tile;
      return tile;
    };
    int tile = computed_from(chunk0);
    if (tile == chunk_end) continue;  // the whole chunk is masked for these queries
    computed = true;
    load_k(tile, stage);
    cp_async_commit();  // group: K(t)
    load_v(tile, stage);
    cp_async_commit();  // group: V(t)

    while (tile < chunk_end) {
      cp_async_wait<1>();  // all but the newest group, V(t), have landed: Q and K(t) (and its positions)
      sync_site<1>();      // ...for every thread; and every warp is done with tile t-1's stage
      const int next = computed_from(tile + 1);
      if (next < chunk_end) load_k(next, stage ^ 1);
      cp_async_commit();  // (possibly empty: the waits below count groups)
      const T* ks = k_smem + stage * BK * D;
      const T* vs = v_smem + stage * BK * D;
      const int32_t* kpos = kpos_smem + stage * BK;
      const int k0 = a.kv_begin + tile * BK, k_count = imin(BK, a.kv_end - k0);

      // S = Q K^T, 32 rows x BK keys per warp: each K fragment serves both row blocks.
      float s[kRowBlocks][kScoreTiles][4];
      RINGLAB_UNROLL
      for (int mb = 0; mb < kRowBlocks; ++mb) {
        RINGLAB_UNROLL
        for (int nt = 0; nt < kScoreTiles; ++nt) s[mb][nt][0] = s[mb][nt][1] = s[mb][nt][2] = s[mb][nt][3] = 0.f;
      }
      RINGLAB_UNROLL
      for (int kc = 0; kc < kDimChunks; ++kc) {
        uint32_t qa[kRowBlocks][4];
        RINGLAB_UNROLL
        for (int mb = 0; mb < kRowBlocks; ++mb) ldmatrix_x4(qa[mb], q_smem + 16 * mb * D + (q_lane ^ (kc << 4)));
        RINGLAB_UNROLL
        for (int np = 0; np < BK / 16; ++np) {
          uint32_t kb[4];  // B fragments of key n-tiles 2np (kb0, kb1) and 2np+1 (kb2, kb3)
          ldmatrix_x4(kb, ks + np * 16 * D + (k_lane ^ (kc << 4)));
          RINGLAB_UNROLL
          for (int mb = 0; mb < kRowBlocks; ++mb) {
            mma_16816<T>(s[mb][2 * np], qa[mb], kb[0], kb[1]);
            mma_16816<T>(s[mb][2 * np + 1], qa[mb], kb[2], kb[3]);
          }
        }
      }

      // Mask where the mask cuts the tile or the tile is ragged; the scale comes in the softmax.
      // Without a branch per entry: each of the thread's key columns takes one position (its key's
      // in a cut tile, 0 in an uncut ragged one, kUnseenPosition past the last key), and each entry
      // one test against its row's span and a select. An `if` per entry, with the position loaded
      // only when needed, was a branch per entry (kernel_static.py sass: about 200 BRA in the loop,
      // against 6 or 7 now). A padding row past q_count sees every key of an uncut tile: its results
      // are never stored.
      const bool cut = kind_of(tile) == kTilePartial;
      if (cut || k_count < BK) {
        KeySpan keys[kRowBlocks][2];  // uncut: every position (KeySpan's default)
        RINGLAB_UNROLL
        for (int mb = 0; mb < kRowBlocks; ++mb) {
          RINGLAB_UNROLL
          for (int r = 0; r < 2; ++r)
            if (cut) keys[mb][r] = KeySpan{span_smem[2 * row_of(mb, r)], span_smem[2 * row_of(mb, r) + 1]};
        }
        RINGLAB_UNROLL
        for (int nt = 0; nt < kScoreTiles; ++nt) {
          RINGLAB_UNROLL
          for (int e = 0; e < 2; ++e) {
            const int j = nt * 8 + 2 * t + e;
            const int position = j >= k_count ? kUnseenPosition : cut ? kpos[j] : 0;
            RINGLAB_UNROLL
            for (int mb = 0; mb < kRowBlocks; ++mb) {
              RINGLAB_UNROLL
              for (int r = 0; r < 2; ++r) {
                const bool seen = keys[mb][r].contains(position);
                s[mb][nt][2 * r + e] = seen ? s[mb][nt][2 * r + e] : -INFINITY;
              }
            }
          }
        }
      }
      RINGLAB_UNROLL
      for (int mb = 0; mb < kRowBlocks; ++mb) online_softmax_log2(s[mb], o[mb], m[mb], l[mb], scale_log2);

      cp_async_wait<1>();  // all but the newest group, K(t+1), have landed: V(t)
      sync_site<2>();      // ...for every thread
      if (next < chunk_end) load_v(next, stage ^ 1);
      cp_async_commit();

      // O += P V: each V fragment serves both row blocks.
      RINGLAB_UNROLL
      for (int kc = 0; kc < BK / 16; ++kc) {
        uint32_t pa[kRowBlocks][4];
        RINGLAB_UNROLL
        for (int mb = 0; mb < kRowBlocks; ++mb) a_fragment<T>(s[mb], kc, pa[mb]);
        RINGLAB_UNROLL
        for (int dp = 0; dp < D / 16; ++dp) {
          uint32_t vb[4];  // B fragments of output n-tiles 2dp (vb0, vb1) and 2dp+1 (vb2, vb3)
          ldmatrix_x4_trans(vb, vs + kc * 16 * D + (v_lane ^ (dp << 4)));
          RINGLAB_UNROLL
          for (int mb = 0; mb < kRowBlocks; ++mb) {
            mma_16816<T>(o[mb][2 * dp], pa[mb], vb[0], vb[1]);
            mma_16816<T>(o[mb][2 * dp + 1], pa[mb], vb[2], vb[3]);
          }
        }
      }
      stage ^= 1;
      tile = next;
    }
  }
  cp_async_wait<0>();
  if (p.out != nullptr) {  // the rows' last step: out and lse, even where no tile was computed
    RINGLAB_UNROLL
    for (int mb = 0; mb < kRowBlocks; ++mb) {
      RINGLAB_UNROLL
      for (int r = 0; r < 2; ++r) {
        const float row_sum = quad_sum(l[mb][r]);
        const int q_row = row_of(mb, r);
        if (q_row >= q_count) continue;
        const bool empty = m[mb][r] == -INFINITY || row_sum == 0.f;
        const float inverse = empty ? 0.f : 1.f / row_sum;
        if (t == 0) p.lse[acc_offset() + q_row] = empty ? -INFINITY : m[mb][r] * kLn2 + logf(row_sum);
        T* out_row = static_cast<T*>(p.out) + q_offset() + static_cast<int64_t>(q_row) * a.heads * D;
        RINGLAB_UNROLL
        for (int nt = 0; nt < kOutTiles; ++nt) {  // columns 2t, 2t + 1: one aligned 32-bit store
          *reinterpret_cast<uint32_t*>(out_row + nt * 8 + 2 * t) =
              pack2<T>(o[mb][nt][2 * r] * inverse, o[mb][nt][2 * r + 1] * inverse);
        }
      }
    }
    return;
  }
  if (!computed) {          // every key tile is masked for these queries: the state is unchanged...
    if constexpr (kInit) {  // ...unless nothing wrote it yet (the rows' first step): the empty state
      for (int row = static_cast<int>(threadIdx.x); row < q_count; row += Tiles::kThreads) {
        const int64_t at = acc_offset() + row;
        p.acc_max[at] = -INFINITY;
        p.acc_sum[at] = 0.f;
        for (int d = 0; d < D; ++d) p.acc_out[at * D + d] = 0.f;
      }
    }
    return;
  }

  // Write the state back: l summed over the quad, m in natural units, O as float pairs (8 bytes).
  RINGLAB_UNROLL
  for (int mb = 0; mb < kRowBlocks; ++mb) {
    RINGLAB_UNROLL
    for (int r = 0; r < 2; ++r) {
      const float row_sum = quad_sum(l[mb][r]);
      if (row_of(mb, r) >= q_count) continue;
      const int64_t at = acc_offset() + row_of(mb, r);
      if (t == 0) {
        p.acc_max[at] = m[mb][r] * kLn2;
        p.acc_sum[at] = row_sum;
      }
      RINGLAB_UNROLL
      for (int nt = 0; nt < kOutTiles; ++nt)
        store_pair(p.acc_out + at * D + nt * 8 + 2 * t, o[mb][nt][2 * r], o[mb][nt][2 * r + 1]);
    }
  }
}

}  // namespace dev

// kChunkTiles: the key tiles classified per table (tests lower it to cross chunk boundaries in
// small problems; the launchers use the default).
// Two kernels, one per value of p.init, chosen by the launcher: with the flag as a runtime branch
// in one kernel (or both bodies in one kernel behind a uniform branch), ptxas spilled at D = 128
// (255 registers and a 24-32 byte stack frame, CUDA 13.0); each body alone stays at 255 registers
// without a spill. forward_fa2_kernel ignores p.init (it loads the state); the launchers route a
// launch with p.init to forward_fa2_init_kernel.
template <class T, int D, int kChunkTiles = ForwardFa2Tiles<D>::kChunkTiles>
RINGLAB_KERNEL void RINGLAB_LAUNCH_BOUNDS(128) forward_fa2_kernel(ForwardParams p) {
  dev::forward_fa2_body<T, D, kChunkTiles, false>(p);
}

template <class T, int D, int kChunkTiles = ForwardFa2Tiles<D>::kChunkTiles>
RINGLAB_KERNEL void RINGLAB_LAUNCH_BOUNDS(128) forward_fa2_init_kernel(ForwardParams p) {
  dev::forward_fa2_body<T, D, kChunkTiles, true>(p);
}

}  // namespace ringlab::gpu
