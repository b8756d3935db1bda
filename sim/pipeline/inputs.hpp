// Inputs of a run: generated from the seed, or read from --in DIR (.npy, float32 or float64).
#pragma once

#include <optional>
#include <string>

#include "reference/attention.hpp"
#include "sim/pipeline/config.hpp"
#include "sim/pipeline/problem.hpp"

namespace ringlab {

// The --in files (nothing without --in), in float64: read, checked finite, and checked against the
// size flags that were given (a flag the files contradict is an error, not silently overridden).
// Their shapes are the problem's sizes: pass input_dims(*files) to resolve_problem. Throws UsageError
// for a missing file, a bad shape, a contradicted flag, NaN or Inf.
std::optional<AttentionInputs<double>> read_input_files(const RunConfig& flags);
// The sizes the files give.
AttentionDims input_dims(const AttentionInputs<double>& files, bool backward);

// The generated inputs of a problem, in float64: exactly the values the float32 executors see.
AttentionInputs<double> generate_inputs(const Problem& problem);

// Throws UsageError when any value is NaN or Inf, naming the tensor and the first index.
void require_finite(const Tensor<double>& tensor, const std::string& name);

}  // namespace ringlab
