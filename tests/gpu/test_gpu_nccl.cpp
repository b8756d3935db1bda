// gpu-nccl in one process (one thread and one GPU per rank). NCCL refuses two ranks on one GPU
// ("Duplicate GPU detected", NCCL >= 2.5.6; NCCL 2.30's NCCL_MULTI_RANK_GPU_ENABLE=1 is
// experimental), so with one GPU these tests run P = 1 — the executor's op interpretation, its
// staging and NCCL's calls with a single rank — and P = 2, 4 only where that many GPUs exist.
#include <catch2/catch.hpp>

#include "executors/gpu/nccl_executor.hpp"
#include "reference/error.hpp"
#include "tests/gpu/gpu_test_support.hpp"

namespace ringlab {
namespace {

using gpu::Dtype;
using test::gpu_spec;
using test::run_and_verify;

auto nccl = [](const gpu::GpuRunOptions& options) { return gpu::NcclExecutor(options); };

void expect_verified(const PlanSpec& spec, Dtype dtype) { test::expect_verified(spec, dtype, nccl); }

}  // namespace

TEST_CASE("gpu-nccl: every algorithm at the P this machine allows", "[gpu][nccl]") {
  RINGLAB_REQUIRE_GPU();
  const int64_t most = gpu::nccl_max_single_process_ranks(gpu::device_count());
  WARN("gpu-nccl tests: " << gpu::nccl_version_text() << ", " << gpu::device_count() << " device(s): testing P up to "
                          << std::min<int64_t>(most, 4) << (most == 1 ? " (NCCL allows one rank per GPU)" : ""));
  for (int64_t P : {1, 2, 4}) {
    if (P > most) break;
    for (const char* algo : {"ring", "allgather", "ulysses", "hybrid"}) {
      if (std::string(algo) == "hybrid" && P < 4) continue;
      for (const char* layout : {"contiguous", "zigzag"}) {
        expect_verified(gpu_spec(algo, layout, P, true, true, std::string(algo) == "hybrid" ? 2 : 0), Dtype::bf16);
      }
    }
  }
}

TEST_CASE("gpu-nccl: fp32 and fp16 paths", "[gpu][nccl]") {
  RINGLAB_REQUIRE_GPU();
  expect_verified(gpu_spec("ring", "zigzag", 1, true, true), Dtype::fp32);
  expect_verified(gpu_spec("ulysses", "striped", 1, false, true), Dtype::fp16);
}

TEST_CASE("gpu-nccl: more ranks than NCCL allows are refused with the reason", "[gpu][nccl]") {
  RINGLAB_REQUIRE_GPU();
  const int64_t too_many = gpu::nccl_max_single_process_ranks(gpu::device_count()) + 1;
  const std::string why = gpu::nccl_single_process_support(too_many);
  CHECK_THAT(why, Catch::Contains("one GPU per rank"));
  CHECK_THAT(why, Catch::Contains("--executor streams"));
  const Plan plan = build_plan(gpu_spec("ring", "contiguous", too_many, false, false));
  gpu::NcclExecutor executor(gpu::GpuRunOptions{});
  CHECK_THROWS_AS(executor.execute(plan, make_inputs(plan.spec().dims, 0, false), {}), UsageError);
}

}  // namespace ringlab
