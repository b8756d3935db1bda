// Lab 05 — Ulysses: attention by all-to-all. What you implement and what you may call.
//
// Shapes: B batch, S tokens, n = S/P per rank, H query heads, HKV key/value heads, D head dim.
// Rank r starts with tokens [r n, (r+1) n) and all heads. One all-to-all turns that into all S
// tokens for H/P of the heads (rank j gets heads [j H/P, (j+1) H/P), and K/V heads
// [j HKV/P, (j+1) HKV/P)); every rank then attends its heads over the whole sequence, and a
// second all-to-all brings out (and lse) back to sequence-sharded. H and HKV divide by P.
// Not yours to call here: the library's own attention and merge functions do this lab's work. The
// grader refuses a submission that names them (a member, written `.name`, is refused only as a
// member: your own free function may share its name).
// grader-refuses: exact_attention exact_attention_backward exact_block_backward flash_attention
// grader-refuses: flash_attention_backward flash_forward_accumulate flash_backward_accumulate
// grader-refuses: merge_lse_form merge_lse_row softmax_state_of SoftmaxState .merge_row

#pragma once

#include <cstdint>
#include <vector>

#include "exercises/labs/common/lab_support.hpp"
#include "reference/attention.hpp"
#include "sim/ranks/communicator.hpp"

namespace ringlab::lab05 {

struct RankInputs {
  Tensor<float> q;      // (B, n, H, D): tokens [r n, (r+1) n), all heads
  Tensor<float> k, v;   // (B, n, HKV, D)
  bool causal = false;  // mask by global position (token order is global after the all-to-all)
};

// Provided. Attention of the heads this rank holds over all S tokens, in global token order:
// q (B, S, H/P, D), k and v (B, S, HKV/P, D) -> out (B, S, H/P, D), lse (B, H/P, S).
AttentionOutput<float> local_attention(const Tensor<float>& q, const Tensor<float>& k, const Tensor<float>& v,
                                       bool causal);

// TODO (your file): all-to-all q, k, v to head-sharded, local_attention, all-to-all out and lse
// back. Returns this rank's out (B, n, H, D) and lse (B, H, n). comm.all_to_all(input) takes P
// equal chunks (chunk j goes to rank j) and returns P chunks (chunk i came from rank i).
AttentionOutput<float> ulysses_attention(Communicator& comm, const RankInputs& in);

}  // namespace ringlab::lab05
