// The sim executor: runs a plan on P virtual ranks (sim/ranks/world.hpp), each interpreting its own
// expanded op list (sim/pipeline/op_interpreter.hpp) with the reference block kernels (fp32). It knows
// the op vocabulary of sim/plan/plan.hpp and nothing about algorithms.
//
// Each rank starts with its layout tokens of q, k, v (and dout) cut from the global inputs, and
// ends with its tokens of out, lse (and dq, dk, dv), which are scattered back to global order.
// It fulfils the executor contract (sim/pipeline/executor.hpp): fp32 on the wire, a progress count per
// op, and diagnosis — every compute block checked on its own against its exact counterpart.
#pragma once

#include <cstdint>

#include "reference/precision.hpp"
#include "sim/pipeline/executor.hpp"
#include "sim/plan/plan.hpp"
#include "sim/ranks/world_options.hpp"

namespace ringlab {

// Low-precision emulation (ringlab run --precision, --accumulate, --merge). fp32 storage with the
// exp merge is the plain fp32 path (each step merges into the (m, l, o) accumulator in place).
// Otherwise every compute step's partial result is rounded to `storage` (unless `round_partials`
// is off: --accumulate fused, a kernel that adds each step into fp32 accumulators itself), the
// forward merges (out, lse) states in the LSE form, and the running output, dq and the dK/dV
// accumulators are rounded to `storage` after every merge when `round_accumulators` (else they
// stay fp32, and dK/dV travel in fp32). Inputs are stored in `storage`, outputs and gradients are rounded to it
// at the end; the LSE stays fp32 throughout, as the kernels keep it. The block kernel rounds P and
// dS to `storage` before the GEMMs that take them, as the GPU's tensor-core kernels do
// (reference/flash_attention.hpp, KernelOptions::operands; gpu/README.md, "Rounding points").
struct SimPrecision {
  Precision storage = Precision::fp32;
  bool round_accumulators = false;  // --accumulate storage
  bool round_partials = true;       // false with --accumulate fused
  MergeForm merge = MergeForm::exp;
  bool emulates() const { return storage != Precision::fp32 || merge != MergeForm::exp; }
  // "fp32" | "bf16, accumulate fp32" | "fp16, accumulate fp16, logsigmoid merge"
  std::string describe() const;
};

// Tolerances of an emulated run against the float64 oracle (on the rounded inputs): multiples of
// the storage precision's unit roundoff (fp32: reference/compare's fp32_tolerance).
Tolerance precision_tolerance(Precision storage, const std::string& tensor);
ToleranceFunction precision_tolerance_function(Precision storage);

class SimExecutor final : public Executor {
 public:
  // `world`: the watchdog's timeout, the send mode, injected faults (its ranks come from the plan,
  // its tracing from ExecuteOptions); `threads_per_rank`: kernel threads, 0 = max(1, cores / P).
  explicit SimExecutor(WorldOptions world = {}, int threads_per_rank = 0);

  void configure(const RunConfig& config) override;                     // --timeout, --inject, --precision...
  void prepare_inputs(AttentionInputs<double>& inputs) const override;  // rounded to the storage precision
  void check_sizes(const AttentionDims& dims) const override;           // tensors that would not fit in memory
  ExecutionCost cost(const PlanSpec& spec) const override;              // a thread per rank, ops, tensors
  PipelineNeeds needs() const override;                                 // fp32, progress, diagnosis
  std::string label(const Plan& plan) const override;                   // "sim executor, 4 ranks (fp32)"
  // A diagnosis run (ExecuteOptions::diagnose_*) injects no faults.
  ExecutionResult execute(const Plan& plan, const AttentionInputs<float>& inputs,
                          const ExecuteOptions& options) override;

 private:
  WorldOptions world_;
  int threads_per_rank_ = 0;
  SimPrecision precision_;
  bool inputs_from_files_ = false;

 public:
  const SimPrecision& precision() const { return precision_; }
  void set_precision(const SimPrecision& precision) { precision_ = precision; }
};

}  // namespace ringlab
