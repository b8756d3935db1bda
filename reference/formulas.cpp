#include "reference/formulas.hpp"

namespace ringlab {

int64_t full_pairs(int64_t seq, bool causal) { return causal ? seq * (seq + 1) / 2 : seq * seq; }

double forward_flops(int64_t pairs, const AttentionDims& dims) {
  return double(kForwardFlopsPerPairPerDim) * double(dims.dim) * double(pairs) * double(dims.heads) *
         double(dims.batch);
}

double backward_flops(int64_t pairs, const AttentionDims& dims) {
  return double(kBackwardFlopsPerPairPerDim) * double(dims.dim) * double(pairs) * double(dims.heads) *
         double(dims.batch);
}

double attention_matrix_bytes(int64_t batch, int64_t heads, int64_t q_rows, int64_t k_rows, int64_t element_bytes) {
  return double(batch) * double(heads) * double(q_rows) * double(k_rows) * double(element_bytes);
}

double kv_bytes(int64_t tokens, const AttentionDims& dims, int64_t element_bytes) {
  return 2.0 * double(tokens) * double(dims.kv_heads) * double(dims.dim) * double(dims.batch) * double(element_bytes);
}

double q_bytes(int64_t tokens, const AttentionDims& dims, int64_t element_bytes) {
  return double(tokens) * double(dims.heads) * double(dims.dim) * double(dims.batch) * double(element_bytes);
}

double ring_forward_send_bytes(const AttentionDims& dims, int64_t ranks, int64_t element_bytes) {
  return double(ranks - 1) * kv_bytes(dims.seq / ranks, dims, element_bytes);
}

double ulysses_forward_send_bytes(const AttentionDims& dims, int64_t ranks, int64_t element_bytes) {
  const int64_t tokens = dims.seq / ranks;
  const double shard = 2.0 * q_bytes(tokens, dims, element_bytes) + kv_bytes(tokens, dims, element_bytes);
  return shard * double(ranks - 1) / double(ranks);
}

// ---- exact bytes per algorithm ---------------------------------------------------------------

int64_t kv_block_bytes(const AttentionDims& dims, int64_t ranks, int64_t ulysses, int64_t element_bytes) {
  const int64_t ring = ranks / ulysses;
  return 2 * (dims.seq / ring) * (dims.kv_heads / ulysses) * dims.dim * dims.batch * element_bytes;
}

int64_t all_to_all_send_bytes(int64_t shard_bytes, int64_t ulysses) { return shard_bytes / ulysses * (ulysses - 1); }

PassBytes hybrid_send_bytes(const AttentionDims& dims, int64_t ranks, int64_t ulysses, int64_t element_bytes,
                            bool backward) {
  constexpr int64_t fp32 = 4;
  const int64_t R = ranks / ulysses, U = ulysses;
  const int64_t t = dims.seq / ranks, H = dims.heads, HKV = dims.kv_heads, D = dims.dim, B = dims.batch;
  const int64_t e = element_bytes;
  PassBytes bytes;
  // Ring part over R positions (nothing when R = 1).
  bytes.forward = (R - 1) * kv_block_bytes(dims, ranks, U, e);
  if (U > 1) {
    bytes.forward += all_to_all_send_bytes(t * (H + 2 * HKV) * D * B * e, U);  // q, k, v in
    bytes.forward += all_to_all_send_bytes(t * H * (D * e + fp32) * B, U);     // out and lse back
  }
  if (backward) {
    bytes.backward =
        (R - 1) * kv_block_bytes(dims, ranks, U, e) + (R > 1 ? R : 0) * kv_block_bytes(dims, ranks, U, fp32);
    if (U > 1) {
      bytes.backward += all_to_all_send_bytes(t * H * D * B * e, U);                 // dout in
      bytes.backward += all_to_all_send_bytes(t * (H + 2 * HKV) * D * B * fp32, U);  // dq, dk, dv back
    }
  }
  return bytes;
}

PassBytes ring_send_bytes(const AttentionDims& dims, int64_t ranks, int64_t element_bytes, bool backward) {
  return hybrid_send_bytes(dims, ranks, 1, element_bytes, backward);
}

PassBytes ulysses_send_bytes(const AttentionDims& dims, int64_t ranks, int64_t element_bytes, bool backward) {
  return hybrid_send_bytes(dims, ranks, ranks, element_bytes, backward);
}

PassBytes allgather_send_bytes(const AttentionDims& dims, int64_t ranks, int64_t element_bytes, bool backward) {
  PassBytes bytes;
  bytes.forward = (ranks - 1) * kv_block_bytes(dims, ranks, 1, element_bytes);
  if (backward) {
    bytes.backward =
        (ranks - 1) * kv_block_bytes(dims, ranks, 1, element_bytes) + (ranks - 1) * kv_block_bytes(dims, ranks, 1, 4);
  }
  return bytes;
}

}  // namespace ringlab
