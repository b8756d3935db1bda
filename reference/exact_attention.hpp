// Exact attention — the oracle every executor is checked against. Clear rather than clever: the
// textbook formula softmax(scale Q K^T) V with every softmax row materialised in full (no online
// softmax, no running max), a tile of queries at a time, arithmetic in T (float64 is the oracle;
// the float32 instantiation exists to measure what fp32 arithmetic alone costs).
//
// Positions: q_pos[i] is the global position of query row i, k_pos[j] that of key row j; empty
// spans mean 0..S-1. The mask compares positions, so any layout or ring step is one call.
#pragma once

#include <span>

#include "reference/attention.hpp"

namespace ringlab {

// q: (B, Sq, H, D), k, v: (B, Sk, HKV, D) -> out (B, Sq, H, D), lse (B, H, Sq).
// A query that sees no key gets out 0 and lse -inf, never NaN.
template <class T>
AttentionOutput<T> exact_attention(const Tensor<T>& q, const Tensor<T>& k, const Tensor<T>& v, const Mask& mask,
                                   std::span<const int64_t> q_pos = {}, std::span<const int64_t> k_pos = {});

// Gradients from the definition: P = softmax(scale q k^T), dV = P^T dO, dP = dO V^T,
// dS = P o (dP - rowsum(P o dP)) (the softmax Jacobian, no saved-LSE shortcut),
// dQ = scale dS K, dK = scale dS^T Q; GQA sums dK, dV over the query heads of a group.
// dout: (B, Sq, H, D).
template <class T>
AttentionGrads<T> exact_attention_backward(const Tensor<T>& q, const Tensor<T>& k, const Tensor<T>& v,
                                           const Tensor<T>& dout, const Mask& mask, std::span<const int64_t> q_pos = {},
                                           std::span<const int64_t> k_pos = {});

// The backward contribution of one block of keys, given the *whole* forward's lse and
// delta = rowsum(dout o out) (both (B, H, Sq)): P = exp(scale q.k - lse) restricted to the block,
// dS = P o (dO V^T - delta). What one ring step contributes to dq, dk and dv — used to find the
// first block whose computed contribution is wrong. float64.
AttentionGrads<double> exact_block_backward(const Tensor<double>& q, const Tensor<double>& k, const Tensor<double>& v,
                                            const Tensor<double>& dout, const Tensor<double>& lse,
                                            const Tensor<double>& delta, const Mask& mask,
                                            std::span<const int64_t> q_pos, std::span<const int64_t> k_pos);

}  // namespace ringlab
