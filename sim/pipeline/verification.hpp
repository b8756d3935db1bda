// Verification of a run: every output tensor of an executor against exact attention in float64 on
// the same inputs, with per-tensor tolerances, printed as one fixed-width table with a pass/fail
// footer (the same table for every executor).
#pragma once

#include <iosfwd>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "reference/attention.hpp"
#include "reference/compare.hpp"

namespace ringlab {

// What an executor produced, in global token order: out (B,S,H,D), lse (B,H,S) and, after a
// backward pass, dq (B,S,H,D), dk, dv (B,S,HKV,D).
struct RunOutputs {
  Tensor<float> out, lse, dq, dk, dv;
  bool has_backward() const { return !dq.empty(); }
};

// The oracle's outputs for the same inputs (float64).
struct ReferenceOutputs {
  AttentionOutput<double> forward;
  AttentionGrads<double> grads;  // empty without a backward pass
};

ReferenceOutputs compute_reference(const AttentionInputs<double>& inputs, const Mask& mask, bool backward);

struct TensorCheck {
  std::string name;
  Shape shape;
  Tolerance tolerance;
  CompareResult result;
  double single_rank_max_error = -1;  // the same tensor's max_abs_error on one rank; < 0: not measured
  double single_rank_rms_error = -1;  // and its rms_error
};

struct Verification {
  std::string executor;  // e.g. "sim (fp32)"
  std::vector<TensorCheck> checks;
  std::string single_rank_executor;  // "" unless the checks carry single_rank_max_error
  bool ok() const;
  // Copies each tensor's max_abs_error of `single_rank` (the same problem on one rank) into checks.
  void add_single_rank(const Verification& single_rank);
};

// The tolerance of each output tensor ("out", "lse", "dq", "dk", "dv") for one executor.
using ToleranceFunction = Tolerance (*)(const std::string& tensor);

Verification verify(const RunOutputs& outputs, const ReferenceOutputs& reference, const std::string& executor,
                    ToleranceFunction tolerance_of = fp32_tolerance);

void print_verification(std::ostream& os, const Verification& verification);
nlohmann::json to_json(const Verification& verification);

}  // namespace ringlab
