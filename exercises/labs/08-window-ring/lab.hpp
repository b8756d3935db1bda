// Lab 08 — the window-bounded ring: a causal ring forward under a sliding window over packed
// documents, contiguous layout. What you implement and what you may call.
//
// Shapes as in lab 03: B batch, n = S/P tokens per rank, H / HKV heads, D head dimension, P ranks.
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

namespace ringlab::lab08 {

// The mask of this lab, on global token positions: a query at position i sees the key at j when
//   j and i lie in the same document  &&  j <= i (causal)  &&  i - j < W (when W > 0)
// so a window of W keys counts the query's own: it reaches W - 1 tokens back.
struct WindowMask {
  int64_t window = 0;                    // W; 0 = no window
  std::vector<int64_t> document_starts;  // 0 = s_0 < s_1 < ... < s_N = S: document d is [s_d, s_{d+1})
};

// What one rank starts with. The layout is contiguous: rank r holds positions r n .. r n + n - 1.
struct RankInputs {
  Tensor<float> q;                              // (B, n, H, D): this rank's queries, at positions[rank]
  Tensor<float> k, v;                           // (B, n, HKV, D): this rank's keys and values
  std::vector<std::vector<int64_t>> positions;  // [P][n]: every rank's global positions (ascending)
  WindowMask mask;
};

// TODO 1 (your file): how many hops must K/V blocks make around a ring of `ranks` ranks, blocks of
// `block` tokens each, so that every rank has seen every block its queries can see under a causal
// window of `window` keys (0 = no window)? A ring never needs more than ranks - 1 hops.
// (Documents can only hide keys: this count ignores them.)
int64_t window_hops(int64_t ranks, int64_t block, int64_t window);

// TODO 2 (your file): whether the query at global position `query` sees the key at `key`.
bool visible(const WindowMask& mask, int64_t query, int64_t key);

// Provided. Which keys of one block each query sees, by your `visible`: the positions it was made
// for, and visible[i * k_pos.size() + j] for query q_pos[i] and key k_pos[j].
struct BlockMask {
  std::vector<int64_t> q_pos, k_pos;
  std::vector<uint8_t> visible;
};
BlockMask block_mask(const WindowMask& mask, std::span<const int64_t> q_pos, std::span<const int64_t> k_pos);

// Provided. Attention of q (B, n, H, D) against ONE K/V block (B, m, HKV, D) under `mask`, as a
// partial result over that block: out (B, n, H, D) and lse (B, H, n); a query that sees no key of
// the block gets out = 0 and lse = -inf.
AttentionOutput<float> block_attention(const Tensor<float>& q, const Tensor<float>& k, const Tensor<float>& v,
                                       const BlockMask& mask);

// Provided. acc <- acc (+) part in log-sum-exp form (what you wrote in lab 03).
void merge_into(AttentionOutput<float>& acc, const AttentionOutput<float>& part);

// TODO 3 (your file): the ring forward that passes K/V only as far as the window needs, masks
// each block by `visible`, and merges the partial results. Returns out (B, n, H, D) and
// lse (B, H, n) over every key the rank's queries see.
AttentionOutput<float> ring_forward_window(Communicator& comm, const RankInputs& in);

}  // namespace ringlab::lab08
