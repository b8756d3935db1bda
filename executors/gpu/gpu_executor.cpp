// What gpu-streams and gpu-nccl share of the executor contract (executors/gpu/executor.hpp).
#include <string>

#include "executors/gpu/executor.hpp"
#include "gpu/device.hpp"
#include "gpu/kernels/attention_kernels.hpp"
#include "reference/error.hpp"
#include "sim/pipeline/config.hpp"

namespace ringlab::gpu {

void GpuExecutor::configure(const RunConfig& config) {
  if (config.dry_run) {
    throw UsageError("--dry-run costs a plan without tensors, which is the simulator's job; use ringlab run --dry-run");
  }
  if (!config.inject.empty()) {
    throw UsageError(
        "--inject is the simulator's fault injection; use ringlab run --inject (the GPU executors "
        "run real transfers)");
  }
  if (config.precision != "fp32" || config.accumulate != "fp32" || config.merge != "exp") {
    throw UsageError(
        "--precision, --accumulate and --merge are the CPU simulator's low-precision emulation; ringlab-gpu runs "
        "real bf16/fp16 kernels: pick them with --dtype, or use ringlab run --precision");
  }
  // With --in the files decide the sizes: check_sizes runs again once they are read.
  if (config.in_dir.empty()) check_sizes(config.dims);
  std::string why_no_device;
  if (!device_available(&why_no_device)) {
    throw UsageError("no CUDA device visible (" + why_no_device +
                     "); run ringlab-gpu on a machine with an NVIDIA GPU, or use ringlab run (the CPU simulator)");
  }
}

void GpuExecutor::check_sizes(const AttentionDims& dims) const {
  if (const std::string why = kernel_support(options_.dtype, dims.dim); !why.empty()) throw UsageError(why);
}

PipelineNeeds GpuExecutor::needs() const {
  PipelineNeeds needs;
  needs.element_bytes = dtype_bytes(options_.dtype);
  needs.tolerance = gpu_tolerance_function(options_.dtype);
  needs.dtype = dtype_name(options_.dtype);
  return needs;
}

void GpuExecutor::prepare_inputs(AttentionInputs<double>& inputs) const {
  inputs.q = rounded_to_dtype(inputs.q, options_.dtype);
  inputs.k = rounded_to_dtype(inputs.k, options_.dtype);
  inputs.v = rounded_to_dtype(inputs.v, options_.dtype);
  if (!inputs.dout.empty()) inputs.dout = rounded_to_dtype(inputs.dout, options_.dtype);
}

ExecutionResult with_comm_faults(const std::string& label, const std::function<ExecutionResult()>& run) {
  try {
    return run();
  } catch (const CommError& error) {
    const std::string what = error.what();
    ExecutionResult result;
    result.executor = label;
    const FailureKind kind = what.rfind("deadlock", 0) == 0 ? FailureKind::deadlock : FailureKind::comm_fault;
    result.failure = RunFailure{kind, "communication fault: " + what, kExitCommFault};
    return result;
  }
}

}  // namespace ringlab::gpu
