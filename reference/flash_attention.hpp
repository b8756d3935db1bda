// Blockwise ("flash") attention on the CPU, forward and backward — the fast kernel every CPU
// executor runs, checked against exact_attention. Eigen GEMMs on (query tile x key tile) blocks,
// OpenMP over (batch, head, query tile) in the forward and over (batch, kv head, key chunk) in the
// backward, float32 storage and accumulation.
//
// Low-precision operands (KernelOptions::operands, bf16 / fp16): the rounding points of ringlab's
// tensor-core kernels (gpu/kernels/forward_fa2.cuh, backward_mma.cuh), whose mma takes 16-bit
// operands. The forward rounds P = exp(s - m) to the precision before O += P V (the row sum l
// adds the unrounded P, as the GPU's does); the backward computes dS = P o (dP - delta) from the
// unrounded P, then rounds P before dV += P^T dO and dS before dK += dS^T Q and dQ += dS K.
// Everything else stays float32: the scores, m, l, o, the LSE, delta and every accumulator. The
// inputs (q, k, v, dout) are the caller's to round, as the GPU's are stored in the precision.
//
// One call computes one *block* of a schedule: local query rows q_rows against key rows kv_rows
// under a mask, where the mask compares the global positions q_pos / k_pos of the rows. A ring
// step, a half block of the zig-zag layout or a whole single-rank attention are all one call.
//
// Determinism: every output element is produced by one task in a fixed order, whatever the
// number of threads, so results are bitwise identical from run to run and across thread counts.
#pragma once

#include <cstdint>
#include <span>

#include "reference/attention.hpp"
#include "reference/precision.hpp"
#include "reference/softmax_state.hpp"

namespace ringlab {

struct RowRange {
  int64_t begin = 0;
  int64_t end = 0;  // half-open
  int64_t size() const { return end - begin; }
  bool empty() const { return end <= begin; }
  friend bool operator==(const RowRange&, const RowRange&) = default;
};

struct KernelOptions {
  int threads = 0;                       // OpenMP threads for this call; 0 = the OpenMP default
  bool skip_masked_tiles = true;         // false: compute fully masked tiles too (--no-skip), same result
  Precision operands = Precision::fp32;  // bf16 / fp16: P and dS rounded before their GEMMs (above)
};

// The running accumulator of a rank's queries: SoftmaxState rows ordered (b, h, i) over the
// local query rows i, width D. Row index = (b * H + h) * Sq + i.
SoftmaxState<float> make_accumulator(int64_t batch, int64_t heads, int64_t q_rows, int64_t dim);

// Forward of one block, merged into the running accumulator (the online-softmax merge, in place).
// q: (B, Sq, H, D); k, v: (B, Sk, HKV, D); q_pos: Sq positions; k_pos: Sk positions.
void flash_forward_accumulate(const Tensor<float>& q, const Tensor<float>& k, const Tensor<float>& v,
                              std::span<const int64_t> q_pos, std::span<const int64_t> k_pos, RowRange q_rows,
                              RowRange kv_rows, const Mask& mask, SoftmaxState<float>& acc,
                              const KernelOptions& options = {});

// out (B, Sq, H, D) = o / l and lse (B, H, Sq) = m + log l from an accumulator.
// threads: OpenMP threads, 0 = the default (a rank of the simulator passes its own share).
AttentionOutput<float> finalize_accumulator(const SoftmaxState<float>& acc, int64_t batch, int64_t heads,
                                            int64_t q_rows, int64_t dim, int threads = 0);

// delta (B, H, Sq) = rowsum(dout o out), the backward's per-row constant.
Tensor<float> softmax_delta(const Tensor<float>& dout, const Tensor<float>& out, int threads = 0);

// Backward of one block, accumulated into dq (B, Sq, H, D) and dk, dv (B, Sk, HKV, D).
// lse and delta: (B, H, Sq) of the *whole* forward (all keys the queries see), so that
// P = exp(scale q.k - lse) is the final softmax restricted to this block.
void flash_backward_accumulate(const Tensor<float>& q, const Tensor<float>& k, const Tensor<float>& v,
                               const Tensor<float>& dout, const Tensor<float>& lse, const Tensor<float>& delta,
                               std::span<const int64_t> q_pos, std::span<const int64_t> k_pos, RowRange q_rows,
                               RowRange kv_rows, const Mask& mask, Tensor<float>& dq, Tensor<float>& dk,
                               Tensor<float>& dv, const KernelOptions& options = {});

// One-shot forms over all rows: single-rank flash attention and its backward.
AttentionOutput<float> flash_attention(const Tensor<float>& q, const Tensor<float>& k, const Tensor<float>& v,
                                       const Mask& mask, std::span<const int64_t> q_pos = {},
                                       std::span<const int64_t> k_pos = {}, const KernelOptions& options = {});
AttentionGrads<float> flash_attention_backward(const Tensor<float>& q, const Tensor<float>& k, const Tensor<float>& v,
                                               const AttentionOutput<float>& forward, const Tensor<float>& dout,
                                               const Mask& mask, std::span<const int64_t> q_pos = {},
                                               std::span<const int64_t> k_pos = {}, const KernelOptions& options = {});

}  // namespace ringlab
