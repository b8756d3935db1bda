// Deterministic inputs: every element is a pure function of (seed, tensor, index).
//
// So any rank, thread or executor can regenerate any element without communication, and two runs
// with the same seed see bit-identical inputs whatever the scheduling. Values
// are standard normal, rounded to float32 once, so the float64 oracle and the float32 executors
// start from exactly the same numbers.
#pragma once

#include <cstdint>

#include "reference/attention.hpp"

namespace ringlab {

enum class TensorId : uint32_t { q = 1, k = 2, v = 3, dout = 4 };

// A 64-bit hash of (seed, tensor, index): splitmix64 finalisers, counter-based.
uint64_t input_hash(uint64_t seed, TensorId tensor, uint64_t index);
// Standard normal value of that element (Box-Muller on the hash's two 32-bit halves), in float.
float input_value(uint64_t seed, TensorId tensor, uint64_t index);

// q, k, v (and dout when with_dout) for the dims, element i of tensor t = input_value(seed, t, i)
// with i the row-major index in the global (B, S, heads, D) tensor.
AttentionInputs<float> make_inputs(const AttentionDims& dims, uint64_t seed, bool with_dout);

}  // namespace ringlab
