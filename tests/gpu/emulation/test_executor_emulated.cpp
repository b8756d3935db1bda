// The gpu-streams executor run on the CPU: its host code as compiled for the GPU, the CUDA
// runtime replaced by mock_cuda_runtime.cpp (synchronous, host memory) and the kernels by their
// warp-emulated selves (emulated_launchers.cpp). Checks that every algorithm and layout moves the
// right data through the right slots and merges it right — the executor's data flow — on any
// machine. (Concurrency between streams is the real-GPU tests' job: tests/gpu/test_gpu_streams.cpp.)
#include <catch2/catch.hpp>

#include <algorithm>
#include <tuple>

#include "reference/layout.hpp"
#include "sim/cost/dry_executor.hpp"
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

auto streams = [](const gpu::GpuRunOptions& options) { return gpu::StreamsExecutor(options); };

template <class Make = decltype(streams)>
void expect_verified(const PlanSpec& spec, Dtype dtype, Make make = streams) {
  const test::GpuCheck check = run_and_verify(spec, dtype, make);
  INFO(spec.describe() << " [" << gpu::dtype_name(dtype) << "]: " << test::describe(check.verification));
  CHECK(check.verification.ok());
}

// The general mask on a gpu_spec: a window, packed documents, and S (before padding) uneven as
// ringlab's config makes it (sim/run/config.cpp: padded up to the layout's units, hidden by the mask).
PlanSpec masked_spec(PlanSpec spec, int64_t window, std::vector<int64_t> documents, int64_t seq = 0) {
  if (seq > 0) {
    spec.dims.seq = seq;
    spec.padding = layout_padding(spec.layout, seq, spec.ranks, spec.block);
    spec.dims.seq += spec.padding;
  }
  spec.window = window;
  spec.documents = std::move(documents);
  return spec;
}

// Documents over gpu_spec's 96 tokens: [0, 7) [7] [8, 41) [41, 96) — a 1-token document, and
// documents that cross the blocks — where the layout takes any lengths; where it cuts each document
// into units (per-document zig-zag and striped), a shortest document of one granule and two more.
std::vector<int64_t> documents_for(const PlanSpec& spec) {
  const int64_t granule = document_granule(spec.layout, spec.ranks, spec.block);
  if (granule == 1) return {7, 1, 33, 55};
  const int64_t rest = spec.dims.seq - granule, half = rest / 2 / granule * granule;
  return {granule, half, rest - half};
}

// The same plan with the plain causal / full mask: its outputs must not verify against the general
// mask's reference — the mask matters for the check to mean anything.
void expect_mask_matters(const PlanSpec& spec, const test::GpuCheck& masked) {
  const ReferenceOutputs plain_reference = [&] {
    gpu::GpuRunOptions options;
    options.dtype = Dtype::fp32;
    const AttentionInputs<double> inputs = make_inputs(spec.dims, 1, spec.backward).cast<double>();
    return compute_reference(inputs, spec.causal ? Mask(MaskKind::causal) : Mask(), spec.backward);
  }();
  const Verification against_plain =
      verify(masked.result.outputs, plain_reference, "plain", gpu::gpu_tolerance_function(Dtype::fp32));
  INFO("against the plain mask: " << test::describe(against_plain));
  CHECK_FALSE(against_plain.ok());
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

// Every algorithm and layout at P = 3 and 4 with documents (documents_for), a window, and both.
TEST_CASE("emulated gpu-streams: --docs and --window, P = 3 and 4, forward and backward",
          "[gpu][emulated][streams][mask]") {
  // Every algorithm x layout at P = 3; at P = 4 the ring on every layout and Ulysses once (the mask
  // reaches the kernels through the same GpuRank code whatever the algorithm: P = 4 adds the even
  // split and the hybrid-sized groups, not a new path).
  const auto [algo, layout, P] = GENERATE(table<std::string, std::string, int64_t>({{"ring", "contiguous", 3},
                                                                                    {"ring", "zigzag", 3},
                                                                                    {"ring", "striped", 3},
                                                                                    {"allgather", "contiguous", 3},
                                                                                    {"allgather", "zigzag", 3},
                                                                                    {"allgather", "striped", 3},
                                                                                    {"ulysses", "contiguous", 3},
                                                                                    {"ulysses", "zigzag", 3},
                                                                                    {"ulysses", "striped", 3},
                                                                                    {"ring", "contiguous", 4},
                                                                                    {"ring", "zigzag", 4},
                                                                                    {"ring", "striped", 4},
                                                                                    {"ulysses", "zigzag", 4}}));
  const bool causal = GENERATE(false, true);
  INFO(algo << " " << layout << " P=" << P << (causal ? " causal" : ""));
  SECTION("documents") {
    const PlanSpec base = gpu_spec(algo, layout, P, causal, true);
    const PlanSpec spec = masked_spec(base, 0, documents_for(base));
    expect_verified(spec, Dtype::fp32);
  }
  SECTION("window 10") {
    const PlanSpec spec = masked_spec(gpu_spec(algo, layout, P, causal, true), 10, {});
    expect_verified(spec, Dtype::fp32);
  }
  SECTION("documents and window 20") {
    const PlanSpec base = gpu_spec(algo, layout, P, causal, true);
    const PlanSpec spec = masked_spec(base, 20, documents_for(base));
    const test::GpuCheck check = run_and_verify(spec, Dtype::fp32, streams);
    INFO(spec.describe() << ": " << test::describe(check.verification));
    CHECK(check.verification.ok());
    expect_mask_matters(spec, check);
  }
}

TEST_CASE("emulated gpu-streams: documents and window with the tensor-core kernels", "[gpu][emulated][streams][mask]") {
  const PlanSpec zigzag = gpu_spec("ring", "zigzag", 3, true, true);
  expect_verified(masked_spec(zigzag, 24, documents_for(zigzag)), Dtype::bf16);
  expect_verified(masked_spec(gpu_spec("ulysses", "contiguous", 4, false, true), 16, {50, 46}), Dtype::fp16);
  expect_verified(masked_spec(gpu_spec("hybrid", "contiguous", 4, true, true, 2), 0, {30, 1, 65}), Dtype::bf16);
}

// Uneven shapes: S = 97 and 1000 (1001 at P = 4) on layouts that need S a multiple of P (or 2P):
// padded, the padding hidden by the mask, cut from the outputs.
TEST_CASE("emulated gpu-streams: uneven S is padded, P = 3 and 4", "[gpu][emulated][streams][mask]") {
  const std::string layout = GENERATE("contiguous", "zigzag");
  const int64_t P = GENERATE(3, 4);
  INFO(layout << " P=" << P);
  PlanSpec small = masked_spec(gpu_spec("ring", layout, P, true, true), 0, {}, 97);
  REQUIRE(small.padding > 0);
  expect_verified(small, Dtype::fp32);
  // Documents where the layout takes any lengths (per-document zig-zag cuts each into 2P chunks).
  const bool any_lengths = layout == "contiguous";
  small = masked_spec(gpu_spec("ulysses", layout, P, false, true), 12,
                      any_lengths ? std::vector<int64_t>{40, 1, 56} : std::vector<int64_t>{}, 97);
  expect_verified(small, Dtype::fp32);
  const int64_t S = P == 3 ? 1000 : 1001;  // uneven at both P
  PlanSpec large = masked_spec(gpu_spec("ring", layout, P, true, true), 100,
                               any_lengths ? std::vector<int64_t>{300, 1, 400, S - 701} : std::vector<int64_t>{}, S);
  large.dims.heads = 2, large.dims.kv_heads = 1;
  REQUIRE(large.padding > 0);
  const test::GpuCheck check = run_and_verify(large, Dtype::fp32, streams);
  INFO(large.describe() << ": " << test::describe(check.verification));
  CHECK(check.verification.ok());
}

TEST_CASE("emulated gpu-streams: the erratum variants fail as in the simulator", "[gpu][emulated][streams][errata]") {
  PlanSpec reverse = gpu_spec("ring", "contiguous", 3, false, true);
  reverse.erratum = Erratum::reverse_dkv;
  const test::GpuCheck wrong = run_and_verify(reverse, Dtype::fp32, streams);
  CHECK_FALSE(wrong.verification.ok());
  reverse.ranks = 2;  // at P = 2 the wrong direction is invisible (the book's erratum 1)
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

// The executor contract across executors: gpu-streams reports, rank by rank, the work and traffic
// the dry executor's cost model predicts for the same plan, and traces the same compute events
// (tests/run/test_executors_agree.cpp holds the sim executor to the same).
TEST_CASE("emulated gpu-streams and the dry executor: the same blocks, pairs, FLOPs and bytes per rank",
          "[gpu][emulated][streams][agree]") {
  using ComputeKey = std::tuple<int, std::string, int, std::string, int, int, std::string, double>;
  auto compute_events = [](const std::vector<TraceEvent>& trace) {
    std::vector<ComputeKey> keys;
    for (const TraceEvent& e : trace)
      if (e.lane == TraceLane::compute && e.flops >= 0)
        keys.emplace_back(e.rank, e.label, e.step, e.name, e.q_block, e.kv_block, e.mask, e.flops);
    std::sort(keys.begin(), keys.end());
    return keys;
  };
  for (const char* algo : {"ring", "allgather", "ulysses", "hybrid"})
    for (const char* layout : {"contiguous", "zigzag"})
      for (int64_t P : {1, 3, 4})
        for (bool general : {false, true}) {
          if (std::string(algo) == "hybrid" && P != 4) continue;
          PlanSpec spec = gpu_spec(algo, layout, P, true, true, std::string(algo) == "hybrid" ? 2 : 0);
          if (general) spec = masked_spec(spec, 20, documents_for(spec));  // skipped and partial blocks by the mask
          const test::GpuCheck check = run_and_verify(spec, Dtype::fp32, streams);
          spec.element_bytes = 4;  // fp32 on the wire, as run_and_verify built it
          const Plan plan = build_plan(spec);
          INFO(plan.spec().describe());
          DryExecutor dry(hardware_preset("h100-ib", 64));
          ExecuteOptions traced;
          traced.trace = true;
          const ExecutionResult predicted = dry.execute(plan, {}, traced);
          REQUIRE(check.result.ranks.size() == predicted.ranks.size());
          CHECK(check.result.time.kind == TimeKind::device);
          for (size_t r = 0; r < predicted.ranks.size(); ++r) {
            INFO("rank " << r);
            const RankSummary &g = check.result.ranks[r], &d = predicted.ranks[r];
            CHECK(g.blocks_computed == d.blocks_computed);
            CHECK(g.blocks_skipped == d.blocks_skipped);
            CHECK(g.blocks_masked == d.blocks_masked);
            CHECK(g.pairs == d.pairs);
            CHECK(g.flops == Approx(d.flops));
            CHECK(g.counters.bytes_sent == d.counters.bytes_sent);
            CHECK(g.counters.bytes_received == d.counters.bytes_received);
          }
          CHECK(compute_events(check.result.trace) == compute_events(predicted.trace));
        }
}

#ifdef RINGLAB_WITH_NCCL
// gpu-nccl's rank threads, each on its mock "device", talking through the mock NCCL
// (mock_nccl.cpp): the op interpretation, the all-to-all staging (pack, grouped send/receive with
// every member, unpack), all-gather and reduce-scatter.
TEST_CASE("emulated gpu-nccl: rank threads through a mock NCCL", "[gpu][emulated][nccl]") {
  auto nccl = [](const gpu::GpuRunOptions& options) { return gpu::NcclExecutor(options); };
  ringlab_mock_set_device_count(4);
  for (const char* algo : {"ring", "allgather", "ulysses"})
    for (const char* layout : {"zigzag", "striped"})
      for (int64_t P : {1, 3}) expect_verified(gpu_spec(algo, layout, P, true, true), Dtype::fp32, nccl);
  expect_verified(gpu_spec("hybrid", "contiguous", 4, true, true, 2), Dtype::fp32, nccl);
  expect_verified(gpu_spec("ulysses", "zigzag", 4, false, true), Dtype::bf16, nccl);
  // The general mask and an uneven S (97 padded to 99) through the same rank code.
  expect_verified(masked_spec(gpu_spec("ring", "contiguous", 3, true, true), 20, {7, 1, 33, 56}, 97), Dtype::fp32,
                  nccl);
  ringlab_mock_set_device_count(1);
  CHECK_THAT(gpu::nccl_single_process_support(2), Catch::Contains("refuses two ranks on one GPU"));
}
#endif

}  // namespace ringlab
