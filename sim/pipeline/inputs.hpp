// Inputs of a run: generated from the seed, or read from --in DIR (.npy, float32 or float64).
#pragma once

#include "reference/attention.hpp"
#include "sim/pipeline/config.hpp"

namespace ringlab {

// The inputs in float64 (the oracle's) — exactly the values the float32 executors see when the
// inputs are float32, as generated ones are. With --in, dims.* of the config are replaced by the
// files' shapes. Throws UsageError for a missing file, a bad shape, NaN or Inf.
AttentionInputs<double> load_inputs(RunConfig& config);

// Throws UsageError when any value is NaN or Inf, naming the tensor and the first index.
void require_finite(const Tensor<double>& tensor, const std::string& name);

}  // namespace ringlab
