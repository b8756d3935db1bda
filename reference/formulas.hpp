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
// (The textbook volumes of the source material's exercise 2: the ulysses one counts `out` but not
// the fp32 lse that the plans also send back; the exact per-plan counts are below.)
double ring_forward_send_bytes(const AttentionDims& dims, int64_t ranks, int64_t element_bytes);
double ulysses_forward_send_bytes(const AttentionDims& dims, int64_t ranks, int64_t element_bytes);

// ---- Exact bytes each rank sends, per algorithm and pass -----------------------------------
//
// What the plans of sim/plan/algorithms send, counted exactly (integers); every rank sends the same.
// P ranks, U the Ulysses degree, R = P/U the ring degree, t = S/P a rank's tokens, e the element
// bytes of q, k, v, out and dout on the wire. lse, dK/dV accumulators and dq, dk, dv travel in
// fp32 (4 bytes). A K/V block is one ring position's tokens (S/R) for one rank's kv heads (HKV/U):
//   kv_block(e)  = 2 (S/R) (HKV/U) D B e
// and an all-to-all keeps 1/U of a rank's shard and sends the rest: a2a(x) = x / U (U - 1).
//
//   ring       fwd  kv_block(e)                          K/V hops (step 0 uses its own)
//              bwd  kv_block(e) + R kv_block(4)           K/V again; dK/dV travel with their
//                                                               block and take one hop home (R = 1: none)
//   all-gather fwd  kv_block(e)                          all-gather of K/V
//              bwd  kv_block(e) + (R-1) kv_block(4)       gather again; reduce-scatter of dK/dV
//   ulysses / hybrid (U > 1; ulysses is R = 1)
//              fwd  a2a(t (H + 2 HKV) D B e) + a2a(t H (D e + 4) B)      q,k,v in; out and lse back
//                   + the ring forward over R
//              bwd  a2a(t H D B e) + a2a(t (H + 2 HKV) D B 4)            dout in; dq, dk, dv back
//                   + the ring backward over R
struct PassBytes {
  int64_t forward = 0;
  int64_t backward = 0;  // 0 when only the forward runs
  int64_t total() const { return forward + backward; }
};

// 2 (S/R) (HKV/U) D B e, R = P/U.
int64_t kv_block_bytes(const AttentionDims& dims, int64_t ranks, int64_t ulysses, int64_t element_bytes);
// One all-to-all: the part of a rank's shard of `shard_bytes` that leaves it, shard / U (U - 1).
int64_t all_to_all_send_bytes(int64_t shard_bytes, int64_t ulysses);

PassBytes ring_send_bytes(const AttentionDims& dims, int64_t ranks, int64_t element_bytes, bool backward);
PassBytes allgather_send_bytes(const AttentionDims& dims, int64_t ranks, int64_t element_bytes, bool backward);
// Hybrid Ulysses x ring with Ulysses degree U (U = P is pure Ulysses, U = 1 the plain ring).
PassBytes hybrid_send_bytes(const AttentionDims& dims, int64_t ranks, int64_t ulysses, int64_t element_bytes,
                            bool backward);
PassBytes ulysses_send_bytes(const AttentionDims& dims, int64_t ranks, int64_t element_bytes, bool backward);

}  // namespace ringlab
