// Lab 03 — the ring forward on the communicator API. What you implement and what you may call.
//
// Shapes (dimension letters as everywhere in ringlab): B batch, n = S/P tokens per rank, H query
// heads, HKV key/value heads, D head dimension, P ranks.
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

namespace ringlab::lab03 {

// What one rank starts with.
struct RankInputs {
  Tensor<float> q;                              // (B, n, H, D): this rank's queries, at positions[rank] (ascending)
  Tensor<float> k;                              // (B, n, HKV, D): this rank's keys, same positions
  Tensor<float> v;                              // (B, n, HKV, D)
  std::vector<std::vector<int64_t>> positions;  // [P][n]: every rank's global token positions
  bool causal = false;                          // causal mask by global position: key position <= query position
};

// Provided. Attention of queries q (at global positions q_pos) against ONE block of keys and values
// (at k_pos), as a partial result in log-sum-exp form over that block only:
//   out (B, n, H, D) = softmax over the block's visible keys, times v;
//   lse (B, H, n)    = log sum_j exp(q.k_j / sqrt(D)) over the block's visible keys
//                      (-inf, with out = 0, where a query sees no key of the block).
// The mask compares global positions, so pass the positions of the block you are computing on.
AttentionOutput<float> block_attention(const Tensor<float>& q, const Tensor<float>& k, const Tensor<float>& v,
                                       std::span<const int64_t> q_pos, std::span<const int64_t> k_pos, bool causal);

// TODO (your file): acc <- acc (+) part, row by row, for out (B, n, H, D) and lse (B, H, n):
//   lse = log(e^lse_a + e^lse_b),  out = out_a e^(lse_a - lse) + out_b e^(lse_b - lse).
// A -inf lse is the empty state ("no key seen yet", or a block that shows the row no key): it is
// the identity, and two empty sides give an empty row (out 0, lse -inf), never NaN. The grader
// calls it on its own too, on rows that are empty on one side or both (criterion empty-rows).
void merge_into(AttentionOutput<float>& acc, const AttentionOutput<float>& part);

// TODO (your file): the ring forward, run by every rank at once. Returns this rank's out
// (B, n, H, D) and lse (B, H, n) over ALL keys of all ranks. Pass K/V blocks around the ring
// with comm (send / recv / isend / irecv / sendrecv), one hop per step, and merge the partial
// results (out_i, lse_i) of the blocks with merge_into. Either direction round the ring is right,
// as long as each block is named by the rank it started on: sending to rank + 1, the block held
// at step t started on rank - t; sending to rank - 1, on rank + t.
AttentionOutput<float> ring_forward(Communicator& comm, const RankInputs& in);

}  // namespace ringlab::lab03
