// The dry executor's timing semantics: the accounting identity, compute- and communication-bound
// rings against their closed forms, the two link classes of the topology, ports that serialise,
// collectives against the formulas of sim/cost/hardware.hpp, the load imbalance of the causal
// contiguous layout, the simulated trace, and the errors for plans it cannot run.
#include <catch2/catch.hpp>

#include <cmath>

#include "executors/dry/dry_executor.hpp"
#include "reference/error.hpp"
#include "reference/formulas.hpp"
#include "sim/pipeline/trace.hpp"

using namespace ringlab;

namespace {

// A machine where only what a test names costs anything: FLOP/s, one link class each side of a
// node boundary, nothing for elementwise work or launches.
Hardware machine(double flops, double intra_Bps, double inter_Bps, int64_t ranks_per_node, double latency_s = 0) {
  Hardware hw;
  hw.name = "test";
  hw.device.peak_flops = flops;
  hw.device.q_tile = hw.device.kv_tile = 1 << 20;
  hw.intra_node = {"intra", latency_s, intra_Bps, false, 0};
  hw.inter_node = {"inter", latency_s, inter_Bps, false, 0};
  hw.ranks_per_node = ranks_per_node;
  hw.element_bytes = 4;
  return hw;
}

// A non-causal ring whose step computes for c seconds and whose K/V block travels in t.
struct Ring {
  Plan plan;
  Hardware hw;
};
Ring ring(int64_t P, double c, double t, int64_t ranks_per_node, double inter_t = -1) {
  PlanSpec spec;
  spec.ranks = P;
  spec.dims = {1, 64 * P, 2, 2, 16};
  Plan plan = build_plan(spec);
  const double flops = forward_flops(64 * 64, spec.dims);
  const double bytes = double(payload_bytes(plan, Payload::kv));
  return {plan, machine(flops / c, bytes / t, bytes / (inter_t > 0 ? inter_t : t), ranks_per_node)};
}

}  // namespace

TEST_CASE("every rank's time adds up: compute + other + exposed + idle = its finish", "[cost][dry]") {
  const Algorithm algo = GENERATE(Algorithm::ring, Algorithm::allgather, Algorithm::ulysses, Algorithm::hybrid);
  const LayoutKind layout = GENERATE(LayoutKind::contiguous, LayoutKind::zigzag, LayoutKind::striped);
  const std::string preset = GENERATE(as<std::string>{}, "h100-nvlink", "h100-ib", "h100-pcie");
  PlanSpec spec;
  spec.algo = algo;
  spec.layout = layout;
  spec.ranks = 16;
  spec.ulysses = 4;
  spec.dims = {1, 16 * 1024, 16, 16, 128};
  spec.causal = true;
  spec.backward = true;
  spec.element_bytes = 2;
  const Plan plan = build_plan(spec);
  const DryResult result = run_dry_plan(plan, hardware_preset(preset, 128));
  INFO(plan.spec().describe() << " on " << preset);
  double latest = 0;
  for (const DryRank& r : result.ranks) {
    CHECK(r.compute_s + r.other_s + r.exposed_comm_s + r.idle_s == Approx(r.finish_s).epsilon(1e-9));
    CHECK(r.idle_s >= 0);
    CHECK(r.exposed_comm_s >= 0);
    latest = std::max(latest, r.finish_s);
  }
  CHECK(result.makespan_s == latest);
  CHECK(result.phases.size() == plan.phases().size());
  CHECK(result.phases.back().end_s == latest);
}

TEST_CASE("a compute-bound ring hides every transfer: P compute steps", "[cost][dry]") {
  const int64_t P = GENERATE(2, 3, 5, 8);
  const Ring r = ring(P, 0.010, 0.004, P);
  const DryResult result = run_dry_plan(r.plan, r.hw);
  const DrySummary s = summarize(result);
  CHECK(s.time_s == Approx(P * 0.010));
  CHECK(s.exposed_max_s == Approx(0).margin(1e-12));
  CHECK(s.hidden_fraction == Approx(1));
  CHECK(s.comm_mean_s == Approx((P - 1) * 0.004));
  REQUIRE(result.steps.size() == static_cast<size_t>(P));
  for (const DryStep& step : result.steps) CHECK(step.compute_mean_s == Approx(0.010));
}

TEST_CASE("a communication-bound ring exposes (P-1)(t-c): (P-1) t + c", "[cost][dry]") {
  const int64_t P = GENERATE(2, 4, 7);
  const Ring r = ring(P, 0.002, 0.010, P);
  const DrySummary s = summarize(run_dry_plan(r.plan, r.hw));
  CHECK(s.time_s == Approx((P - 1) * 0.010 + 0.002));
  CHECK(s.exposed_max_s == Approx((P - 1) * (0.010 - 0.002)));
  CHECK(s.hidden_fraction == Approx(0.2));
}

TEST_CASE("ring neighbours across a node boundary use the inter-node link", "[cost][dry]") {
  // Communication-bound ring of 8: intra-node hops take 1 ms, inter-node 10 ms.
  const int64_t G = GENERATE(8, 1, 4);
  const Ring r = ring(8, 0.0001, 0.001, G, 0.010);
  const DryResult result = run_dry_plan(r.plan, r.hw);
  if (G == 8) {
    CHECK(result.makespan_s == Approx(7 * 0.001 + 0.0001));  // one node: NVLink-like hops only
  } else if (G == 1) {
    CHECK(result.makespan_s == Approx(7 * 0.010 + 0.0001));  // every hop crosses nodes
  } else {
    // Two nodes: each step waits for the slowest hop somewhere upstream.
    CHECK(result.makespan_s > 7 * 0.001 + 0.0001);
    CHECK(result.makespan_s <= 7 * 0.010 + 0.0001 + 1e-12);
    // Rank 4 receives over the inter-node link at step 0 (from rank 3), rank 1 does not.
    CHECK(result.ranks[4].comm_s > result.ranks[1].comm_s);
  }
}

TEST_CASE("two transfers on one port in one step queue behind each other", "[cost][dry]") {
  // Ring backward on a compute-free machine: each step sends K/V (e bytes) and dK/dV (fp32) to the
  // same neighbour; they share the send port, so the step takes the sum of both transfers.
  PlanSpec spec;
  spec.ranks = 4;
  spec.dims = {1, 256, 2, 2, 16};
  spec.backward = true;
  spec.element_bytes = 4;  // K/V and dK/dV the same size
  const Plan plan = build_plan(spec);
  const double bytes = double(payload_bytes(plan, Payload::kv));
  const Hardware hw = machine(1e30, bytes / 0.001, bytes / 0.001, 4);
  const DryResult result = run_dry_plan(plan, hw);
  const DryPhase& backward = result.phases.back();
  // Steps 0..2: K/V and dK/dV both 1 ms on one port; step 3: the dK/dV's last hop home.
  CHECK(backward.end_s - backward.start_s == Approx(3 * 0.002 + 0.001));
}

TEST_CASE("collectives cost the all-to-all and ring formulas", "[cost][dry]") {
  SECTION("Ulysses all-to-all across two nodes: intra and inter-node traffic side by side") {
    PlanSpec spec;
    spec.algo = Algorithm::ulysses;
    spec.ranks = 8;
    spec.dims = {1, 1024, 8, 8, 16};
    const Plan plan = build_plan(spec);
    const Hardware hw = machine(1e30, 100e9, 10e9, 4, 2e-6);
    const DryResult result = run_dry_plan(plan, hw);
    auto a2a = [&](Collective c) {
      const double chunk = double(collective_bytes(plan, c)) / 7;   // to each of 7 peers
      return 2e-6 + std::max(3 * chunk / 100e9, 4 * chunk / 10e9);  // 3 on the node, 4 off it
    };
    CHECK(result.makespan_s == Approx(a2a(Collective::all_to_all_qkv) + a2a(Collective::all_to_all_out)));
    for (const DryRank& r : result.ranks) CHECK(r.exposed_comm_s == Approx(result.makespan_s));
  }
  SECTION("all-gather and reduce-scatter: P-1 ring steps at the slowest link") {
    PlanSpec spec;
    spec.algo = Algorithm::allgather;
    spec.ranks = 4;
    spec.dims = {1, 1024, 4, 4, 16};
    spec.backward = true;
    const Plan plan = build_plan(spec);
    const double kv = double(payload_bytes(plan, Payload::kv)), dkv = double(payload_bytes(plan, Payload::dkv));
    const Hardware one_node = machine(1e30, 100e9, 10e9, 4, 1e-6);
    const Hardware two_nodes = machine(1e30, 100e9, 10e9, 2, 1e-6);
    const double gather = 3 * (1e-6 + kv / 100e9), scatter = 3 * (1e-6 + dkv / 100e9);
    CHECK(run_dry_plan(plan, one_node).makespan_s == Approx(2 * gather + scatter));
    const double gather_ib = 3 * (1e-6 + kv / 10e9), scatter_ib = 3 * (1e-6 + dkv / 10e9);
    CHECK(run_dry_plan(plan, two_nodes).makespan_s == Approx(2 * gather_ib + scatter_ib));
  }
}

TEST_CASE("contiguous causal rings are imbalanced, zigzag ones are not", "[cost][dry]") {
  const int64_t P = 8, n = 8192;  // big enough blocks that compute, not latency, decides the time
  PlanSpec spec;
  spec.ranks = P;
  spec.dims = {1, P * n, 32, 32, 128};
  spec.causal = true;
  spec.element_bytes = 2;
  const Hardware hw = hardware_preset("h100-nvlink", 128);
  const DrySummary contiguous = summarize(run_dry_plan(build_plan(spec), hw));
  // Rank r sees r full blocks and its diagonal: max/mean = ((P-1) n^2 + d) / ((P-1)/2 n^2 + d).
  const double d = double(n) * (n + 1) / 2, full = double(n) * n;
  CHECK(contiguous.flops_imbalance == Approx(((P - 1) * full + d) / ((P - 1) / 2.0 * full + d)));
  spec.layout = LayoutKind::zigzag;
  const DrySummary zigzag = summarize(run_dry_plan(build_plan(spec), hw));
  CHECK(zigzag.flops_imbalance == Approx(1));
  CHECK(zigzag.time_s < 0.7 * contiguous.time_s);
}

TEST_CASE("the simulated trace is a Chrome trace the simulator's reader accepts", "[cost][dry][trace]") {
  PlanSpec spec;
  spec.ranks = 4;
  spec.dims = {1, 4096, 4, 4, 64};
  spec.causal = true;
  spec.backward = true;
  const Plan plan = build_plan(spec);
  DryOptions options;
  options.trace = true;
  const DryResult result = run_dry_plan(plan, hardware_preset("h100-nvlink", 64), options);
  const std::vector<TraceEvent> events = parse_chrome_trace(chrome_trace_json(result.trace, 4), "dry.json");
  REQUIRE(events.size() == result.trace.size());
  std::vector<double> compute(4, 0.0);
  int computes = 0;
  for (const TraceEvent& e : events) {
    REQUIRE(e.rank >= 0);
    REQUIRE(e.rank < 4);
    REQUIRE(e.step >= 0);
    REQUIRE(!e.label.empty());
    if (e.lane == TraceLane::compute) {
      ++computes;
      compute[static_cast<size_t>(e.rank)] += e.duration_us * 1e-6;
      REQUIRE(e.q_block == e.rank);
      REQUIRE(e.kv_block >= 0);
      REQUIRE(e.flops > 0);
      REQUIRE((e.mask == "full" || e.mask == "diag"));
    } else if (e.name == "send") {
      REQUIRE(e.bytes > 0);
      REQUIRE(e.peer == (e.rank + 1) % 4);
    }
  }
  CHECK(computes == 2 * (4 * 5 / 2));  // causal contiguous: rank r computes r + 1 blocks, each pass
  for (int r = 0; r < 4; ++r)
    CHECK(compute[static_cast<size_t>(r)] == Approx(result.ranks[static_cast<size_t>(r)].compute_s));
}

TEST_CASE("the dry executor refuses plans it cannot run, with the reason", "[cost][dry]") {
  PlanSpec spec;
  spec.ranks = 4;
  spec.dims = {1, 256, 2, 2, 16};
  const Plan good = build_plan(spec);
  const Hardware hw = hardware_preset("h100-nvlink", 16);
  const SlotPair now{Slot::kv0, Slot::kv1, 0}, next{Slot::kv0, Slot::kv1, 1};
  SECTION("an exchange nobody waits for") {
    Phase phase{"unwaited",
                Pass::forward,
                Family::ring,
                2,
                {{ExchangeT{0, Payload::kv, true, true, now, next, Shift{1, 0}, Shift{-1, 0}}, Steps{}}}};
    const Plan plan(good.spec(), {phase});
    CHECK_THROWS_WITH(run_dry_plan(plan, hw), Catch::Contains("not waited for"));
  }
  SECTION("a wait for an exchange never posted") {
    Phase phase{"lonely wait", Pass::forward, Family::ring, 2, {{WaitT{0, 0}, Steps{}}}};
    const Plan plan(good.spec(), {phase});
    CHECK_THROWS_WITH(run_dry_plan(plan, hw), Catch::Contains("never posts"));
  }
  SECTION("a send whose receiver receives from someone else") {
    Phase phase{"crossed",
                Pass::forward,
                Family::ring,
                1,
                {{ExchangeT{0, Payload::kv, true, true, now, next, Shift{1, 0}, Shift{1, 0}}, Steps{}},
                 {WaitT{0, 0}, Steps{}}}};
    const Plan plan(good.spec(), {phase});
    CHECK_THROWS_WITH(run_dry_plan(plan, hw), Catch::Contains("receives from another"));
  }
  SECTION("a trace too large for a viewer") {
    DryOptions options;
    options.trace = true;
    options.max_trace_events = 10;
    CHECK_THROWS_AS(run_dry_plan(good, hw, options), UsageError);
  }
}

TEST_CASE("P = 1024, S = 1M fwd+bwd costs every algorithm without expanding ranks", "[cost][dry][scale]") {
  const Algorithm algo = GENERATE(Algorithm::ring, Algorithm::allgather, Algorithm::hybrid);
  PlanSpec spec;
  spec.algo = algo;
  spec.layout = LayoutKind::zigzag;
  spec.ranks = 1024;
  spec.ulysses = 8;
  spec.dims = {1, 1 << 20, 32, 8, 128};
  spec.causal = true;
  spec.backward = true;
  spec.element_bytes = 2;
  const Plan plan = build_plan(spec);
  const DryResult result = run_dry_plan(plan, hardware_preset("h100-ib", 128));
  const PassBytes expected = algo == Algorithm::ring        ? ring_send_bytes(spec.dims, 1024, 2, true)
                             : algo == Algorithm::allgather ? allgather_send_bytes(spec.dims, 1024, 2, true)
                                                            : hybrid_send_bytes(spec.dims, 1024, 8, 2, true);
  CHECK(result.ranks.size() == 1024);
  CHECK(result.ranks.front().bytes_sent == expected.total());
  CHECK(summarize(result).flops_total == Approx(double(full_pairs(1 << 20, true)) * 14 * 128 * 32));
}
