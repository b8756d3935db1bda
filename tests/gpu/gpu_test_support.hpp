// Shared by the GPU tests: the device check every real-GPU test starts with, and one schedule run
// through a GPU executor and verified exactly as `ringlab-gpu run` verifies it (inputs rounded to
// the dtype, float64 oracle, per-dtype tolerances of gpu/dtype.hpp), through the executor contract
// (sim/pipeline/executor.hpp).
#pragma once

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "cli/ringlab-gpu/gpu_command.hpp"
#include "executors/gpu/executor.hpp"
#include "gpu/device.hpp"
#include "gpu/dtype.hpp"
#include "reference/inputs.hpp"
#include "sim/pipeline/verification.hpp"
#include "sim/plan/plan.hpp"

// Catch2 v2 has no SKIP: a test without a device ends its process with status 77, which ctest
// reports as skipped (gpu_tests is registered with SKIP_RETURN_CODE 77, one process per test
// case). Run by hand, the binary stops at the first device test. With RINGLAB_REQUIRE_GPU set in
// the environment (a machine that must have a GPU), a missing device fails the test instead.
#define RINGLAB_REQUIRE_GPU()                                                            \
  do {                                                                                   \
    std::string ringlab_why_;                                                            \
    if (!::ringlab::gpu::device_available(&ringlab_why_)) {                              \
      if (std::getenv("RINGLAB_REQUIRE_GPU"))                                            \
        FAIL("no CUDA device, and RINGLAB_REQUIRE_GPU is set (" << ringlab_why_ << ")"); \
      std::fprintf(stderr, "no CUDA device: test skipped (%s)\n", ringlab_why_.c_str()); \
      std::fflush(nullptr);                                                              \
      std::exit(::ringlab::test::kSkipped);                                              \
    }                                                                                    \
  } while (false)

namespace ringlab::test {

inline constexpr int kSkipped = 77;  // SKIP_RETURN_CODE of gpu_tests (tests/gpu/CMakeLists.txt)

// The hardware queues the commands ask for (gpu/device.hpp), asked for here too, before main and
// so before any CUDA call: the tests run the streams as ringlab-gpu runs them, with a queue each.
inline const bool kHardwareQueuesRequested = (gpu::request_hardware_queues(), true);

inline PlanSpec gpu_spec(const std::string& algo, const std::string& layout, int64_t ranks, bool causal, bool backward,
                         int64_t ulysses = 0) {
  PlanSpec spec;
  spec.algo = parse_algorithm(algo);
  spec.layout = parse_layout(layout);
  spec.ranks = ranks;
  spec.ulysses = ulysses;
  spec.causal = causal;
  spec.backward = backward;
  spec.dims.batch = 1;
  spec.dims.seq = 96;
  // Ulysses needs H and HKV divisible by the Ulysses degree; keep GQA (2 query heads per kv head).
  const int64_t U = spec.algo == Algorithm::ulysses ? ranks : (spec.algo == Algorithm::hybrid ? ulysses : 1);
  spec.dims.kv_heads = U > 1 ? U : 2;
  spec.dims.heads = 2 * spec.dims.kv_heads;
  spec.dims.dim = 64;
  return spec;
}

struct GpuCheck {
  Verification verification;
  ExecutionResult result;
};

// Runs the spec on the GPU executor `make(options)` returns (a StreamsExecutor or NcclExecutor) and
// verifies every output as `ringlab-gpu run` does, through the executor contract: the plan built
// with the executor's element size, the inputs rounded by it (the float64 oracle computes on
// those), its per-dtype tolerances; traced.
template <class Make>
GpuCheck run_and_verify(PlanSpec spec, gpu::Dtype dtype, Make make, uint64_t seed = 1) {
  gpu::GpuRunOptions options;
  options.dtype = dtype;
  options.warmup = 0;  // a check of the outputs: a warm-up run would only double the (emulated) time
  auto executor = make(options);
  const PipelineNeeds needs = executor.needs();
  CHECK(needs.element_bytes == gpu::dtype_bytes(dtype));
  spec.element_bytes = needs.element_bytes;
  const Plan plan = build_plan(spec);
  const AttentionInputs<double> generated = make_inputs(spec.dims, seed, spec.backward).cast<double>();
  AttentionInputs<double> inputs = generated;
  executor.prepare_inputs(inputs);
  CHECK(inputs.q == gpu::rounded_to_dtype(generated.q, dtype));
  ExecuteOptions execute;
  execute.trace = true;
  GpuCheck check;
  check.result = executor.execute(plan, inputs.cast<float>(), execute);
  INFO(check.result.executor << ": " << (check.result.failure ? check.result.failure->description : "completed"));
  REQUIRE(check.result.ok());
  // The plan's mask: causal, window, documents, and padding (uneven S: the padded rows' random
  // inputs are hidden, their outputs 0 and lse -inf in both).
  const ReferenceOutputs reference = compute_reference(inputs, spec.mask(), spec.backward);
  check.verification = verify(check.result.outputs, reference, check.result.executor, needs.tolerance);
  return check;
}

// One line per tensor for a failing check's INFO.
inline std::string describe(const Verification& v) {
  std::string text;
  for (const TensorCheck& c : v.checks) text += c.name + ": " + c.result.describe() + "; ";
  return text;
}

// A plan run on an executor (made by `make`) and verified against the reference, every tensor
// within the executor's tolerances for `dtype`.
template <class Make>
void expect_verified(const PlanSpec& spec, gpu::Dtype dtype, Make make) {
  const GpuCheck check = run_and_verify(spec, dtype, make);
  INFO(spec.describe() << " [" << gpu::dtype_name(dtype) << "]: " << describe(check.verification));
  CHECK(check.verification.ok());
}

// `ringlab-gpu ARGS...` called in-process, as users call it (gpu_main with an argv).
struct CliOutcome {
  int status;
  std::string out, err;
};

inline CliOutcome run_gpu_cli(std::vector<std::string> args) {
  args.insert(args.begin(), "ringlab-gpu");
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  std::ostringstream out, err;
  const int status = gpu::gpu_main(static_cast<int>(argv.size()), argv.data(), out, err);
  return {status, out.str(), err.str()};
}

}  // namespace ringlab::test
