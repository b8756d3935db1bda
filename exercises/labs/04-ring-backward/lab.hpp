// Lab 04 — the ring backward with correct dK/dV travel. What you implement and what you may call.
//
// Shapes: B batch, n = S/P tokens per rank, H query heads, HKV key/value heads, D head dimension.
// Not yours to call here: the library's own attention and merge functions do this lab's work. The
// grader refuses a submission that names them (a member, written `.name`, is refused only as a
// member: your own free function may share its name).
// grader-refuses: exact_attention exact_attention_backward exact_block_backward flash_attention
// grader-refuses: flash_attention_backward flash_forward_accumulate flash_backward_accumulate
// grader-refuses: merge_lse_form merge_lse_row softmax_state_of SoftmaxState .merge_row

#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "exercises/labs/common/lab_support.hpp"
#include "reference/attention.hpp"
#include "sim/ranks/communicator.hpp"

namespace ringlab::lab04 {

// What one rank starts with: its own block of the forward's inputs and results.
struct RankInputs {
  Tensor<float> q;                              // (B, n, H, D)
  Tensor<float> k, v;                           // (B, n, HKV, D): this rank's K/V block
  Tensor<float> out;                            // (B, n, H, D): the forward's output for this rank's queries
  Tensor<float> lse;                            // (B, H, n): the forward's log-sum-exp over ALL keys
  Tensor<float> dout;                           // (B, n, H, D): the gradient arriving at out
  std::vector<std::vector<int64_t>> positions;  // [P][n]: every rank's global positions
  bool causal = false;
};

struct RankGrads {
  Tensor<float> dq;  // (B, n, H, D): gradient of this rank's queries
  Tensor<float> dk;  // (B, n, HKV, D): gradient of this rank's OWN K block (summed over all ranks' queries)
  Tensor<float> dv;  // (B, n, HKV, D)
};

// Provided. delta = rowsum(dout o out), (B, H, n): the backward's per-row constant.
Tensor<float> softmax_delta(const Tensor<float>& dout, const Tensor<float>& out);

// Provided. The backward of q (at q_pos) against ONE K/V block (at k_pos), given the forward's
// full lse and delta of these queries: ADDS this block's share to dq (B, n, H, D) and this
// block's gradient to dk, dv (B, m, HKV, D) — the dK/dV of the block you pass, computed from
// your queries only. Mask by global positions, as in the forward.
void block_backward(const Tensor<float>& q, const Tensor<float>& k, const Tensor<float>& v, const Tensor<float>& dout,
                    const Tensor<float>& lse, const Tensor<float>& delta, std::span<const int64_t> q_pos,
                    std::span<const int64_t> k_pos, bool causal, Tensor<float>& dq, Tensor<float>& dk,
                    Tensor<float>& dv);

// TODO (your file): the ring backward. K/V blocks travel around the ring as in the forward; dq
// accumulates locally; the dK/dV of a block gets a contribution from every rank's queries, so an
// accumulator must travel with the block and end up back on the block's owner.
RankGrads ring_backward(Communicator& comm, const RankInputs& in);

}  // namespace ringlab::lab04
