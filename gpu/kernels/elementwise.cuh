// The small kernels around attention (launched from elementwise.cu): accumulator init and
// finalize, the backward's delta, iota, fp32 adds, and the row copies the all-to-alls are made
// of. Grid-stride loops, memory-bound and simple on purpose; any grid size is correct.
#pragma once

#include <cstdint>
#include <type_traits>

#include "gpu/kernels/attention_kernels.hpp"
#include "gpu/kernels/primitives.cuh"

namespace ringlab::gpu {

RINGLAB_DEVICE int64_t global_thread() { return blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; }
RINGLAB_DEVICE int64_t grid_threads() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

RINGLAB_KERNEL void init_accumulator_kernel(float* max, float* sum, float* out, int64_t rows, int dim) {
  for (int64_t i = global_thread(); i < rows * dim; i += grid_threads()) {
    out[i] = 0.f;
    if (i < rows) {
      max[i] = -INFINITY;
      sum[i] = 0.f;
    }
  }
}

// One thread per (b, i, h, d) output element; the row's d == 0 thread writes lse. out is stored in
// O, the input dtype (rounded to nearest even); lse stays fp32.
template <class O>
RINGLAB_KERNEL void finalize_kernel(const float* max, const float* sum, const float* acc_out, int batch, int heads,
                                    int q_seq, int dim, O* out, float* lse) {
  const int64_t total = static_cast<int64_t>(batch) * q_seq * heads * dim;
  for (int64_t e = global_thread(); e < total; e += grid_threads()) {
    const int d = static_cast<int>(e % dim);
    const int h = static_cast<int>(e / dim % heads);
    const int64_t i = e / dim / heads % q_seq;
    const int64_t b = e / dim / heads / q_seq;
    const int64_t row = (b * heads + h) * q_seq + i;  // accumulator row (b, h, i), also lse's index
    const float m = max[row], l = sum[row];
    const bool empty = m == -INFINITY || l == 0.f;
    out[e] = dev::from_float<O>(empty ? 0.f : acc_out[row * dim + d] / l);
    if (d == 0) lse[row] = empty ? -INFINITY : m + logf(l);
  }
}

// One warp per (b, i, h) row of dout and out (B, S, H, D), both in T; delta is (B, H, S), fp32.
// As in FlashAttention, delta is computed from out as stored (16-bit for bf16 / fp16), not from the
// fp32 values before finalize rounded them.
template <class T>
RINGLAB_KERNEL void delta_kernel(const T* dout, const T* out, int batch, int q_seq, int heads, int dim, float* delta) {
  const int64_t rows = static_cast<int64_t>(batch) * q_seq * heads;
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int64_t warps = grid_threads() / 32;
  for (int64_t row = global_thread() / 32; row < rows; row += warps) {  // the same row for a whole warp
    float acc = 0.f;
    for (int d = lane; d < dim; d += 32) acc += dev::to_float(dout[row * dim + d]) * dev::to_float(out[row * dim + d]);
    RINGLAB_UNROLL
    for (int mask = 16; mask > 0; mask >>= 1) acc += dev::shfl_xor(acc, mask);
    if (lane == 0) {
      const int h = static_cast<int>(row % heads);
      const int64_t i = row / heads % q_seq, b = row / heads / q_seq;
      delta[(b * heads + h) * q_seq + i] = acc;
    }
  }
}

RINGLAB_KERNEL void iota_kernel(int32_t* positions, int64_t count) {
  for (int64_t i = global_thread(); i < count; i += grid_threads()) positions[i] = static_cast<int32_t>(i);
}

RINGLAB_KERNEL void add_kernel(float* to, const float* from, int64_t count) {
  for (int64_t i = global_thread(); i < count; i += grid_threads()) to[i] += from[i];
}

namespace dev {

// A grid-stride position in a mixed-radix index, most significant digit first (e.g. b, i, h, chunk):
// the thread's linear index and the grid's stride are each split into digits once, then the loop
// adds the stride digit by digit with carries, so the loop body divides nothing (a 64-bit divide is
// a long instruction sequence on the GPU). Every radix must be >= 1.
template <int N>
struct GridDigits {
  int64_t radix[N], at[N], step[N];

  RINGLAB_DEVICE explicit GridDigits(const int64_t (&radices)[N]) {
    RINGLAB_UNROLL
    for (int k = 0; k < N; ++k) radix[k] = radices[k];
    split(global_thread(), at);
    split(grid_threads(), step);
  }
  RINGLAB_DEVICE bool valid() const { return at[0] < radix[0]; }
  RINGLAB_DEVICE void advance() {
    int64_t carry = 0;
    RINGLAB_UNROLL
    for (int k = N - 1; k > 0; --k) {  // at[k], step[k] < radix[k]: one carry at most
      at[k] += step[k] + carry;
      carry = at[k] >= radix[k] ? 1 : 0;
      at[k] -= carry * radix[k];
    }
    at[0] += step[0] + carry;
  }

 private:
  RINGLAB_DEVICE void split(int64_t x, int64_t (&digits)[N]) const {
    RINGLAB_UNROLL
    for (int k = N - 1; k > 0; --k) {
      digits[k] = x % radix[k];
      x /= radix[k];
    }
    digits[0] = x;  // may exceed radix[0]: past the end
  }
};

// One (b, i, h) row segment of D elements is `chunks` words V; the copy moves whole words.
template <class V>
RINGLAB_DEVICE void copy_token_rows_as(const RowCopy& c, int chunks) {
  const V* src = static_cast<const V*>(c.src);
  V* dst = static_cast<V*>(c.dst);
  for (GridDigits<4> g({c.batch, c.count, c.head_count, chunks}); g.valid(); g.advance()) {
    const int64_t b = g.at[0], i = g.at[1], h = g.at[2], chunk = g.at[3];
    const int64_t si = c.src_index ? c.src_index[i] : i, di = c.dst_index ? c.dst_index[i] : i;
    dst[((b * c.dst_rows + di) * c.dst_heads + c.dst_head0 + h) * chunks + chunk] =
        src[((b * c.src_rows + si) * c.src_heads + c.src_head0 + h) * chunks + chunk];
  }
}

// The widest word (16, 8 or 4 bytes, else one element) that divides a row segment's bytes and
// aligns both bases: every row segment then starts on a word boundary, since its offset is a
// multiple of the segment's bytes. bf16 with D = 64 or 128 moves 16 bytes per thread.
RINGLAB_DEVICE int copy_word_bytes(const RowCopy& c, int row_bytes) {
  const auto bases = reinterpret_cast<uintptr_t>(c.src) | reinterpret_cast<uintptr_t>(c.dst);
  for (int word = 16; word >= 4; word /= 2) {
    if (row_bytes % word == 0 && bases % word == 0) return word;
  }
  return 0;
}

}  // namespace dev

// E: an element of element_bytes (uint16_t or float); the copy is bitwise, in the widest aligned
// words (dev::copy_word_bytes) and without divisions in the loop (dev::GridDigits).
template <class E>
RINGLAB_KERNEL void copy_token_rows_kernel(RowCopy c) {
  if (static_cast<int64_t>(c.batch) * c.count * c.head_count * c.dim == 0) return;
  const int row_bytes = c.dim * static_cast<int>(sizeof(E));
  switch (dev::copy_word_bytes(c, row_bytes)) {
    case 16: return dev::copy_token_rows_as<uint4>(c, row_bytes / 16);
    case 8: return dev::copy_token_rows_as<uint2>(c, row_bytes / 8);
    case 4: return dev::copy_token_rows_as<unsigned>(c, row_bytes / 4);
    default: return dev::copy_token_rows_as<E>(c, c.dim);
  }
}

RINGLAB_KERNEL void copy_lse_rows_kernel(RowCopy c) {
  if (static_cast<int64_t>(c.batch) * c.head_count * c.count == 0) return;
  const float* src = static_cast<const float*>(c.src);
  float* dst = static_cast<float*>(c.dst);
  for (dev::GridDigits<3> g({c.batch, c.head_count, c.count}); g.valid(); g.advance()) {
    const int64_t b = g.at[0], h = g.at[1], i = g.at[2];
    const int64_t si = c.src_index ? c.src_index[i] : i, di = c.dst_index ? c.dst_index[i] : i;
    dst[(b * c.dst_heads + c.dst_head0 + h) * c.dst_rows + di] =
        src[(b * c.src_heads + c.src_head0 + h) * c.src_rows + si];
  }
}

}  // namespace ringlab::gpu
