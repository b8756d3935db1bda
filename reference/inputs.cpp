#include "reference/inputs.hpp"

#include <cmath>
#include <numbers>

namespace ringlab {
namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

Tensor<float> generate(const Shape& shape, uint64_t seed, TensorId tensor) {
  Tensor<float> result(shape);
  const int64_t n = result.size();
#pragma omp parallel for schedule(static) if (n > (1 << 16))
  for (int64_t i = 0; i < n; ++i) result[i] = input_value(seed, tensor, static_cast<uint64_t>(i));
  return result;
}

}  // namespace

uint64_t input_hash(uint64_t seed, TensorId tensor, uint64_t index) {
  return splitmix64(splitmix64(seed ^ (static_cast<uint64_t>(tensor) << 56)) ^ index);
}

float input_value(uint64_t seed, TensorId tensor, uint64_t index) {
  const uint64_t bits = input_hash(seed, tensor, index);
  // Two uniforms in (0, 1]: never exactly 0, so the log below is finite.
  const double u1 = (static_cast<double>(bits >> 32) + 1.0) / 4294967296.0;
  const double u2 = static_cast<double>(bits & 0xFFFFFFFFULL) / 4294967296.0;
  return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2));
}

AttentionInputs<float> make_inputs(const AttentionDims& dims, uint64_t seed, bool with_dout) {
  AttentionInputs<float> inputs;
  inputs.q = generate(dims.q_shape(), seed, TensorId::q);
  inputs.k = generate(dims.kv_shape(), seed, TensorId::k);
  inputs.v = generate(dims.kv_shape(), seed, TensorId::v);
  if (with_dout) inputs.dout = generate(dims.q_shape(), seed, TensorId::dout);
  return inputs;
}

}  // namespace ringlab
