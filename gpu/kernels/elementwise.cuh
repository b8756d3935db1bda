// The small kernels around attention (launched from elementwise.cu): accumulator init and
// finalize, the backward's delta, iota, fp32 adds, and the row copies the all-to-alls are made
// of. Grid-stride loops, memory-bound and simple on purpose; any grid size is correct.
#pragma once

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

// One thread per (b, i, h, d) output element; the row's d == 0 thread writes lse.
RINGLAB_KERNEL void finalize_kernel(const float* max, const float* sum, const float* acc_out, int batch, int heads,
                                    int q_seq, int dim, float* out, float* lse) {
  const int64_t total = static_cast<int64_t>(batch) * q_seq * heads * dim;
  for (int64_t e = global_thread(); e < total; e += grid_threads()) {
    const int d = static_cast<int>(e % dim);
    const int h = static_cast<int>(e / dim % heads);
    const int64_t i = e / dim / heads % q_seq;
    const int64_t b = e / dim / heads / q_seq;
    const int64_t row = (b * heads + h) * q_seq + i;  // accumulator row (b, h, i), also lse's index
    const float m = max[row], l = sum[row];
    const bool empty = m == -INFINITY || l == 0.f;
    out[e] = empty ? 0.f : acc_out[row * dim + d] / l;
    if (d == 0) lse[row] = empty ? -INFINITY : m + logf(l);
  }
}

// One warp per (b, i, h) row of dout and out (B, S, H, D); delta is (B, H, S).
template <class T>
RINGLAB_KERNEL void delta_kernel(const T* dout, const float* out, int batch, int q_seq, int heads, int dim,
                                 float* delta) {
  const int64_t rows = static_cast<int64_t>(batch) * q_seq * heads;
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int64_t warps = grid_threads() / 32;
  for (int64_t row = global_thread() / 32; row < rows; row += warps) {  // the same row for a whole warp
    float acc = 0.f;
    for (int d = lane; d < dim; d += 32) acc += dev::to_float(dout[row * dim + d]) * out[row * dim + d];
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

// E: an element of element_bytes (uint16_t or float); the copy is bitwise.
template <class E>
RINGLAB_KERNEL void copy_token_rows_kernel(RowCopy c) {
  const int64_t total = static_cast<int64_t>(c.batch) * c.count * c.head_count * c.dim;
  const E* src = static_cast<const E*>(c.src);
  E* dst = static_cast<E*>(c.dst);
  for (int64_t e = global_thread(); e < total; e += grid_threads()) {
    const int d = static_cast<int>(e % c.dim);
    const int h = static_cast<int>(e / c.dim % c.head_count);
    const int i = static_cast<int>(e / c.dim / c.head_count % c.count);
    const int64_t b = e / c.dim / c.head_count / c.count;
    const int64_t si = c.src_index ? c.src_index[i] : i, di = c.dst_index ? c.dst_index[i] : i;
    dst[((b * c.dst_rows + di) * c.dst_heads + c.dst_head0 + h) * c.dim + d] =
        src[((b * c.src_rows + si) * c.src_heads + c.src_head0 + h) * c.dim + d];
  }
}

RINGLAB_KERNEL void copy_lse_rows_kernel(RowCopy c) {
  const int64_t total = static_cast<int64_t>(c.batch) * c.head_count * c.count;
  const float* src = static_cast<const float*>(c.src);
  float* dst = static_cast<float*>(c.dst);
  for (int64_t e = global_thread(); e < total; e += grid_threads()) {
    const int i = static_cast<int>(e % c.count);
    const int h = static_cast<int>(e / c.count % c.head_count);
    const int64_t b = e / c.count / c.head_count;
    const int64_t si = c.src_index ? c.src_index[i] : i, di = c.dst_index ? c.dst_index[i] : i;
    dst[(b * c.dst_heads + c.dst_head0 + h) * c.dst_rows + di] =
        src[(b * c.src_heads + c.src_head0 + h) * c.src_rows + si];
  }
}

}  // namespace ringlab::gpu
