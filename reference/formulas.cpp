#include "reference/formulas.hpp"

namespace ringlab {

int64_t full_pairs(int64_t seq, bool causal) { return causal ? seq * (seq + 1) / 2 : seq * seq; }

double forward_flops(int64_t pairs, const AttentionDims& dims) {
  return double(kForwardFlopsPerPairPerDim) * double(dims.dim) * double(pairs) * double(dims.heads) * double(dims.batch);
}

double backward_flops(int64_t pairs, const AttentionDims& dims) {
  return double(kBackwardFlopsPerPairPerDim) * double(dims.dim) * double(pairs) * double(dims.heads) * double(dims.batch);
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

}  // namespace ringlab
