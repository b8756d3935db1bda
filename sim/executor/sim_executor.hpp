// The sim executor: runs a plan on P virtual ranks (sim/runtime/world.hpp), each interpreting its own
// expanded op list (sim/run/op_interpreter.hpp) with the reference block kernels (fp32). It knows
// the op vocabulary of sim/plan/plan.hpp and nothing about algorithms.
//
// Each rank starts with its layout tokens of q, k, v (and dout) cut from the global inputs, and
// ends with its tokens of out, lse (and dq, dk, dv), which are scattered back to global order.
// It fulfils the executor contract (sim/run/executor.hpp): fp32 on the wire, a progress count per
// op, and diagnosis — every compute block checked on its own against its exact counterpart.
#pragma once

#include <cstdint>

#include "sim/plan/plan.hpp"
#include "sim/run/executor.hpp"
#include "sim/runtime/world_options.hpp"

namespace ringlab {

class SimExecutor final : public Executor {
 public:
  // `world`: the watchdog's timeout, the send mode, injected faults (its ranks come from the plan,
  // its tracing from ExecuteOptions); `threads_per_rank`: kernel threads, 0 = max(1, cores / P).
  explicit SimExecutor(WorldOptions world = {}, int threads_per_rank = 0);

  void configure(const RunConfig& config) override;            // --timeout and --inject
  void check_sizes(const AttentionDims& dims) const override;  // tensors that would not fit in memory
  PipelineNeeds needs() const override;                        // fp32, progress, diagnosis
  std::string label(const Plan& plan) const override;          // "sim executor, 4 ranks (fp32)"
  // A diagnosis run (ExecuteOptions::diagnose_*) injects no faults.
  ExecutionResult execute(const Plan& plan, const AttentionInputs<float>& inputs,
                          const ExecuteOptions& options) override;

 private:
  WorldOptions world_;
  int threads_per_rank_ = 0;
};

}  // namespace ringlab
