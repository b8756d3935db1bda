// The gpu-streams executor run on the CPU: its host code as compiled for the GPU, the CUDA
// runtime replaced by mock_cuda_runtime.cpp (synchronous, host memory) and the kernels by their
// warp-emulated selves (emulated_launchers.cpp). Checks that every algorithm and layout moves the
// right data through the right slots and merges it right — the executor's data flow — on any
// machine. (Concurrency between streams is the real-GPU tests' job: tests/gpu/test_gpu_streams.cpp.)
#include <catch2/catch.hpp>

#include "tests/gpu/gpu_test_support.hpp"
#ifdef RINGLAB_WITH_NCCL
#include "gpu/executors/nccl_executor.hpp"
#endif

void ringlab_mock_set_device_count(int count);  // mock_cuda_runtime.cpp

namespace ringlab {
namespace {

using gpu::Dtype;
using test::gpu_spec;
using test::run_and_verify;

auto streams = [](const Plan& plan, const AttentionInputs<float>& inputs, const gpu::GpuRunOptions& options) {
  return gpu::run_gpu_streams(plan, inputs, options);
};

template <class Run = decltype(streams)>
void expect_verified(const PlanSpec& spec, Dtype dtype, Run run = streams) {
  const test::GpuCheck check = run_and_verify(spec, dtype, run);
  INFO(spec.describe() << " [" << gpu::dtype_name(dtype) << "]: " << test::describe(check.verification));
  CHECK(check.verification.ok());
}

}  // namespace

TEST_CASE("emulated gpu-streams: every algorithm and layout, fp32, forward and backward", "[gpu][emulated][streams]") {
  const std::string algo = GENERATE("ring", "allgather", "ulysses");
  const std::string layout = GENERATE("contiguous", "zigzag", "striped");
  const int64_t P = GENERATE(1, 3, 4);
  const bool causal = GENERATE(false, true);
  expect_verified(gpu_spec(algo, layout, P, causal, true), Dtype::fp32);
}

TEST_CASE("emulated gpu-streams: hybrid Ulysses x ring, fp32", "[gpu][emulated][streams]") {
  const std::string layout = GENERATE("contiguous", "zigzag", "striped");
  const bool causal = GENERATE(false, true);
  expect_verified(gpu_spec("hybrid", layout, 4, causal, true, 2), Dtype::fp32);
}

TEST_CASE("emulated gpu-streams: tensor-core kernels, bf16 and fp16", "[gpu][emulated][streams]") {
  expect_verified(gpu_spec("ring", "zigzag", 3, true, true), Dtype::bf16);
  expect_verified(gpu_spec("ulysses", "striped", 2, true, true), Dtype::fp16);
  expect_verified(gpu_spec("hybrid", "contiguous", 4, false, true, 2), Dtype::bf16);
  expect_verified(gpu_spec("allgather", "zigzag", 4, true, false), Dtype::fp16);
}

TEST_CASE("emulated gpu-streams: the erratum variants fail as in the simulator", "[gpu][emulated][streams][errata]") {
  PlanSpec reverse = gpu_spec("ring", "contiguous", 3, false, true);
  reverse.erratum = Erratum::reverse_dkv;
  const test::GpuCheck wrong = run_and_verify(reverse, Dtype::fp32, streams);
  CHECK_FALSE(wrong.verification.ok());
  reverse.ranks = 2;  // at P = 2 the wrong direction is invisible (DESIGN.md erratum 1)
  CHECK(run_and_verify(reverse, Dtype::fp32, streams).verification.ok());

  PlanSpec offset = gpu_spec("ring", "contiguous", 3, true, false);
  offset.erratum = Erratum::kv_offset_mask;
  CHECK_FALSE(run_and_verify(offset, Dtype::fp32, streams).verification.ok());
}

TEST_CASE("emulated gpu-streams: summaries and trace", "[gpu][emulated][streams]") {
  const test::GpuCheck check = run_and_verify(gpu_spec("ring", "zigzag", 4, true, true), Dtype::fp32, streams);
  REQUIRE(check.result.ranks.size() == 4);
  int64_t computed = 0, skipped = 0;
  for (const RankSummary& r : check.result.ranks) computed += r.blocks_computed, skipped += r.blocks_skipped;
  CHECK(computed == 2 * 4 * 4);  // zig-zag: every block pair has work, forward and backward
  CHECK(skipped == 0);
  bool has_compute = false, has_send = false;
  for (const TraceEvent& e : check.result.trace) {
    has_compute = has_compute || (e.lane == TraceLane::compute && e.flops > 0 && e.q_block >= 0);
    has_send = has_send || (e.name == "send" && e.peer >= 0 && e.bytes > 0);
  }
  CHECK(has_compute);
  CHECK(has_send);
}

#ifdef RINGLAB_WITH_NCCL
// gpu-nccl's rank threads, each on its mock "device", talking through the mock NCCL
// (mock_nccl.cpp): the op interpretation, the all-to-all staging (pack, grouped send/receive with
// every member, unpack), all-gather and reduce-scatter.
TEST_CASE("emulated gpu-nccl: rank threads through a mock NCCL", "[gpu][emulated][nccl]") {
  auto nccl = [](const Plan& plan, const AttentionInputs<float>& inputs, const gpu::GpuRunOptions& options) {
    return gpu::run_gpu_nccl(plan, inputs, options);
  };
  ringlab_mock_set_device_count(4);
  for (const char* algo : {"ring", "allgather", "ulysses"})
    for (const char* layout : {"zigzag", "striped"})
      for (int64_t P : {1, 3}) expect_verified(gpu_spec(algo, layout, P, true, true), Dtype::fp32, nccl);
  expect_verified(gpu_spec("hybrid", "contiguous", 4, true, true, 2), Dtype::fp32, nccl);
  expect_verified(gpu_spec("ulysses", "zigzag", 4, false, true), Dtype::bf16, nccl);
  ringlab_mock_set_device_count(1);
  CHECK_THAT(gpu::nccl_single_process_support(2), Catch::Contains("refuses two ranks on one GPU"));
}
#endif

}  // namespace ringlab
