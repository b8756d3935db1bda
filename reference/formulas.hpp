// FLOP, byte and memory formulas — the closed forms the plans, the cost model and the exercises
// are checked against. Everything counts exactly (integers) where the quantity is a count.
//
// Conventions: a "pair" is one visible (query, key) pair of one (batch, head). Forward attention
// does two GEMMs per pair (q.k and p.v), 2 D FLOPs each: 4 D FLOPs per pair. The backward
// recomputes q.k and does four more GEMMs (dP = dO V^T, dV += P^T dO, dQ += dS K, dK += dS^T Q):
// 10 D FLOPs per pair, the usual 2.5x of the forward. exp and the elementwise work are not counted.
#pragma once

#include <cstdint>

#include "reference/attention.hpp"

namespace ringlab {

inline constexpr int64_t kForwardFlopsPerPairPerDim = 4;
inline constexpr int64_t kBackwardFlopsPerPairPerDim = 10;

// Visible pairs of one (batch, head) over a full S x S attention.
int64_t full_pairs(int64_t seq, bool causal);

// FLOPs of `pairs` visible pairs for all B x H (batch, head) combinations.
double forward_flops(int64_t pairs, const AttentionDims& dims);
double backward_flops(int64_t pairs, const AttentionDims& dims);

// Bytes of the materialised attention matrix: B H Sq Sk elements.
double attention_matrix_bytes(int64_t batch, int64_t heads, int64_t q_rows, int64_t k_rows, int64_t element_bytes);

// Bytes of one rank's K and V for `tokens` tokens: 2 tokens HKV D B elements.
double kv_bytes(int64_t tokens, const AttentionDims& dims, int64_t element_bytes);
// Bytes of one rank's Q (or out, dout, dq) for `tokens` tokens: tokens H D B elements.
double q_bytes(int64_t tokens, const AttentionDims& dims, int64_t element_bytes);

// Bytes each rank sends in one attention forward, by algorithm (all ranks send the same):
//   ring:       P-1 hops of its K/V block                         = (P-1) kv_bytes(S/P)
//   all-gather: ring all-gather of K/V, same volume as the ring   = (P-1) kv_bytes(S/P)
//   ulysses:    all-to-all of q, k, v in and out back; each keeps 1/P of its shard
//                                                                 = (P-1)/P (2 q_bytes + kv_bytes)(S/P)
double ring_forward_send_bytes(const AttentionDims& dims, int64_t ranks, int64_t element_bytes);
double ulysses_forward_send_bytes(const AttentionDims& dims, int64_t ranks, int64_t element_bytes);

}  // namespace ringlab
