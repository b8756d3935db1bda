// The executor contract across executors: for the same plan, the sim executor (virtual ranks,
// measured) and the dry executor (cost model, never expanding a rank's ops) must report the same
// work and traffic for every rank — blocks computed, skipped and masked, visible pairs, FLOPs,
// bytes sent and received — and trace the same compute events (name, step, phase, blocks, mask,
// FLOPs), at P in {1, 2, 3, 4, 8}. gpu-streams against the dry executor: tests/gpu (emulated).
#include <catch2/catch.hpp>

#include <algorithm>
#include <tuple>
#include <vector>

#include "executors/dry/dry_executor.hpp"
#include "executors/sim/sim_executor.hpp"
#include "reference/inputs.hpp"
#include "tests/plan/plan_cases.hpp"

using namespace ringlab;

namespace {

PlanSpec spec_of(Algorithm algo, LayoutKind layout, int64_t P, bool causal) {
  // heads divisible by P for Ulysses; GQA
  PlanSpec spec =
      test::spec_for(algo, layout, P, algo == Algorithm::hybrid ? 2 : 1, {1, 24 * P, 2 * P, P, 8}, causal, true);
  spec.element_bytes = 4;  // the simulator's fp32 on the wire
  return spec;
}

// What a compute event says, without its times.
using ComputeKey = std::tuple<int, std::string, int, std::string, int, int, std::string, double>;

std::vector<ComputeKey> compute_events(const std::vector<TraceEvent>& trace) {
  std::vector<ComputeKey> keys;
  for (const TraceEvent& e : trace) {
    if (e.lane != TraceLane::compute || e.flops < 0) continue;
    keys.emplace_back(e.rank, e.label, e.step, e.name, e.q_block, e.kv_block, e.mask, e.flops);
  }
  std::sort(keys.begin(), keys.end());
  return keys;
}

// The work both executors count for a rank: the same blocks and pairs, and the same bytes but for
// the few of the communicator splits (tests/cost/test_bytes.cpp; none on the ring, which has no
// sub-communicators). `masked_and_flops`: masked blocks and FLOPs too.
void check_same_work(const RankSummary& s, const RankSummary& d, Algorithm algo, bool masked_and_flops) {
  CHECK(s.blocks_computed == d.blocks_computed);
  CHECK(s.blocks_skipped == d.blocks_skipped);
  if (masked_and_flops) CHECK(s.blocks_masked == d.blocks_masked);
  CHECK(s.pairs == d.pairs);
  if (masked_and_flops) CHECK(s.flops == Approx(d.flops));
  const int64_t splits = algo == Algorithm::ring ? 0 : 256;
  CHECK(s.counters.bytes_sent >= d.counters.bytes_sent);
  CHECK(s.counters.bytes_sent - d.counters.bytes_sent <= splits);
  CHECK(s.counters.bytes_received >= d.counters.bytes_received);
  CHECK(s.counters.bytes_received - d.counters.bytes_received <= splits);
}

}  // namespace

TEST_CASE("sim and dry executors: the same blocks, pairs, FLOPs and bytes per rank", "[run][agree]") {
  const int64_t P = GENERATE(1, 2, 3, 4, 8);
  const Algorithm algo = GENERATE(Algorithm::ring, Algorithm::allgather, Algorithm::ulysses, Algorithm::hybrid);
  const LayoutKind layout = GENERATE(LayoutKind::contiguous, LayoutKind::zigzag, LayoutKind::striped);
  const bool causal = GENERATE(false, true);
  if (algo == Algorithm::hybrid && P % 2 != 0) return;  // 1 < U < P
  const Plan plan = build_plan(spec_of(algo, layout, P, causal));
  INFO(plan.spec().describe());
  ExecuteOptions traced;
  traced.trace = true;
  SimExecutor sim({}, 1);
  const ExecutionResult measured = sim.execute(plan, make_inputs(plan.spec().dims, 5, true), traced);
  REQUIRE(measured.ok());
  DryExecutor dry(hardware_preset("h100-ib", 64));
  const ExecutionResult predicted = dry.execute(plan, {}, traced);
  REQUIRE(predicted.ok());
  CHECK(measured.time.kind == TimeKind::wall_clock);
  CHECK(predicted.time.kind == TimeKind::predicted);
  CHECK(predicted.time.seconds == dry.detail().makespan_s);
  CHECK(predicted.outputs.out.empty());

  REQUIRE(measured.ranks.size() == static_cast<size_t>(P));
  REQUIRE(predicted.ranks.size() == static_cast<size_t>(P));
  for (int64_t r = 0; r < P; ++r) {
    INFO("rank " << r);
    const RankSummary &s = measured.ranks[r], &d = predicted.ranks[r];
    check_same_work(s, d, algo, true);
    // The dry executor's blocked time is its exposed communication plus its idle time.
    const DryRank& detail = dry.detail().ranks[static_cast<size_t>(r)];
    CHECK(d.counters.blocked_seconds == Approx(detail.exposed_comm_s + detail.idle_s));
    CHECK(d.counters.compute_seconds == Approx(detail.compute_s));
  }
  // One trace vocabulary: the same compute events, whoever made them.
  CHECK(compute_events(measured.trace) == compute_events(predicted.trace));
  CHECK(!compute_events(measured.trace).empty());
}

TEST_CASE("sim and dry executors agree on a trimmed ring's per-rank traffic under windows and documents",
          "[run][agree][mask]") {
  const int64_t P = GENERATE(3, 4, 8);
  const Algorithm algo = GENERATE(Algorithm::ring, Algorithm::hybrid);
  const LayoutKind layout = GENERATE(LayoutKind::contiguous, LayoutKind::zigzag);
  const auto [causal, window, docs] = GENERATE(std::tuple{true, int64_t{0}, true}, std::tuple{true, int64_t{30}, false},
                                               std::tuple{false, int64_t{20}, true});
  if (algo == Algorithm::hybrid && P % 2 != 0) return;
  PlanSpec spec = spec_of(algo, layout, P, causal);
  spec.dims.seq = 48 * P;
  spec.window = window;
  if (docs) spec.documents = {4 * P, 40 * P, 4 * P};  // multiples of 2P: per-document zig-zag fits
  const Plan plan = build_plan(spec);
  INFO(plan.spec().describe());
  SimExecutor sim({}, 1);
  const ExecutionResult measured = sim.execute(plan, make_inputs(plan.spec().dims, 5, true), {});
  REQUIRE(measured.ok());
  DryExecutor dry(hardware_preset("h100-ib", 64));
  const ExecutionResult predicted = dry.execute(plan, {}, {});
  REQUIRE(predicted.ok());
  for (int64_t r = 0; r < P; ++r) {
    INFO("rank " << r);
    check_same_work(measured.ranks[r], predicted.ranks[r], algo, false);
  }
}
