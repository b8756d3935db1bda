// Lab 06 — the causal-skip plan: a causal ring forward that skips fully masked blocks. What you
// implement and what you may call.
//
// Shapes as in lab 03: B batch, n = S/P tokens per rank, H / HKV heads, D head dimension.
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

namespace ringlab::lab06 {

struct RankInputs {
  Tensor<float> q;                              // (B, n, H, D): this rank's queries, at positions[rank] (ascending)
  Tensor<float> k, v;                           // (B, n, HKV, D)
  std::vector<std::vector<int64_t>> positions;  // [P][n]: every rank's global positions (any layout)
};

// How a block of queries at q_pos must be computed against keys at k_pos under the causal mask
// (a key is visible when its position <= the query's):
enum class BlockWork {
  skip,    // no pair is visible: no kernel call at all
  full,    // every pair is visible: compute without the mask
  masked,  // some pairs are visible: compute with the mask
};

// TODO 1 (your file): classify a block. Positions are ascending.
BlockWork classify_block(std::span<const int64_t> q_pos, std::span<const int64_t> k_pos);

// Provided. Attention of q against one K/V block as (out, lse) over that block (lab 03's form);
// `mask` applies the causal mask by position; without it every pair counts (right only for a
// full block, and cheaper: a real kernel skips the mask arithmetic).
AttentionOutput<float> block_attention(const Tensor<float>& q, const Tensor<float>& k, const Tensor<float>& v,
                                       std::span<const int64_t> q_pos, std::span<const int64_t> k_pos, bool mask);

// Provided. acc <- acc (+) part in log-sum-exp form (what you wrote in lab 03).
void merge_into(AttentionOutput<float>& acc, const AttentionOutput<float>& part);

// TODO 2 (your file): the causal ring forward that computes each block as classify_block says,
// skipping the fully masked ones - and still passes every K/V block on, since the next rank may
// need it. Returns out (B, n, H, D) and lse (B, H, n) over all keys.
AttentionOutput<float> ring_forward_skip(Communicator& comm, const RankInputs& in);

}  // namespace ringlab::lab06
