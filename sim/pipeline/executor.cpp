#include "sim/pipeline/executor.hpp"

#include "reference/layout.hpp"
#include "reference/names.hpp"

namespace ringlab {

const char* failure_kind_name(FailureKind kind) {
  constexpr const char* kNames[] = {"deadlock", "communication fault", "error"};
  return name_of(kNames, kind);
}

RunOutputs allocate_outputs(const Plan& plan) {
  const AttentionDims& d = plan.spec().dims;
  RunOutputs outputs;
  outputs.out = Tensor<float>(d.q_shape());
  outputs.lse = Tensor<float>(d.lse_shape());
  if (plan.spec().backward) {
    outputs.dq = Tensor<float>(d.q_shape());
    outputs.dk = Tensor<float>(d.kv_shape());
    outputs.dv = Tensor<float>(d.kv_shape());
  }
  return outputs;
}

void scatter_local_outputs(const LocalOutputs& local, std::span<const int64_t> positions, RunOutputs& global) {
  scatter_rows(local.out, positions, 1, global.out);
  scatter_rows(local.lse, positions, 2, global.lse);
  if (!local.dq.empty()) {
    scatter_rows(local.dq, positions, 1, global.dq);
    scatter_rows(local.dk, positions, 1, global.dk);
    scatter_rows(local.dv, positions, 1, global.dv);
  }
}

void Executor::configure(const RunConfig&) {}

void Executor::check_sizes(const AttentionDims&) const {}

ExecutionCost Executor::cost(const PlanSpec&) const { return {}; }

void Executor::prepare_inputs(AttentionInputs<double>&) const {}

bool Executor::print_own_report(std::ostream&, const Plan&, const ExecutionResult&, bool) const { return false; }

}  // namespace ringlab
