// fp32 backward of one attention block on the CUDA cores — the precise path, any D up to 128.
//
// A block of 128 threads owns 32 key rows of one (batch, query head) and walks the query tiles
// (32 rows each) that can see them. Per query tile, with Q, dO, K, V staged in shared memory:
//     phase 1   thread (query i = tid/4, keys r, r+4, ...): P = exp(scale q.k - lse), dP = dO.v,
//               dS = P (dP - delta) -> shared memory
//     phase 2   thread (key tid/4, dims r, r+4, ...): dV += P^T dO, dK += dS^T Q in registers
//     phase 3   thread (query tid/4, dims r, r+4, ...): dQ += dS K, added atomically to dq
// dK (times scale) and dV are added to global memory at the end (atomically: GQA heads share).
#pragma once

#include "gpu/kernels/kernel_params.hpp"
#include "gpu/kernels/primitives.cuh"

namespace ringlab::gpu {

struct BackwardFp32Tiles {
  static constexpr int kThreads = 128;
  static constexpr int kBlockQ = 32;
  static constexpr int kBlockK = 32;
  static constexpr int kMaxDim = 128;
  static constexpr int kDimsPerThread = kMaxDim / 4;
  static constexpr int smem_bytes(int dim) { return (4 * 32 * (dim + 1) + 2 * 32 * 33 + 4 * 32) * 4; }
  static int k_tiles(const AttentionParams& a) { return (a.kv_end - a.kv_begin + kBlockK - 1) / kBlockK; }
};

RINGLAB_KERNEL void RINGLAB_LAUNCH_BOUNDS(128) backward_fp32_kernel(BackwardParams p) {
  using namespace dev;
  using Tiles = BackwardFp32Tiles;
  constexpr int BQ = Tiles::kBlockQ, BK = Tiles::kBlockK, kDims = Tiles::kDimsPerThread;
  const AttentionParams& a = p.a;
  const int D = a.dim, pitch = D + 1;
  RINGLAB_DYNAMIC_SMEM(smem_raw);
  float* k_s = reinterpret_cast<float*>(smem_raw);              // (BK, D + 1)
  float* v_s = k_s + BK * pitch;                                // (BK, D + 1)
  float* q_s = v_s + BK * pitch;                                // (BQ, D + 1)
  float* do_s = q_s + BQ * pitch;                               // (BQ, D + 1)
  float* p_s = do_s + BQ * pitch;                               // (BQ, 33): P of the tile, queries x keys
  float* ds_s = p_s + BQ * 33;                                  // (BQ, 33): dS
  float* lse_s = ds_s + BQ * 33;                                // BQ, +inf where no key is seen
  float* delta_s = lse_s + BQ;                                  // BQ
  int32_t* first_s = reinterpret_cast<int32_t*>(delta_s + BQ);  // BQ: each query's visible keys,
  int32_t* last_s = first_s + BQ;                               // [first, last] (row_keys)

  const int lane = threadIdx.x % 32, row = threadIdx.x / 4, r = threadIdx.x % 4;
  const int k0 = a.kv_begin + static_cast<int>(blockIdx.x) * BK;
  const int k_count = imin(BK, a.kv_end - k0);
  const auto [b, h, hk, q_stride, kv_stride] = block_head(a, D);
  const int64_t kv_offset = (static_cast<int64_t>(b) * a.kv_seq + k0) * kv_stride + hk * D;  // row k0 of (b, hk)
  const int64_t q_offset = static_cast<int64_t>(b) * a.q_seq * q_stride + h * D;             // row 0 of (b, h)
  const int64_t lse_offset = (static_cast<int64_t>(b) * a.heads + h) * a.q_seq;
  const float* q = static_cast<const float*>(a.q);
  const float* dout = static_cast<const float*>(p.dout);

  const bool masked = has_mask(a);
  int k_lo = 0, k_hi = 0;
  if (masked) position_range(a.k_pos, k0, k_count, lane, k_lo, k_hi);
  for (int i = threadIdx.x; i < BK * D; i += 128) {
    const int rr = i / D, d = i % D;
    const bool ok = rr < k_count;
    k_s[rr * pitch + d] = ok ? static_cast<const float*>(a.k)[kv_offset + rr * kv_stride + d] : 0.f;
    v_s[rr * pitch + d] = ok ? static_cast<const float*>(a.v)[kv_offset + rr * kv_stride + d] : 0.f;
  }
  float dk[kDims], dv[kDims];
  RINGLAB_UNROLL
  for (int c = 0; c < kDims; ++c) dk[c] = dv[c] = 0.f;

  bool touched = false;
  const int n_tiles = (a.q_end - a.q_begin + BQ - 1) / BQ;
  for (int tile = 0; tile < n_tiles; ++tile) {
    const int q0 = a.q_begin + tile * BQ, q_count = imin(BQ, a.q_end - q0);
    const TileSpans q_spans = masked ? tile_spans(a, q0, q_count, lane) : TileSpans{};
    const int kind = classify_tile(masked, a.skip_masked_tiles, q_spans, k_lo, k_hi);
    if (kind == kTileSkip) continue;
    touched = true;
    sync_site<1>();  // the previous tile is no longer read
    for (int i = threadIdx.x; i < BQ * D; i += 128) {
      const int rr = i / D, d = i % D;
      const bool ok = rr < q_count;
      q_s[rr * pitch + d] = ok ? q[q_offset + (q0 + rr) * q_stride + d] : 0.f;
      do_s[rr * pitch + d] = ok ? dout[q_offset + (q0 + rr) * q_stride + d] : 0.f;
    }
    if (threadIdx.x < BQ) {
      const int rr = threadIdx.x;
      const bool ok = rr < q_count;
      const float lse = ok ? p.lse[lse_offset + q0 + rr] : INFINITY;
      lse_s[rr] = lse == -INFINITY ? INFINITY : lse;
      delta_s[rr] = ok ? p.delta[lse_offset + q0 + rr] : 0.f;
      const KeySpan keys = ok && masked ? row_keys(a, q0 + rr) : KeySpan{};
      first_s[rr] = keys.first;
      last_s[rr] = keys.last;
    }
    sync_site<2>();  // Q, dO, lse, delta and positions are in place
    // Phase 1: P and dS for query `row`, keys r + 4c.
    RINGLAB_UNROLL
    for (int c = 0; c < BK / 4; ++c) {
      const int j = r + 4 * c;
      float qk = 0.f, dov = 0.f;
      for (int d = 0; d < D; ++d) {
        qk += q_s[row * pitch + d] * k_s[j * pitch + d];
        dov += do_s[row * pitch + d] * v_s[j * pitch + d];
      }
      const bool visible =
          j < k_count && (kind != kTilePartial || KeySpan{first_s[row], last_s[row]}.contains(a.k_pos[k0 + j]));
      const float prob = visible ? expf(qk * a.scale - lse_s[row]) : 0.f;
      p_s[row * 33 + j] = prob;
      ds_s[row * 33 + j] = prob * (dov - delta_s[row]);
    }
    sync_site<3>();  // P and dS are complete: phase 2 reads other warps' queries
    // Phase 2: dV, dK of key `row`.
    RINGLAB_UNROLL
    for (int c = 0; c < kDims; ++c) {
      const int d = r + 4 * c;
      if (d < D) {
        float acc_v = dv[c], acc_k = dk[c];
        for (int i = 0; i < BQ; ++i) {
          acc_v += p_s[i * 33 + row] * do_s[i * pitch + d];
          acc_k += ds_s[i * 33 + row] * q_s[i * pitch + d];
        }
        dv[c] = acc_v;
        dk[c] = acc_k;
      }
    }
    // Phase 3: dQ of query `row`.
    if (row < q_count) {
      RINGLAB_UNROLL
      for (int c = 0; c < kDims; ++c) {
        const int d = r + 4 * c;
        if (d < D) {
          float acc = 0.f;
          for (int j = 0; j < BK; ++j) acc += ds_s[row * 33 + j] * k_s[j * pitch + d];
          atomic_add(p.dq + q_offset + (q0 + row) * q_stride + d, a.scale * acc);
        }
      }
    }
  }
  if (!touched || row >= k_count) return;
  RINGLAB_UNROLL
  for (int c = 0; c < kDims; ++c) {
    const int d = r + 4 * c;
    if (d < D) {
      atomic_add(p.dk + kv_offset + row * kv_stride + d, a.scale * dk[c]);
      atomic_add(p.dv + kv_offset + row * kv_stride + d, dv[c]);
    }
  }
}

}  // namespace ringlab::gpu
