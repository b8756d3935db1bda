// gpu-streams on a real device: every algorithm and layout at P in {1, 2, 3, 4, 8}, forward and
// backward, causal or not, in bf16, fp16 and fp32 with the per-precision tolerances; bigger
// shapes that span many tiles; windows, documents and uneven S; and the erratum variants failing
// as they do in the simulator.
#include <catch2/catch.hpp>

#include "reference/layout.hpp"
#include "tests/gpu/gpu_test_support.hpp"

namespace ringlab {
namespace {

using gpu::Dtype;
using test::gpu_spec;
using test::run_and_verify;

auto streams = [](const gpu::GpuRunOptions& options) { return gpu::StreamsExecutor(options); };

void expect_verified(const PlanSpec& spec, Dtype dtype) { test::expect_verified(spec, dtype, streams); }

}  // namespace

TEST_CASE("gpu-streams: every algorithm, layout and P, fwd+bwd, every precision", "[gpu][streams]") {
  RINGLAB_REQUIRE_GPU();
  const std::string algo = GENERATE("ring", "allgather", "ulysses", "hybrid");
  const std::string layout = GENERATE("contiguous", "zigzag", "striped");
  const int64_t P = GENERATE(1, 2, 3, 4, 8);
  const Dtype dtype = GENERATE(Dtype::bf16, Dtype::fp16, Dtype::fp32);
  const bool causal = GENERATE(false, true);
  if (algo == "hybrid" && P % 2 != 0) return;  // hybrid needs 1 < U < P: U = 2 for even P
  expect_verified(gpu_spec(algo, layout, P, causal, true, algo == "hybrid" ? 2 : 0), dtype);
}

TEST_CASE("gpu-streams: many tiles per block (S = 4096, D = 128, GQA)", "[gpu][streams]") {
  RINGLAB_REQUIRE_GPU();
  const std::string algo = GENERATE("ring", "ulysses", "hybrid");
  PlanSpec spec = gpu_spec(algo, "zigzag", 4, true, true, algo == "hybrid" ? 2 : 0);
  spec.dims.seq = 4096;
  spec.dims.heads = 8;
  spec.dims.kv_heads = 4;
  spec.dims.dim = 128;
  spec.dims.batch = 2;
  expect_verified(spec, Dtype::bf16);
}

// The general mask on the device: a window and packed documents (a 1-token one, others crossing
// 64-row tiles) on S = 4096 — many tiles per block, so the tile classification skips, computes
// in full and masks — and an uneven S padded to the layout's units.
TEST_CASE("gpu-streams: --window, --docs and uneven S", "[gpu][streams][mask]") {
  RINGLAB_REQUIRE_GPU();
  const Dtype dtype = GENERATE(Dtype::bf16, Dtype::fp16, Dtype::fp32);
  const bool causal = GENERATE(false, true);
  PlanSpec spec = gpu_spec("ring", "contiguous", 4, causal, true);
  spec.dims.seq = 4096;
  spec.dims.dim = 128;
  spec.window = 300;
  spec.documents = {1000, 1, 1500, 1595};
  expect_verified(spec, dtype);
  PlanSpec uneven = gpu_spec("ulysses", "zigzag", 3, causal, true);
  uneven.dims.seq = 1000;
  uneven.padding = layout_padding(uneven.layout, 1000, 3, 0);
  uneven.dims.seq += uneven.padding;
  uneven.window = 100;
  expect_verified(uneven, dtype);
}

TEST_CASE("gpu-streams: --no-skip computes masked blocks with the same result", "[gpu][streams]") {
  RINGLAB_REQUIRE_GPU();
  PlanSpec spec = gpu_spec("ring", "contiguous", 4, true, true);
  spec.skip = false;
  expect_verified(spec, Dtype::bf16);
}

TEST_CASE("gpu-streams: the erratum variants fail as in the simulator", "[gpu][streams][errata]") {
  RINGLAB_REQUIRE_GPU();
  const Dtype dtype = GENERATE(Dtype::bf16, Dtype::fp32);
  PlanSpec reverse = gpu_spec("ring", "contiguous", 3, false, true);
  reverse.erratum = Erratum::reverse_dkv;
  const test::GpuCheck wrong = run_and_verify(reverse, dtype, streams);
  CHECK_FALSE(wrong.verification.ok());
  CHECK(wrong.verification.checks[0].result.ok);        // out: the forward is right
  CHECK_FALSE(wrong.verification.checks[3].result.ok);  // dk: the gradients land on the wrong block
  reverse.ranks = 2;                                    // invisible at P = 2 (the book's erratum 1)
  CHECK(run_and_verify(reverse, dtype, streams).verification.ok());

  PlanSpec offset = gpu_spec("ring", "contiguous", 4, true, false);
  offset.erratum = Erratum::kv_offset_mask;
  CHECK_FALSE(run_and_verify(offset, dtype, streams).verification.ok());
}

TEST_CASE("gpu-streams: repeated runs give the same forward", "[gpu][streams]") {
  RINGLAB_REQUIRE_GPU();
  PlanSpec spec = gpu_spec("ring", "zigzag", 4, true, false);
  spec.element_bytes = 2;
  const Plan plan = build_plan(spec);
  const AttentionInputs<float> inputs = make_inputs(spec.dims, 3, false);
  gpu::GpuRunOptions options;
  gpu::StreamsRun run(plan, inputs, options);
  const ExecutionResult first = run.run(true);
  const ExecutionResult second = run.run(true);
  CHECK(first.outputs.out == second.outputs.out);  // accumulators reset; merges in a fixed order
  CHECK(first.outputs.lse == second.outputs.lse);
  CHECK(second.time.kind == TimeKind::device);
  CHECK(second.time.seconds > 0);
}

// GpuRunOptions::span_events off (bench_gpu_ring's efficiency runs) on the device: the same
// forward bit for bit (its merges run in a fixed order), the run's device time, the same FLOPs
// per rank, no trace. P = 3 and 8.
TEST_CASE("gpu-streams: span_events off times the run alone, with the same forward", "[gpu][streams]") {
  RINGLAB_REQUIRE_GPU();
  const int64_t P = GENERATE(3, 8);
  PlanSpec spec = gpu_spec("ring", "zigzag", P, true, false);
  spec.element_bytes = 2;
  const Plan plan = build_plan(spec);
  const AttentionInputs<float> inputs = make_inputs(spec.dims, 5, false);
  gpu::GpuRunOptions options;
  gpu::StreamsRun every_op(plan, inputs, options);
  options.span_events = false;
  gpu::StreamsRun whole(plan, inputs, options);
  const ExecutionResult timed = every_op.run(true);
  const ExecutionResult lean = whole.run(true);
  CHECK(lean.outputs.out == timed.outputs.out);
  CHECK(lean.outputs.lse == timed.outputs.lse);
  CHECK(lean.time.kind == TimeKind::device);
  CHECK(lean.time.seconds > 0);
  CHECK(lean.trace.empty());
  REQUIRE(lean.ranks.size() == timed.ranks.size());
  for (size_t r = 0; r < lean.ranks.size(); ++r) CHECK(lean.ranks[r].counters.flops == timed.ranks[r].counters.flops);
}

// GpuRunOptions::graph on the device: the walk captured as one CUDA graph (every stream forked
// from compute stream 0 and joined back), launched twice, verifies against exact attention each
// time, forward+backward, with the plain run's forward bit for bit and its FLOPs. P = 3 and 8.
TEST_CASE("gpu-streams: one CUDA graph, launched twice, verifies and matches the plain run", "[gpu][streams]") {
  RINGLAB_REQUIRE_GPU();
  const int64_t P = GENERATE(3, 8);
  PlanSpec spec = gpu_spec("ring", "zigzag", P, true, true);
  spec.element_bytes = 2;
  const Plan plan = build_plan(spec);
  AttentionInputs<double> x = make_inputs(spec.dims, 5, true).cast<double>();
  x.q = gpu::rounded_to_dtype(x.q, gpu::Dtype::bf16), x.k = gpu::rounded_to_dtype(x.k, gpu::Dtype::bf16);
  x.v = gpu::rounded_to_dtype(x.v, gpu::Dtype::bf16), x.dout = gpu::rounded_to_dtype(x.dout, gpu::Dtype::bf16);
  const AttentionInputs<float> inputs = x.cast<float>();
  const ReferenceOutputs reference = compute_reference(x, MaskKind::causal, true);
  gpu::GpuRunOptions options;
  gpu::StreamsRun plain_run(plan, inputs, options);
  const ExecutionResult plain = plain_run.run(true);
  options.graph = true;
  gpu::StreamsRun graph_run(plan, inputs, options);
  for (int launch = 0; launch < 2; ++launch) {
    INFO("launch " << launch);
    const ExecutionResult result = graph_run.run(true);
    const Verification v =
        verify(result.outputs, reference, result.executor, gpu::gpu_tolerance_function(gpu::Dtype::bf16));
    INFO(test::describe(v));
    CHECK(v.ok());
    CHECK(result.outputs.out == plain.outputs.out);
    CHECK(result.time.seconds > 0);
    CHECK(result.trace.empty());
    REQUIRE(result.ranks.size() == plain.ranks.size());
    for (size_t r = 0; r < plain.ranks.size(); ++r)
      CHECK(result.ranks[r].counters.flops == plain.ranks[r].counters.flops);
  }
}

}  // namespace ringlab
