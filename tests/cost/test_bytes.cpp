// Bytes per rank: what the dry executor counts from a plan equals the closed forms of
// reference/formulas.hpp exactly, for every algorithm, pass, GQA and the hybrid — and equals what
// the plan's expanded ops say and what the simulator's own counters measure.
#include <catch2/catch.hpp>

#include "executors/dry/dry_executor.hpp"
#include "executors/sim/sim_executor.hpp"
#include "reference/formulas.hpp"
#include "reference/inputs.hpp"

using namespace ringlab;

namespace {

Hardware any_machine() { return hardware_preset("h100-ib", 64); }

PassBytes closed_form(const PlanSpec& spec, int64_t ulysses) {
  const int64_t e = spec.element_bytes;
  switch (spec.algo) {
    case Algorithm::ring: return ring_send_bytes(spec.dims, spec.ranks, e, spec.backward);
    case Algorithm::allgather: return allgather_send_bytes(spec.dims, spec.ranks, e, spec.backward);
    case Algorithm::ulysses: return ulysses_send_bytes(spec.dims, spec.ranks, e, spec.backward);
    case Algorithm::hybrid: return hybrid_send_bytes(spec.dims, spec.ranks, ulysses, e, spec.backward);
  }
  return {};
}

// Bytes a rank sends according to its expanded ops.
int64_t expanded_bytes(const Plan& plan, int64_t rank) {
  int64_t bytes = 0;
  for (const Op& op : expand(plan, rank)) {
    if (const auto* e = std::get_if<ExchangeOp>(&op.body)) bytes += e->send_to >= 0 ? e->bytes : 0;
    if (const auto* c = std::get_if<CollectiveOp>(&op.body)) bytes += c->send_bytes;
  }
  return bytes;
}

}  // namespace

TEST_CASE("bytes per rank from a plan equal the closed forms, every algorithm", "[cost][bytes]") {
  const Algorithm algo = GENERATE(Algorithm::ring, Algorithm::allgather, Algorithm::ulysses, Algorithm::hybrid);
  const int64_t P = GENERATE(1, 2, 3, 4, 8, 12);
  const bool backward = GENERATE(false, true);
  const bool gqa = GENERATE(false, true);
  const int64_t element_bytes = GENERATE(2, 4);
  const LayoutKind layout = GENERATE(LayoutKind::contiguous, LayoutKind::zigzag);
  PlanSpec spec;
  spec.algo = algo;
  spec.layout = layout;
  spec.ranks = P;
  spec.ulysses = algo == Algorithm::hybrid ? (P % 4 == 0 ? 4 : (P % 2 == 0 ? 2 : 1)) : 1;
  spec.dims = {2, 96 * P, 4 * P, gqa ? P : 4 * P, 16};
  spec.causal = true;
  spec.backward = backward;
  spec.element_bytes = element_bytes;
  const Plan plan = build_plan(spec);
  INFO(plan.spec().describe() << ", " << element_bytes << " bytes per element");
  const DryResult dry = run_dry_plan(plan, any_machine());
  const PassBytes expected = closed_form(plan.spec(), plan.ulysses());
  for (const DryRank& rank : dry.ranks) {
    REQUIRE(rank.bytes_sent == expected.total());
    REQUIRE(rank.bytes_received == expected.total());
  }
  for (int64_t r : {int64_t{0}, P - 1}) REQUIRE(expanded_bytes(plan, r) == expected.total());
  if (backward) {
    // The forward alone is the forward term.
    PlanSpec forward = spec;
    forward.backward = false;
    REQUIRE(run_dry_plan(build_plan(forward), any_machine()).ranks.front().bytes_sent == expected.forward);
  }
}

TEST_CASE("closed forms: the source material's exercise 2 volumes", "[cost][bytes]") {
  // S = 1M, hidden 8192 = 64 heads x 128, P = 16, bf16: ring 15 x 2.15 GB = 32.2 GB per GPU.
  const AttentionDims dims{1, 1048576, 64, 64, 128};
  const PassBytes ring = ring_send_bytes(dims, 16, 2, false);
  CHECK(ring.forward == 15 * int64_t{2} * 65536 * 64 * 128 * 2);
  CHECK(ring.forward == Approx(32.2e9).epsilon(0.001));
  // Ulysses: 3.02 GB of q, k, v in and 1.01 GB of out back, plus the fp32 lse the source leaves out.
  const PassBytes ulysses = ulysses_send_bytes(dims, 16, 2, false);
  const int64_t lse = 65536 * 64 * 4 / 16 * 15;
  CHECK(double(ulysses.forward - lse) == Approx(ulysses_forward_send_bytes(dims, 16, 2)));
  CHECK(double(ulysses.forward - lse) == Approx(4.03e9).epsilon(0.003));
}

TEST_CASE("the simulator's counters send what the plan and the dry executor say", "[cost][bytes]") {
  const int64_t P = GENERATE(2, 3, 4);
  const bool backward = GENERATE(false, true);
  PlanSpec spec;  // ring: no sub-communicators, so every message the sim counts is the plan's
  spec.ranks = P;
  spec.dims = {1, 24 * P, 2, 1, 8};
  spec.causal = true;
  spec.backward = backward;
  const Plan plan = build_plan(spec);
  const ExecutionResult sim = SimExecutor().execute(plan, make_inputs(spec.dims, 3, backward), {});
  REQUIRE(!sim.failure);
  const DryResult dry = run_dry_plan(plan, any_machine());
  for (int64_t r = 0; r < P; ++r) {
    CHECK(sim.ranks[r].counters.bytes_sent == dry.ranks[r].bytes_sent);
    CHECK(sim.ranks[r].flops == Approx(dry.ranks[r].flops));
    CHECK(sim.ranks[r].blocks_computed == dry.ranks[r].blocks_computed);
    CHECK(sim.ranks[r].blocks_skipped == dry.ranks[r].blocks_skipped);
    CHECK(sim.ranks[r].blocks_masked == dry.ranks[r].blocks_masked);
    CHECK(sim.ranks[r].pairs == dry.ranks[r].pairs);
  }
}

TEST_CASE("collectives: the simulator's traffic is the plan's plus a few bytes of communicator splits",
          "[cost][bytes]") {
  const Algorithm algo = GENERATE(Algorithm::allgather, Algorithm::ulysses, Algorithm::hybrid);
  PlanSpec spec;
  spec.algo = algo;
  spec.ranks = 4;
  spec.ulysses = 2;
  spec.dims = {1, 96, 4, 4, 8};
  spec.backward = true;
  const Plan plan = build_plan(spec);
  const ExecutionResult sim = SimExecutor().execute(plan, make_inputs(spec.dims, 3, true), {});
  REQUIRE(!sim.failure);
  const DryResult dry = run_dry_plan(plan, any_machine());
  for (int64_t r = 0; r < 4; ++r) {
    INFO(plan.spec().describe() << " rank " << r);
    CHECK(sim.ranks[r].counters.bytes_sent >= dry.ranks[r].bytes_sent);
    CHECK(sim.ranks[r].counters.bytes_sent - dry.ranks[r].bytes_sent <= 256);
  }
}
