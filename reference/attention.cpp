#include "reference/attention.hpp"

#include <numeric>

#include "reference/error.hpp"
#include "reference/names.hpp"

namespace ringlab {

void AttentionDims::validate() const {
  auto positive = [](int64_t value, const char* flag, const char* what) {
    if (value <= 0) {
      throw UsageError(std::string(what) + " must be positive, got " + std::to_string(value) + "; pass " + flag +
                       " N with N >= 1");
    }
  };
  positive(batch, "--batch", "batch B");
  positive(seq, "--seq", "sequence length S");
  positive(heads, "--heads", "query heads H");
  positive(kv_heads, "--kv-heads", "key/value heads HKV");
  positive(dim, "--dim", "head dimension D");
  if (heads % kv_heads != 0) {
    throw UsageError("HKV=" + std::to_string(kv_heads) + " does not divide H=" + std::to_string(heads) +
                     " (each kv head serves H/HKV query heads); pick --kv-heads among the divisors of " +
                     std::to_string(heads));
  }
}

std::string AttentionDims::to_string() const {
  return "B=" + std::to_string(batch) + " S=" + std::to_string(seq) + " H=" + std::to_string(heads) +
         " HKV=" + std::to_string(kv_heads) + " D=" + std::to_string(dim);
}

std::vector<int64_t> iota_positions(int64_t count, int64_t first) {
  std::vector<int64_t> positions(static_cast<size_t>(count));
  std::iota(positions.begin(), positions.end(), first);
  return positions;
}

AttentionDims dims_of(const Shape& q, const Shape& k, const Shape& v, const Shape* dout) {
  auto need4 = [](const Shape& shape, const char* name, const char* layout) {
    if (shape.size() != 4) {
      throw UsageError(std::string(name) + " has shape " + shape_string(shape) + " but must be 4-D " + layout);
    }
  };
  need4(q, "q", "(B, S, H, D)");
  need4(k, "k", "(B, S, HKV, D)");
  need4(v, "v", "(B, S, HKV, D)");
  AttentionDims dims{q[0], q[1], q[2], k[2], q[3]};
  if (k[0] != q[0] || k[1] != q[1] || k[3] != q[3]) {
    throw UsageError("k has shape " + shape_string(k) + " but q is " + shape_string(q) +
                     "; k must be (B, S, HKV, D) with q's B, S and D");
  }
  if (v != k) {
    throw UsageError("v has shape " + shape_string(v) + " but k is " + shape_string(k) +
                     "; v must have exactly k's shape");
  }
  if (dout && *dout != q) {
    throw UsageError("dout has shape " + shape_string(*dout) + " but q is " + shape_string(q) +
                     "; dout must have exactly q's shape");
  }
  dims.validate();
  return dims;
}

}  // namespace ringlab
