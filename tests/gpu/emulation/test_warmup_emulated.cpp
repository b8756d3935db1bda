// gpu-streams' and gpu-nccl's warm-up and `ringlab-gpu run`'s usage errors with the CUDA runtime mocked (a
// "device" present) and the kernels emulated: the warm-up's kernel launches all come before the
// measured run's first timing event, and leave its outputs exactly as a run without warm-up; a
// plan's usage error is reported as itself (not as a missing device), and an uneven S is padded.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "cli/ringlab-gpu/gpu_command.hpp"
#include "tests/gpu/emulation/emulated_counts.hpp"
#include "tests/gpu/gpu_test_support.hpp"
#ifdef RINGLAB_WITH_NCCL
#include "executors/gpu/nccl_executor.hpp"
#endif

int64_t ringlab_mock_launches_before_first_timing_event();  // mock_cuda_runtime.cpp
void ringlab_mock_set_device_count(int count);              // mock_cuda_runtime.cpp
void ringlab_mock_nccl_reset();                             // mock_nccl.cpp

namespace ringlab {
namespace {

struct Launches {
  ExecutionResult result;
  int64_t total = 0;          // kernel launches during execute
  int64_t before_timing = 0;  // of them, before its first timing event
};

template <class Executor = gpu::StreamsExecutor>
Launches execute_counting(const Plan& plan, const AttentionInputs<float>& inputs, int warmup) {
  gpu::GpuRunOptions options;
  options.dtype = gpu::Dtype::fp32;
  options.warmup = warmup;
  Executor executor(options);
  (void)ringlab_mock_launches_before_first_timing_event();  // starts over
  const int64_t before = gpu::emulated_kernel_launches;
  Launches l;
  l.result = executor.execute(plan, inputs, ExecuteOptions{});
  l.total = gpu::emulated_kernel_launches - before;
  l.before_timing = ringlab_mock_launches_before_first_timing_event() - before;
  return l;
}

double max_difference(const Tensor<float>& a, const Tensor<float>& b) {
  REQUIRE(a.size() == b.size());
  double most = 0;
  for (int64_t i = 0; i < a.size(); ++i) most = std::max(most, std::abs(double(a[i]) - double(b[i])));
  return most;
}

using Outcome = test::CliOutcome;
Outcome run_cli(std::vector<std::string> args) { return test::run_gpu_cli(std::move(args)); }

}  // namespace

TEST_CASE("emulated gpu-streams: the warm-up's launches all precede the first timing event",
          "[gpu][emulated][warmup]") {
  PlanSpec spec = test::gpu_spec("ring", "zigzag", 2, true, true);  // fp32 kernels: quick to emulate
  const Plan plan = build_plan(spec);
  const AttentionInputs<float> inputs = make_inputs(spec.dims, 1, spec.backward);

  // Without a warm-up only the ranks' set-up (the inputs' upload) launches before the first timing
  // event: the measured run's own first launches are timed (the negative control).
  const Launches cold = execute_counting(plan, inputs, 0);
  REQUIRE(cold.result.ok());
  const int64_t setup = cold.before_timing, run = cold.total - setup;
  CHECK(run > 0);
  CHECK(setup < cold.total);
  CHECK_THAT(cold.result.executor, Catch::Contains("no warm-up: first launches timed"));

  const Launches warm = execute_counting(plan, inputs, 1);
  REQUIRE(warm.result.ok());
  CHECK(warm.total == setup + 2 * run);      // a whole run's launches, then the measured run's
  CHECK(warm.before_timing == setup + run);  // ... and every one of the warm-up's came first
  CHECK_THAT(warm.result.executor, Catch::Contains("timed after 1 warm-up run"));
  // The warm-up leaves nothing behind: the measured outputs are the cold run's.
  REQUIRE(warm.result.outputs.out.size() == cold.result.outputs.out.size());
  CHECK(warm.result.outputs.out == cold.result.outputs.out);
  CHECK(warm.result.outputs.lse == cold.result.outputs.lse);
  // The gradients' fp32 atomics add in any order: equal to rounding (a gradient left over from the
  // warm-up would double them).
  CHECK(max_difference(warm.result.outputs.dq, cold.result.outputs.dq) < 1e-6);
  CHECK(max_difference(warm.result.outputs.dk, cold.result.outputs.dk) < 1e-6);
  CHECK(max_difference(warm.result.outputs.dv, cold.result.outputs.dv) < 1e-6);
  CHECK(max_difference(cold.result.outputs.dq, Tensor<float>(cold.result.outputs.dq.shape())) > 1e-3);
  // The measured run's trace holds its own ops only (one run's worth of compute spans).
  ExecuteOptions traced;
  traced.trace = true;
  gpu::GpuRunOptions options;
  options.dtype = gpu::Dtype::fp32;
  gpu::StreamsExecutor once(options);
  const ExecutionResult with_trace = once.execute(plan, inputs, traced);
  options.warmup = 0;
  gpu::StreamsExecutor never(options);
  CHECK(with_trace.trace.size() == never.execute(plan, inputs, traced).trace.size());
}

#ifdef RINGLAB_WITH_NCCL
TEST_CASE("emulated gpu-nccl: the warm-up runs first, untimed, and leaves no count behind", "[gpu][emulated][warmup]") {
  ringlab_mock_nccl_reset();  // no fault left over from the fault tests of this binary
  // One rank: every launch of the warm-up comes before the measured run's first timing event.
  {
    PlanSpec spec = test::gpu_spec("ring", "zigzag", 1, true, true);
    const Plan plan = build_plan(spec);
    const AttentionInputs<float> inputs = make_inputs(spec.dims, 1, spec.backward);
    const Launches cold = execute_counting<gpu::NcclExecutor>(plan, inputs, 0);
    INFO((cold.result.failure ? cold.result.failure->description : std::string()));
    REQUIRE(cold.result.ok());
    const int64_t setup = cold.before_timing, run = cold.total - setup;
    CHECK(run > 0);
    CHECK_THAT(cold.result.executor, Catch::Contains("no warm-up: first launches timed"));
    const Launches warm = execute_counting<gpu::NcclExecutor>(plan, inputs, 2);
    REQUIRE(warm.result.ok());
    CHECK(warm.total == setup + 3 * run);
    CHECK(warm.before_timing == setup + 2 * run);
    CHECK_THAT(warm.result.executor, Catch::Contains("timed after 2 warm-up runs"));
    CHECK(warm.result.outputs.out == cold.result.outputs.out);
  }
  // Three ranks through the mock NCCL: the warm-ups' sends and collectives match, and the measured
  // run's outputs, traffic and block counts are a cold run's (a count kept from the warm-up would
  // double them).
  ringlab_mock_set_device_count(4);
  for (const char* algo : {"ring", "ulysses"}) {
    INFO(algo);
    PlanSpec spec = test::gpu_spec(algo, "zigzag", 3, true, true);
    const Plan plan = build_plan(spec);
    const AttentionInputs<float> inputs = make_inputs(spec.dims, 1, spec.backward);
    const Launches cold = execute_counting<gpu::NcclExecutor>(plan, inputs, 0);
    const Launches warm = execute_counting<gpu::NcclExecutor>(plan, inputs, 1);
    REQUIRE(cold.result.ok());
    REQUIRE(warm.result.ok());
    CHECK(warm.total > cold.total);
    CHECK(warm.result.outputs.out == cold.result.outputs.out);
    CHECK(max_difference(warm.result.outputs.dq, cold.result.outputs.dq) < 1e-6);
    CHECK(max_difference(warm.result.outputs.dk, cold.result.outputs.dk) < 1e-6);
    REQUIRE(warm.result.ranks.size() == cold.result.ranks.size());
    for (size_t r = 0; r < cold.result.ranks.size(); ++r) {
      const RankSummary &w = warm.result.ranks[r], &c = cold.result.ranks[r];
      CHECK(w.counters.bytes_sent == c.counters.bytes_sent);
      CHECK(w.counters.messages_sent == c.counters.messages_sent);
      CHECK(w.counters.collectives == c.counters.collectives);
      CHECK(w.blocks_computed == c.blocks_computed);
      CHECK(w.pairs == c.pairs);
      CHECK(c.blocks_computed > 0);
    }
  }
  ringlab_mock_set_device_count(1);
}
#endif

TEST_CASE("emulated ringlab-gpu run: a plan's usage error names itself, and an uneven S is padded",
          "[gpu][emulated][cli]") {
  const Outcome heads = run_cli({"run", "--heads", "8", "--kv-heads", "3", "--dim", "64"});
  CHECK(heads.status == 2);
  CHECK(heads.err.rfind("ringlab-gpu: error: ", 0) == 0);
  CHECK_THAT(heads.err, Catch::Contains("HKV=3 does not divide H=8"));
  const Outcome padded = run_cli({"run", "--ranks", "3", "--seq", "100", "--layout", "zigzag", "--heads", "2",
                                  "--kv-heads", "1", "--dim", "64", "--warmup", "0", "--dtype", "fp32"});
  INFO(padded.out << padded.err);
  CHECK(padded.status == 0);
  CHECK_THAT(padded.out, Catch::Contains("PASS"));
  const Outcome warmup = run_cli({"run", "--warmup", "-1"});
  CHECK(warmup.status == 2);
  CHECK_THAT(warmup.err, Catch::Contains("--warmup"));
}

}  // namespace ringlab
