// fp32 forward of one attention block on the CUDA cores — the path for tight correctness checks
// (the tolerances of reference/compare.hpp's fp32_tolerance), any D up to 128.
//
// A block of 128 threads owns 32 query rows of one (batch, head): 4 threads per row, each holding
// a quarter of the row's output dimensions (d = r, r + 4, ...). Key/value tiles of 32 rows are
// staged in shared memory (rows padded to D + 1 floats against bank conflicts). Per tile:
//     scores    each thread computes 8 of its row's 32 scores (keys r, r + 4, ...), masked
//     softmax   row max and sum across the row's 4 lanes (shuffles); m, l rescaled as in the
//               reference kernel; probabilities to shared memory
//     O         o = o e^{m-m'} + sum_j p_j v_j for the thread's dimensions
// expf, not the fast approximation: this path is the precise one.
#pragma once

#include "gpu/kernels/kernel_params.hpp"
#include "gpu/kernels/primitives.cuh"

namespace ringlab::gpu {

struct ForwardFp32Tiles {
  static constexpr int kThreads = 128;
  static constexpr int kBlockQ = 32;
  static constexpr int kBlockK = 32;
  static constexpr int kMaxDim = 128;
  static constexpr int kDimsPerThread = kMaxDim / 4;
  static constexpr int smem_bytes(int dim) { return (3 * 32 * (dim + 1) + 32 * 33) * 4; }
  static int q_tiles(const AttentionParams& a) { return (a.q_end - a.q_begin + kBlockQ - 1) / kBlockQ; }
};

RINGLAB_KERNEL void RINGLAB_LAUNCH_BOUNDS(128) forward_fp32_kernel(ForwardParams p) {
  using namespace dev;
  using Tiles = ForwardFp32Tiles;
  constexpr int BQ = Tiles::kBlockQ, BK = Tiles::kBlockK, kDims = Tiles::kDimsPerThread;
  const AttentionParams& a = p.a;
  const int D = a.dim, pitch = D + 1;
  RINGLAB_DYNAMIC_SMEM(smem_raw);
  float* q_s = reinterpret_cast<float*>(smem_raw);  // (BQ, D + 1)
  float* k_s = q_s + BQ * pitch;                    // (BK, D + 1)
  float* v_s = k_s + BK * pitch;                    // (BK, D + 1)
  float* p_s = v_s + BK * pitch;                    // (BQ, 33) probabilities of the tile

  const int lane = threadIdx.x % 32, row = threadIdx.x / 4, r = threadIdx.x % 4;
  const int q0 = a.q_begin + static_cast<int>(blockIdx.x) * BQ;
  const int q_count = imin(BQ, a.q_end - q0);
  const auto [b, h, hk, q_stride, kv_stride] = block_head(a, D);
  const float* q_base = static_cast<const float*>(a.q) + ((static_cast<int64_t>(b) * a.q_seq + q0) * a.heads + h) * D;
  const float* k_base = static_cast<const float*>(a.k) + static_cast<int64_t>(b) * a.kv_seq * kv_stride + hk * D;
  const float* v_base = static_cast<const float*>(a.v) + static_cast<int64_t>(b) * a.kv_seq * kv_stride + hk * D;

  const bool masked = has_mask(a);
  const TileSpans q_spans = masked ? tile_spans(a, q0, q_count, lane) : TileSpans{};
  const bool valid = row < q_count;
  const KeySpan keys = valid && masked ? row_keys(a, q0 + row) : KeySpan{};
  const int64_t acc_row = (static_cast<int64_t>(b) * a.heads + h) * a.q_seq + q0 + row;

  for (int i = threadIdx.x; i < BQ * D; i += 128) {
    const int rr = i / D, d = i % D;
    q_s[rr * pitch + d] = rr < q_count ? q_base[rr * q_stride + d] : 0.f;
  }
  float m = -INFINITY, l = 0.f, o[kDims];
  RINGLAB_UNROLL
  for (int c = 0; c < kDims; ++c) o[c] = 0.f;
  if (valid) {
    m = p.acc_max[acc_row];
    l = p.acc_sum[acc_row];
    RINGLAB_UNROLL
    for (int c = 0; c < kDims; ++c)
      if (r + 4 * c < D) o[c] = p.acc_out[acc_row * D + r + 4 * c];
  }

  bool touched = false;
  const int n_tiles = (a.kv_end - a.kv_begin + BK - 1) / BK;
  for (int tile = 0; tile < n_tiles; ++tile) {
    const int k0 = a.kv_begin + tile * BK, k_count = imin(BK, a.kv_end - k0);
    int k_lo = 0, k_hi = 0;
    if (masked) position_range(a.k_pos, k0, k_count, lane, k_lo, k_hi);
    const int kind = classify_tile(masked, a.skip_masked_tiles, q_spans, k_lo, k_hi);
    if (kind == kTileSkip) continue;
    touched = true;
    sync_site<1>();  // the previous tile's K, V and P are no longer read
    for (int i = threadIdx.x; i < BK * D; i += 128) {
      const int rr = i / D, d = i % D;
      const bool ok = rr < k_count;
      k_s[rr * pitch + d] = ok ? k_base[(k0 + rr) * kv_stride + d] : 0.f;
      v_s[rr * pitch + d] = ok ? v_base[(k0 + rr) * kv_stride + d] : 0.f;
    }
    sync_site<2>();  // K and V are in place
    // Scores of keys j = r + 4c.
    float s[BK / 4];
    float tile_max = -INFINITY;
    RINGLAB_UNROLL
    for (int c = 0; c < BK / 4; ++c) {
      const int j = r + 4 * c;
      float dot = 0.f;
      for (int d = 0; d < D; ++d) dot += q_s[row * pitch + d] * k_s[j * pitch + d];
      const bool visible = j < k_count && (kind != kTilePartial || keys.contains(a.k_pos[k0 + j]));
      s[c] = visible ? dot * a.scale : -INFINITY;
      tile_max = fmaxf(tile_max, s[c]);
    }
    tile_max = fmaxf(tile_max, shfl_xor(tile_max, 1));
    tile_max = fmaxf(tile_max, shfl_xor(tile_max, 2));
    const float m_new = fmaxf(m, tile_max);
    const float shift = m_new == -INFINITY ? 0.f : m_new;
    const float alpha = expf(m - shift);
    float sum = 0.f;
    RINGLAB_UNROLL
    for (int c = 0; c < BK / 4; ++c) {
      const float prob = expf(s[c] - shift);
      p_s[row * 33 + r + 4 * c] = prob;
      sum += prob;
    }
    sum += shfl_xor(sum, 1);
    sum += shfl_xor(sum, 2);
    m = m_new;
    l = l * alpha + sum;
    // A row's P is written and read by its own 4 threads, all in one warp (rows 8w..8w+7): no other
    // warp reads it, so this barrier only orders the quad's lanes. The emulated tests delete it
    // harmlessly (there the shuffles above order the lanes; on the GPU they are no memory fence,
    // so a __syncwarp() would have to replace it).
    sync_site<3>();
    RINGLAB_UNROLL
    for (int c = 0; c < kDims; ++c) {
      const int d = r + 4 * c;
      if (d < D) {
        float acc = o[c] * alpha;
        for (int j = 0; j < BK; ++j) acc += p_s[row * 33 + j] * v_s[j * pitch + d];
        o[c] = acc;
      }
    }
  }
  if (!touched || !valid) return;
  if (r == 0) {
    p.acc_max[acc_row] = m;
    p.acc_sum[acc_row] = l;
  }
  RINGLAB_UNROLL
  for (int c = 0; c < kDims; ++c)
    if (r + 4 * c < D) p.acc_out[acc_row * D + r + 4 * c] = o[c];
}

}  // namespace ringlab::gpu
