// The attention problem: dimensions, mask kinds, the softmax scale and the input tensors.
//
// scale = 1/sqrt(D). LSE is the natural log of sum_k exp(scale * q.k) over the keys a query may
// see. Causal: key position <= query position, by *global* token position — never by index
// within a block or rank (the book's erratum 2 is exactly that confusion).
// GQA: query head h reads key/value head h / (H / HKV).
#pragma once

#include <cmath>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "reference/mask.hpp"
#include "reference/tensor.hpp"

namespace ringlab {

struct AttentionDims {
  int64_t batch = 1;     // B
  int64_t seq = 1024;    // S, total tokens
  int64_t heads = 4;     // H, query heads
  int64_t kv_heads = 4;  // HKV, key/value heads (GQA when < H)
  int64_t dim = 64;      // D, head dimension

  Shape q_shape() const { return {batch, seq, heads, dim}; }
  Shape kv_shape() const { return {batch, seq, kv_heads, dim}; }
  Shape lse_shape() const { return {batch, heads, seq}; }
  int64_t group_size() const { return heads / kv_heads; }  // query heads per kv head
  double scale() const { return 1.0 / std::sqrt(static_cast<double>(dim)); }

  // Throws UsageError naming the first problem and its fix: non-positive sizes, HKV not dividing H.
  void validate() const;
  std::string to_string() const;  // "B=1 S=1024 H=4 HKV=4 D=64"
};

// Global token positions 0..S-1.
std::vector<int64_t> iota_positions(int64_t count, int64_t first = 0);

template <class T>
struct AttentionInputs {
  Tensor<T> q;     // (B, S, H, D)
  Tensor<T> k;     // (B, S, HKV, D)
  Tensor<T> v;     // (B, S, HKV, D)
  Tensor<T> dout;  // (B, S, H, D), empty when no backward pass is wanted

  template <class U>
  AttentionInputs<U> cast() const {
    return {q.template cast<U>(), k.template cast<U>(), v.template cast<U>(), dout.template cast<U>()};
  }
};

template <class T>
struct AttentionOutput {
  Tensor<T> out;  // (B, Sq, H, D)
  Tensor<T> lse;  // (B, H, Sq); -inf where a query sees no key (then out is 0)
};

template <class T>
struct AttentionGrads {
  Tensor<T> dq;  // (B, Sq, H, D)
  Tensor<T> dk;  // (B, Sk, HKV, D)
  Tensor<T> dv;  // (B, Sk, HKV, D)
};

// Checks that q, k, v (and dout when present) have consistent attention shapes; returns the dims
// (with S taken from q). Throws UsageError naming the tensor and the expected shape.
AttentionDims dims_of(const Shape& q, const Shape& k, const Shape& v, const Shape* dout = nullptr);

}  // namespace ringlab
