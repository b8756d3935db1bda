// The gpu-streams executor run on the CPU: its host code as compiled for the GPU, the CUDA
// runtime replaced by mock_cuda_runtime.cpp (synchronous, host memory) and the kernels by their
// warp-emulated selves (emulated_launchers.cpp). Checks that every algorithm and layout moves the
// right data through the right slots and merges it right — the executor's data flow — on any
// machine. (Concurrency between streams is the real-GPU tests' job: tests/gpu/test_gpu_streams.cpp.)
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <tuple>

#include "executors/dry/dry_executor.hpp"
#include "executors/gpu/gpu_rank.hpp"
#include "reference/layout.hpp"
#include "reference/precision.hpp"
#include "tests/gpu/emulation/emulated_counts.hpp"
#include "tests/gpu/gpu_test_support.hpp"
#ifdef RINGLAB_WITH_NCCL
#include "executors/gpu/nccl_executor.hpp"
#endif

void ringlab_mock_set_device_count(int count);    // mock_cuda_runtime.cpp
int64_t ringlab_mock_event_records(bool timing);  // mock_cuda_runtime.cpp

namespace ringlab {
namespace {

using gpu::Dtype;
using test::gpu_spec;
using test::run_and_verify;

auto streams = [](const gpu::GpuRunOptions& options) { return gpu::StreamsExecutor(options); };

template <class Make = decltype(streams)>
test::GpuCheck expect_verified(const PlanSpec& spec, Dtype dtype, Make make = streams) {
  test::GpuCheck check = run_and_verify(spec, dtype, make);
  INFO(spec.describe() << " [" << gpu::dtype_name(dtype) << "]: " << test::describe(check.verification));
  CHECK(check.verification.ok());
  return check;
}

// The general mask on a gpu_spec: a window, packed documents, and S (before padding) uneven as
// ringlab's config makes it (sim/pipeline/config.cpp: padded up to the layout's units, hidden by the mask).
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

// GpuRunOptions::span_events off (bench_gpu_ring's efficiency runs): the same outputs and FLOPs per
// rank, the run's device time, and on the host two timing events per run (its start and end, per
// stream) instead of two per op; a traced run keeps every op's. P = 3 and 4, forward+backward.
TEST_CASE("emulated gpu-streams: span_events off times the run alone, with the same outputs and FLOPs",
          "[gpu][emulated][streams]") {
  for (const auto& [layout, P] : {std::pair<const char*, int64_t>{"zigzag", 3}, {"contiguous", 4}}) {
    const PlanSpec spec = gpu_spec("ring", layout, P, true, true);
    const Plan plan = build_plan(spec);
    INFO(plan.spec().describe());
    const AttentionInputs<float> inputs = make_inputs(spec.dims, 1, true);
    auto run = [&](bool span_events, bool trace, int64_t& timing_records) {
      gpu::GpuRunOptions options;
      options.dtype = Dtype::fp32;
      options.span_events = span_events;
      gpu::StreamsRun streams_run(plan, inputs, options);
      ringlab_mock_event_records(true);
      ExecutionResult result = streams_run.run(true, trace);
      timing_records = ringlab_mock_event_records(true);
      return result;
    };
    int64_t every_op = 0, lean = 0, lean_traced = 0;
    const ExecutionResult full = run(true, false, every_op);
    const ExecutionResult whole = run(false, false, lean);
    const ExecutionResult traced = run(false, true, lean_traced);
    // One start event, then an end event per compute and per transfer stream.
    CHECK(lean == 1 + 2 * P);
    CHECK(every_op > lean + 4 * P);  // at least two ops per rank, two events each
    CHECK(lean_traced == every_op);
    CHECK(whole.trace.empty());
    CHECK_FALSE(traced.trace.empty());
    CHECK(whole.time.seconds > 0);
    REQUIRE(whole.outputs.out.size() == full.outputs.out.size());
    CHECK(whole.outputs.out == full.outputs.out);
    CHECK(whole.outputs.dq == full.outputs.dq);
    CHECK(whole.outputs.dk == full.outputs.dk);
    CHECK(whole.outputs.dv == full.outputs.dv);
    REQUIRE(whole.ranks.size() == full.ranks.size());
    for (size_t r = 0; r < full.ranks.size(); ++r) {
      INFO("rank " << r);
      CHECK(full.ranks[r].counters.flops > 0);
      CHECK(whole.ranks[r].counters.flops == full.ranks[r].counters.flops);
      CHECK(whole.ranks[r].counters.compute_seconds == 0);
      CHECK(full.ranks[r].counters.compute_seconds > 0);
    }
  }
}

// The executor contract across executors: gpu-streams reports, rank by rank, the work and traffic
// the dry executor's cost model predicts for the same plan, and traces the same compute events
// (tests/pipeline/test_executors_agree.cpp holds the sim executor to the same).
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

// ---- the fused finalize (plan_fused_finalize) ----------------------------------------------------

namespace {

// A forward compute of kernel blocks {q_begin, q_end, kv_begin, kv_end}.
Op forward_compute(const std::vector<std::array<int64_t, 4>>& blocks) {
  ComputeOp compute;
  for (const auto& [q0, q1, k0, k1] : blocks) {
    KernelBlock kb;
    kb.q_rows = {q0, q1};
    kb.kv_rows = {k0, k1};
    compute.kernels.push_back(kb);
  }
  return Op{0, 0, compute};
}

// A random rank's op list for the rules' brute-force checks: 1-3 forward computes of 0-3 kernel
// blocks over 6 query and 4 key rows (a block's query rows start at most at `q0_max` and hold at
// least `min_q_rows`; about one in ten has no keys), then a FinalizeOp.
std::vector<Op> random_forward_ops(std::mt19937& random, int64_t q0_max, int64_t min_q_rows, const Op& finalize) {
  auto uniform = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(random); };
  std::vector<Op> ops;
  for (int64_t c = uniform(1, 3); c > 0; --c) {
    std::vector<std::array<int64_t, 4>> blocks;
    for (int64_t k = uniform(0, 3); k > 0; --k) {
      const int64_t q0 = uniform(0, q0_max), kv0 = uniform(0, 3);
      blocks.push_back({q0, uniform(q0 + min_q_rows, 6), kv0, uniform(kv0 + (uniform(0, 9) > 0 ? 1 : 0), 4)});
    }
    ops.push_back(forward_compute(blocks));
  }
  ops.push_back(finalize);
  return ops;
}

// What any choice of finalising launches must achieve, by brute force over every choice: the
// launches (forward kernel blocks with rows, before FinalizeOp) in order, each a contribution to
// its rows; an accumulating one adds to its rows' state, a finalising one writes out = state + its
// own contribution and leaves the state as it was. With FinalizeOp doing nothing, a choice is right
// iff every row's out ends up holding every contribution to it. Returns the right choices (as
// FusedFinalize::finalizes): at most one exists (a row's writer must be its last launch).
std::vector<std::vector<std::vector<bool>>> right_choices(const std::vector<Op>& ops, int64_t rows) {
  std::vector<std::pair<size_t, size_t>> launches;  // (forward compute, block)
  std::vector<std::vector<bool>> shape;
  std::vector<const ComputeOp*> computes;
  for (const Op& op : ops) {
    if (std::holds_alternative<FinalizeOp>(op.body)) break;
    const auto* c = std::get_if<ComputeOp>(&op.body);
    if (c == nullptr || c->pass != Pass::forward) continue;
    for (size_t k = 0; k < c->kernels.size(); ++k)
      if (!c->kernels[k].q_rows.empty() && !c->kernels[k].kv_rows.empty()) launches.emplace_back(computes.size(), k);
    shape.emplace_back(c->kernels.size(), false);
    computes.push_back(c);
  }
  REQUIRE(launches.size() < 16);
  std::vector<std::vector<std::vector<bool>>> right;
  for (uint32_t choice = 0; choice < (1u << launches.size()); ++choice) {
    std::vector<std::set<size_t>> state(static_cast<size_t>(rows)), out(static_cast<size_t>(rows)), all = state;
    std::vector<bool> written(static_cast<size_t>(rows), false);
    std::vector<std::vector<bool>> finalizes = shape;
    for (size_t l = 0; l < launches.size(); ++l) {
      const auto [c, k] = launches[l];
      const bool finalizing = (choice >> l) & 1u;
      finalizes[c][k] = finalizing;
      const RowRange q = computes[c]->kernels[k].q_rows;
      for (int64_t r = q.begin; r < q.end; ++r) {
        const auto row = static_cast<size_t>(r);
        all[row].insert(l);
        if (finalizing) {
          out[row] = state[row], out[row].insert(l), written[row] = true;
        } else {
          state[row].insert(l);
        }
      }
    }
    bool ok = true;
    for (size_t row = 0; row < static_cast<size_t>(rows); ++row) ok = ok && written[row] && out[row] == all[row];
    if (ok) right.push_back(finalizes);
  }
  return right;
}

void expect_rule(const std::vector<Op>& ops, int64_t rows) {
  const std::vector<std::vector<std::vector<bool>>> right = right_choices(ops, rows);
  REQUIRE(right.size() <= 1);
  const bool finalize_op =
      std::any_of(ops.begin(), ops.end(), [](const Op& op) { return std::holds_alternative<FinalizeOp>(op.body); });
  for (const Dtype dtype : {Dtype::bf16, Dtype::fp16}) {
    const gpu::FusedFinalize fused = gpu::plan_fused_finalize(ops, rows, dtype);
    CHECK(fused.fused == (finalize_op && right.size() == 1));
    if (fused.fused) CHECK(fused.finalizes == right.front());
    if (!fused.fused) CHECK(fused.finalizes.empty());
  }
  CHECK_FALSE(gpu::plan_fused_finalize(ops, rows, Dtype::fp32).fused);  // fp32 has no fused kernel
}

}  // namespace

TEST_CASE("plan_fused_finalize: the launches that finalise, against every choice of them", "[gpu][fused]") {
  const Op finalize{0, 0, FinalizeOp{}};
  SECTION("one block over every row, then skipped computes") {
    ComputeOp skipped;
    const std::vector<Op> ops = {forward_compute({{0, 8, 0, 8}}), forward_compute({{0, 8, 0, 8}}), Op{0, 0, skipped},
                                 finalize};
    expect_rule(ops, 8);
    const gpu::FusedFinalize fused = gpu::plan_fused_finalize(ops, 8, Dtype::bf16);
    CHECK(fused.fused);  // the second compute finalises; the skipped one is counted, with no block
    CHECK(fused.finalizes == std::vector<std::vector<bool>>{{false}, {true}, {}});
  }
  SECTION("rows finished in an earlier op") {
    const std::vector<Op> ops = {forward_compute({{0, 4, 0, 8}, {4, 8, 0, 8}}), forward_compute({{4, 8, 0, 8}}),
                                 finalize};
    expect_rule(ops, 8);
    CHECK(gpu::plan_fused_finalize(ops, 8, Dtype::bf16).fused);
  }
  SECTION("overlapping blocks in one op: the earlier one's rows are not all its") {
    const std::vector<Op> ops = {forward_compute({{0, 8, 0, 8}}), forward_compute({{0, 4, 0, 8}, {2, 8, 0, 8}}),
                                 finalize};
    expect_rule(ops, 8);
    CHECK_FALSE(gpu::plan_fused_finalize(ops, 8, Dtype::bf16).fused);
  }
  SECTION("an untouched row, a block without keys") {
    expect_rule({forward_compute({{0, 6, 0, 8}}), finalize}, 8);
    expect_rule({forward_compute({{0, 8, 0, 8}}), forward_compute({{0, 8, 3, 3}}), finalize}, 8);
    CHECK_FALSE(gpu::plan_fused_finalize({forward_compute({{0, 6, 0, 8}}), finalize}, 8, Dtype::bf16).fused);
  }
  SECTION("no FinalizeOp; computes after it") {
    expect_rule({forward_compute({{0, 8, 0, 8}})}, 8);
    ComputeOp backward;
    backward.pass = Pass::backward;
    backward.kernels = std::get<ComputeOp>(forward_compute({{0, 4, 0, 8}}).body).kernels;
    const std::vector<Op> ops = {forward_compute({{0, 8, 0, 8}}), finalize, Op{0, 0, PrepareBackwardOp{}},
                                 Op{0, 0, backward}};
    expect_rule(ops, 8);
    CHECK(gpu::plan_fused_finalize(ops, 8, Dtype::fp16).fused);
  }
  SECTION("random op lists") {
    std::mt19937 random(16);
    int fused = 0;
    for (int trial = 0; trial < 300; ++trial) {
      const std::vector<Op> ops = random_forward_ops(random, 5, 0, finalize);
      INFO("trial " << trial);
      expect_rule(ops, 6);
      fused += gpu::plan_fused_finalize(ops, 6, Dtype::bf16).fused ? 1 : 0;
    }
    CHECK(fused > 10);  // both outcomes are exercised
    CHECK(fused < 290);
  }
}

// ---- the fused init (plan_fused_init) -----------------------------------------------------------

namespace {

// What any choice of starting launches must achieve, by brute force over every choice: the forward
// launches in order, each a contribution to its rows; a row's state begins as garbage (what
// init_accumulator would have cleared), a starting launch replaces its rows' state with its own
// contribution, any other adds to it. A choice is right iff every row's state ends up holding
// exactly every contribution to it (no garbage: an untouched row keeps it). Returns the right
// choices (as FusedInit::inits): at most one exists (a row's starter must be its first launch).
std::vector<std::vector<std::vector<bool>>> right_init_choices(const std::vector<Op>& ops, int64_t rows) {
  std::vector<std::pair<size_t, size_t>> launches;  // (forward compute, block)
  std::vector<std::vector<bool>> shape;
  std::vector<const ComputeOp*> computes;
  for (const Op& op : ops) {
    const auto* c = std::get_if<ComputeOp>(&op.body);
    if (c == nullptr || c->pass != Pass::forward) continue;
    for (size_t k = 0; k < c->kernels.size(); ++k)
      if (!c->kernels[k].q_rows.empty() && !c->kernels[k].kv_rows.empty()) launches.emplace_back(computes.size(), k);
    shape.emplace_back(c->kernels.size(), false);
    computes.push_back(c);
  }
  REQUIRE(launches.size() < 16);
  constexpr size_t kGarbage = SIZE_MAX;
  std::vector<std::vector<std::vector<bool>>> right;
  for (uint32_t choice = 0; choice < (1u << launches.size()); ++choice) {
    std::vector<std::set<size_t>> state(static_cast<size_t>(rows), std::set<size_t>{kGarbage});
    std::vector<std::set<size_t>> all(static_cast<size_t>(rows));
    std::vector<std::vector<bool>> inits = shape;
    for (size_t l = 0; l < launches.size(); ++l) {
      const auto [c, k] = launches[l];
      const bool starting = (choice >> l) & 1u;
      inits[c][k] = starting;
      const RowRange q = computes[c]->kernels[k].q_rows;
      for (int64_t r = q.begin; r < q.end; ++r) {
        const auto row = static_cast<size_t>(r);
        all[row].insert(l);
        if (starting) state[row].clear();
        state[row].insert(l);
      }
    }
    if (state == all) right.push_back(inits);
  }
  return right;
}

void expect_init_rule(const std::vector<Op>& ops, int64_t rows) {
  const std::vector<std::vector<std::vector<bool>>> right = right_init_choices(ops, rows);
  REQUIRE(right.size() <= 1);
  for (const Dtype dtype : {Dtype::bf16, Dtype::fp16}) {
    const gpu::FusedInit fused = gpu::plan_fused_init(ops, rows, dtype);
    CHECK(fused.fused == (right.size() == 1));
    if (fused.fused) CHECK(fused.inits == right.front());
    if (!fused.fused) CHECK(fused.inits.empty());
  }
  CHECK_FALSE(gpu::plan_fused_init(ops, rows, Dtype::fp32).fused);  // fp32 has no fused kernel
}

}  // namespace

TEST_CASE("plan_fused_init: the launches that start their rows, against every choice of them", "[gpu][fused]") {
  const Op finalize{0, 0, FinalizeOp{}};
  SECTION("a skipped compute, then one block over every row, then more") {
    const std::vector<Op> ops = {Op{0, 0, ComputeOp{}}, forward_compute({{0, 8, 0, 8}}),
                                 forward_compute({{0, 8, 0, 8}}), finalize};
    expect_init_rule(ops, 8);
    const gpu::FusedInit fused = gpu::plan_fused_init(ops, 8, Dtype::bf16);
    CHECK(fused.fused);  // the skipped compute is counted, with no block; the second starts
    CHECK(fused.inits == std::vector<std::vector<bool>>{{}, {true}, {false}});
  }
  SECTION("a rank's only block") {
    const std::vector<Op> ops = {forward_compute({{0, 8, 0, 8}}), finalize};
    expect_init_rule(ops, 8);
    const gpu::FusedInit init = gpu::plan_fused_init(ops, 8, Dtype::bf16);
    CHECK(init.inits == std::vector<std::vector<bool>>{{true}});
    // Started and finalised by one launch: no kernel touches the fp32 state.
    CHECK(gpu::fp32_state_unused(init, gpu::plan_fused_finalize(ops, 8, Dtype::bf16)));
    CHECK_FALSE(gpu::fp32_state_unused(init, gpu::FusedFinalize{}));
    CHECK_FALSE(gpu::fp32_state_unused(gpu::FusedInit{}, gpu::plan_fused_finalize(ops, 8, Dtype::bf16)));
    // Two blocks over the rows: the first writes the state the second reads.
    const std::vector<Op> two = {forward_compute({{0, 8, 0, 8}}), forward_compute({{0, 8, 0, 8}}), finalize};
    CHECK_FALSE(gpu::fp32_state_unused(gpu::plan_fused_init(two, 8, Dtype::bf16),
                                       gpu::plan_fused_finalize(two, 8, Dtype::bf16)));
    // One launch per row but rows in two blocks: still no state.
    const std::vector<Op> split = {forward_compute({{0, 4, 0, 8}, {4, 8, 0, 8}}), finalize};
    CHECK(gpu::fp32_state_unused(gpu::plan_fused_init(split, 8, Dtype::bf16),
                                 gpu::plan_fused_finalize(split, 8, Dtype::bf16)));
  }
  SECTION("rows started in two blocks of one op, or in two ops") {
    expect_init_rule({forward_compute({{0, 4, 0, 8}, {4, 8, 0, 8}}), forward_compute({{0, 8, 0, 8}}), finalize}, 8);
    const std::vector<Op> ops = {forward_compute({{0, 4, 0, 8}}), forward_compute({{4, 8, 0, 8}, {0, 8, 0, 8}})};
    expect_init_rule(ops, 8);
    CHECK(gpu::plan_fused_init(ops, 8, Dtype::fp16).inits == std::vector<std::vector<bool>>{{true}, {true, false}});
  }
  SECTION("the first block does not cover every row it starts alone: the init stays") {
    // Rows 4..7's first block also covers rows 0..3, which an earlier block touched.
    const std::vector<Op> ops = {forward_compute({{0, 4, 0, 8}}), forward_compute({{0, 8, 0, 8}}), finalize};
    expect_init_rule(ops, 8);
    CHECK_FALSE(gpu::plan_fused_init(ops, 8, Dtype::bf16).fused);
    expect_init_rule({forward_compute({{0, 8, 0, 8}, {2, 6, 0, 8}})}, 8);  // overlapping blocks of one op: fused
  }
  SECTION("an untouched row, a block without keys") {
    expect_init_rule({forward_compute({{0, 6, 0, 8}}), finalize}, 8);
    CHECK_FALSE(gpu::plan_fused_init({forward_compute({{0, 6, 0, 8}}), finalize}, 8, Dtype::bf16).fused);
    const std::vector<Op> keyless = {forward_compute({{0, 8, 3, 3}}), forward_compute({{0, 4, 0, 8}, {4, 8, 0, 8}})};
    expect_init_rule(keyless, 8);
    CHECK(gpu::plan_fused_init(keyless, 8, Dtype::bf16).inits == std::vector<std::vector<bool>>{{false}, {true, true}});
  }
  SECTION("backward computes do not count") {
    ComputeOp backward;
    backward.pass = Pass::backward;
    backward.kernels = std::get<ComputeOp>(forward_compute({{0, 4, 0, 8}}).body).kernels;
    const std::vector<Op> ops = {Op{0, 0, backward}, forward_compute({{0, 8, 0, 8}}), finalize};
    expect_init_rule(ops, 8);
    CHECK(gpu::plan_fused_init(ops, 8, Dtype::bf16).fused);
  }
  SECTION("random op lists") {
    std::mt19937 random(25);
    int fused = 0;
    for (int trial = 0; trial < 300; ++trial) {
      const std::vector<Op> ops = random_forward_ops(random, 2, 1, finalize);
      INFO("trial " << trial);
      expect_init_rule(ops, 6);
      fused += gpu::plan_fused_init(ops, 6, Dtype::bf16).fused ? 1 : 0;
    }
    CHECK(fused > 10);  // both outcomes are exercised
    CHECK(fused < 290);
  }
}

namespace {

// out comes back in the input dtype, whichever path finalised it (the fused forward or
// finalize_accumulator): for bf16 / fp16 every element is a value of that type; fp32 is not
// rounded — most of its elements are not bf16 values.
void expect_out_stored_in(Dtype dtype, const Tensor<float>& out) {
  REQUIRE(out.size() > 0);
  int64_t unrepresentable = 0;
  const Precision storage = dtype == Dtype::fp16 ? Precision::fp16 : Precision::bf16;
  for (int64_t i = 0; i < out.size(); ++i) unrepresentable += round_to(storage, out[i]) != out[i] ? 1 : 0;
  INFO(unrepresentable << " of " << out.size() << " out elements are not " << precision_name(storage) << " values");
  if (dtype == Dtype::fp32) {
    CHECK(unrepresentable > out.size() / 2);
  } else {
    CHECK(unrepresentable == 0);
  }
}

int64_t count_true(const std::vector<std::vector<bool>>& launches) {
  int64_t count = 0;
  for (const std::vector<bool>& blocks : launches) count += std::count(blocks.begin(), blocks.end(), true);
  return count;
}

// How many ranks fused their finalize, and how many their init.
struct Fused {
  int64_t finalize = 0, init = 0;
  int64_t stateless = 0;  // ranks that allocate no fp32 state: a kernel touching it would fault
};

// Runs the spec on the executor `make` returns, verifies its outputs, and checks that each rank
// fused its finalize and its init exactly as plan_fused_finalize and plan_fused_init say (counting
// the emulated launches: a run that silently fell back to finalize_accumulator or init_accumulator
// fails, and so does one that dropped init_accumulator where it is needed: its state is stale).
// init_accumulator is counted rank by rank (by the accumulator it clears): a rank that does not
// fuse its init clears it twice (constructor, reset before the run: no warm-up here), one that
// fuses never.
template <class Make = decltype(streams)>
Fused expect_fusion_as_planned(PlanSpec spec, Dtype dtype, Make make = streams) {
  spec.element_bytes = gpu::dtype_bytes(dtype);  // as run_and_verify builds the plan
  const Plan plan = build_plan(spec);
  Fused fused;
  int64_t finalizing_launches = 0, starting_launches = 0;
  for (int64_t r = 0; r < plan.ranks(); ++r) {
    const std::vector<Op> ops = expand(plan, r);
    const gpu::FusedFinalize finalize = gpu::plan_fused_finalize(ops, plan.block_tokens(), dtype);
    const gpu::FusedInit init = gpu::plan_fused_init(ops, plan.block_tokens(), dtype);
    fused.finalize += finalize.fused ? 1 : 0;
    fused.init += init.fused ? 1 : 0;
    fused.stateless += gpu::fp32_state_unused(init, finalize) ? 1 : 0;
    finalizing_launches += count_true(finalize.finalizes);
    starting_launches += count_true(init.inits);
  }
  const int64_t finalizing_before = gpu::emulated_fused_forward_launches;
  const int64_t finalize_before = gpu::emulated_finalize_accumulator_launches;
  const int64_t starting_before = gpu::emulated_init_forward_launches;
  {
    const std::lock_guard<std::mutex> lock(gpu::emulated_init_mutex);
    gpu::emulated_init_accumulator_launches.clear();
  }
  const test::GpuCheck check = expect_verified(spec, dtype, make);
  INFO(spec.describe() << " [" << gpu::dtype_name(dtype) << "]");
  expect_out_stored_in(dtype, check.result.outputs.out);
  CHECK(gpu::emulated_fused_forward_launches - finalizing_before == finalizing_launches);
  CHECK(gpu::emulated_finalize_accumulator_launches - finalize_before == plan.ranks() - fused.finalize);
  CHECK(gpu::emulated_init_forward_launches - starting_before == starting_launches);
  const std::lock_guard<std::mutex> lock(gpu::emulated_init_mutex);
  CHECK(static_cast<int64_t>(gpu::emulated_init_accumulator_launches.size()) == plan.ranks() - fused.init);
  for (const auto& [accumulator, launches] : gpu::emulated_init_accumulator_launches) CHECK(launches == 2);
  return fused;
}

}  // namespace

TEST_CASE("emulated gpu-streams and gpu-nccl: the fused finalize and init, where they apply and where not",
          "[gpu][emulated][streams][fused]") {
  // Every plan the builder makes starts each rank with its own whole block (the diagonal step), so
  // the init fuses wherever the dtype has the kernel; op lists where it must not are the rule's
  // test above ("plan_fused_init").
  auto both = [](const Fused& fused, int64_t ranks) { return fused.finalize == ranks && fused.init == ranks; };
  SECTION("every rank's rows started and finished by whole launches: every rank fuses both") {
    // Once with the backward (softmax_delta reads the fused out; the emulated backward is slow), the
    // plain and the general mask, padding; P = 1: the only block, the fp32 state never touched.
    const Fused ring = expect_fusion_as_planned(gpu_spec("ring", "contiguous", 3, true, true), Dtype::bf16);
    CHECK(both(ring, 3));
    // Causal contiguous: rank 0 sees only its own block (every later step is in its future) and
    // allocates no state; the others merge their blocks through it. Both kinds in one run.
    CHECK(ring.stateless > 0);
    CHECK(ring.stateless < 3);
    const Fused only = expect_fusion_as_planned(gpu_spec("ring", "zigzag", 1, true, false), Dtype::fp16);
    CHECK(both(only, 1));
    CHECK(only.stateless == 1);
    const PlanSpec ring3 = gpu_spec("ring", "contiguous", 3, true, false);
    CHECK(both(expect_fusion_as_planned(masked_spec(ring3, 20, documents_for(ring3)), Dtype::fp16), 3));
    const PlanSpec zigzag3 = gpu_spec("ring", "zigzag", 3, true, false);
    CHECK(both(expect_fusion_as_planned(masked_spec(zigzag3, 24, documents_for(zigzag3)), Dtype::bf16), 3));
    const Fused ulysses =
        expect_fusion_as_planned(masked_spec(gpu_spec("ulysses", "zigzag", 4, true, false), 10, {}), Dtype::bf16);
    CHECK(both(ulysses, 4));
    CHECK(ulysses.stateless == 4);  // every rank's block is its only one
    CHECK(both(expect_fusion_as_planned(gpu_spec("hybrid", "contiguous", 4, true, false, 2), Dtype::bf16), 4));
    CHECK(both(expect_fusion_as_planned(gpu_spec("allgather", "striped", 3, false, false), Dtype::bf16), 3));
    CHECK(both(
        expect_fusion_as_planned(masked_spec(gpu_spec("ring", "contiguous", 4, true, false), 0, {}, 97), Dtype::fp16),
        4));  // padding rows: rows that see no key, 0 and -inf
  }
  SECTION("zig-zag causal: some ranks' first half is finished by a launch that does not finish the second") {
    // The init still fuses on every rank: the first step is the rank's whole own block. Ranks that
    // start their rows in the kernel but finalise with finalize_accumulator read the state the
    // launches wrote, never init_accumulator's.
    for (const PlanSpec& spec :
         {gpu_spec("ring", "zigzag", 3, true, false), gpu_spec("hybrid", "zigzag", 4, true, false, 2),
          gpu_spec("allgather", "zigzag", 4, true, false)}) {
      const Fused fused = expect_fusion_as_planned(spec, Dtype::bf16);
      CHECK(fused.finalize > 0);  // both paths in one run
      CHECK(fused.finalize < spec.ranks);
      CHECK(fused.init == spec.ranks);
    }
  }
  SECTION("fp32 has no fused kernel: init_accumulator and finalize_accumulator on every rank") {
    const Fused fused = expect_fusion_as_planned(gpu_spec("ring", "contiguous", 3, true, true), Dtype::fp32);
    CHECK(fused.finalize == 0);
    CHECK(fused.init == 0);
  }
#ifdef RINGLAB_WITH_NCCL
  SECTION("gpu-nccl: the same GpuRank code on rank threads") {
    auto nccl = [](const gpu::GpuRunOptions& options) { return gpu::NcclExecutor(options); };
    ringlab_mock_set_device_count(4);
    CHECK(both(expect_fusion_as_planned(gpu_spec("ring", "contiguous", 4, true, false), Dtype::bf16, nccl), 4));
    ringlab_mock_set_device_count(1);
  }
#endif
}

// A backward compute whose launches own its grad slot's keys stores dk and dv instead of clearing
// the slot and adding (backward_stores_grads): the outputs verified, the storing launches counted
// against the rule, which must find some where H = HKV and none under GQA or with fp32.
TEST_CASE("emulated gpu-streams: backward launches that own their keys store dk and dv, the rest clear and add",
          "[gpu][emulated][streams][fused]") {
  struct Case {
    PlanSpec spec;
    Dtype dtype;
    bool stores;  // some launch stores
  };
  auto mha = [](PlanSpec spec) {  // H = HKV: gpu_spec keeps GQA (2 query heads per kv head)
    spec.dims.heads = spec.dims.kv_heads;
    return spec;
  };
  const Case c = GENERATE_REF(values<Case>({
      {mha(gpu_spec("ring", "zigzag", 1, true, true)), Dtype::bf16, true},         // the only block
      {mha(gpu_spec("ulysses", "contiguous", 2, true, true)), Dtype::fp16, true},  // each rank's only block
      {mha(gpu_spec("ring", "contiguous", 3, true, true)), Dtype::bf16, true},     // the diagonal steps
      {gpu_spec("ring", "zigzag", 1, true, true), Dtype::bf16, false},             // GQA: heads add into one
      {mha(gpu_spec("ring", "zigzag", 1, true, true)), Dtype::fp32, false},        // the fp32 kernel adds
  }));
  PlanSpec spec = c.spec;
  spec.element_bytes = gpu::dtype_bytes(c.dtype);
  const Plan plan = build_plan(spec);
  int64_t storing = 0;
  for (int64_t r = 0; r < plan.ranks(); ++r) {
    const gpu::RankGeometry geometry(plan, r, c.dtype);
    for (const Op& op : expand(plan, r)) {
      const auto* compute = std::get_if<ComputeOp>(&op.body);
      if (compute != nullptr && gpu::backward_stores_grads(*compute, geometry.n, geometry))
        storing += static_cast<int64_t>(compute->kernels.size());
    }
  }
  INFO(spec.describe() << " [" << gpu::dtype_name(c.dtype) << "]");
  CHECK((storing > 0) == c.stores);
  const int64_t before = gpu::emulated_store_dkv_launches;
  expect_verified(spec, c.dtype);
  CHECK(gpu::emulated_store_dkv_launches - before == storing);
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
