// The dry executor's folding (executors/dry/dry_executor.hpp, "Folding"): a phase whose ranks are
// equal up to rotation walks one node period of ring positions instead of all of them. Here the
// folded run is compared with the full walk (DryOptions::fold = false), field by field and bit for
// bit, on every algorithm, layout, causal or not, windows and documents, at P = 2, 3, 4, 8 and 64,
// on one node and on several; and the cases where symmetry does not hold are shown to fall back to
// the full walk.
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <sstream>
#include <string>

#include "executors/dry/dry_executor.hpp"
#include "reference/error.hpp"
#include "tests/plan/plan_cases.hpp"

using namespace ringlab;

namespace {

// Exact equality of doubles by their bits (so that -0.0 and 0.0, or two NaNs, are not confused).
bool same(double a, double b) { return std::bit_cast<uint64_t>(a) == std::bit_cast<uint64_t>(b); }

// The first field where two dry results differ ("" when none): every rank's counters and times,
// every step, every phase's times, the makespan and the memory report.
std::string first_difference(const DryResult& a, const DryResult& b) {
  std::ostringstream out;
  if (a.ranks.size() != b.ranks.size()) return "rank count";
  for (size_t r = 0; r < a.ranks.size(); ++r) {
    const DryRank &x = a.ranks[r], &y = b.ranks[r];
    const std::pair<const char*, std::pair<double, double>> times[] = {
        {"compute_s", {x.compute_s, y.compute_s}},
        {"other_s", {x.other_s, y.other_s}},
        {"exposed_comm_s", {x.exposed_comm_s, y.exposed_comm_s}},
        {"idle_s", {x.idle_s, y.idle_s}},
        {"comm_s", {x.comm_s, y.comm_s}},
        {"hidden_comm_s", {x.hidden_comm_s, y.hidden_comm_s}},
        {"finish_s", {x.finish_s, y.finish_s}},
        {"flops", {x.flops, y.flops}}};
    for (const auto& [name, v] : times)
      if (!same(v.first, v.second)) return "rank " + std::to_string(r) + " " + name;
    const std::pair<const char*, std::pair<int64_t, int64_t>> counts[] = {
        {"bytes_sent", {x.bytes_sent, y.bytes_sent}},
        {"bytes_received", {x.bytes_received, y.bytes_received}},
        {"messages_sent", {x.messages_sent, y.messages_sent}},
        {"messages_received", {x.messages_received, y.messages_received}},
        {"blocks_computed", {x.blocks_computed, y.blocks_computed}},
        {"blocks_skipped", {x.blocks_skipped, y.blocks_skipped}},
        {"blocks_masked", {x.blocks_masked, y.blocks_masked}},
        {"pairs", {x.pairs, y.pairs}}};
    for (const auto& [name, v] : counts)
      if (v.first != v.second) return "rank " + std::to_string(r) + " " + name;
  }
  if (a.steps.size() != b.steps.size()) return "step count";
  for (size_t i = 0; i < a.steps.size(); ++i) {
    const DryStep &x = a.steps[i], &y = b.steps[i];
    if (x.phase != y.phase || x.step != y.step || !same(x.compute_min_s, y.compute_min_s) ||
        !same(x.compute_mean_s, y.compute_mean_s) || !same(x.compute_max_s, y.compute_max_s) || !same(x.end_s, y.end_s))
      return "step " + std::to_string(i);
  }
  if (a.phases.size() != b.phases.size()) return "phase count";
  for (size_t i = 0; i < a.phases.size(); ++i) {
    const DryPhase &x = a.phases[i], &y = b.phases[i];
    if (x.name != y.name || x.steps != y.steps || !same(x.start_s, y.start_s) || !same(x.end_s, y.end_s))
      return "phase " + std::to_string(i);
  }
  if (!same(a.makespan_s, b.makespan_s)) return "makespan";
  if (a.memory.phases.size() != b.memory.phases.size()) return "memory phases";
  for (size_t i = 0; i < a.memory.phases.size(); ++i)
    if (a.memory.phases[i].bytes != b.memory.phases[i].bytes) return "memory of phase " + std::to_string(i);
  return "";
}

struct Case {
  Algorithm algo = Algorithm::ring;
  LayoutKind layout = LayoutKind::contiguous;
  int64_t P = 4, U = 1;
  bool causal = false, backward = true;
  int64_t window = 0;
  std::vector<int64_t> documents;
};

Case make(Algorithm algo, LayoutKind layout, int64_t P, bool causal) {
  Case c;
  c.algo = algo, c.layout = layout, c.P = P, c.causal = causal;
  return c;
}

PlanSpec spec_of(const Case& c) {
  PlanSpec spec =
      test::spec_for(c.algo, c.layout, c.P, c.U, {2, 256 * c.P, 4 * c.U, 2 * c.U, 64}, c.causal, c.backward);
  spec.window = c.window;
  spec.documents = c.documents;
  spec.element_bytes = 2;
  return spec;
}

struct Runs {
  DryResult full, folded;
};
Runs both(const Plan& plan, const Hardware& hw) {
  DryOptions full;
  full.fold = false;
  return {run_dry_plan(plan, hw, full), run_dry_plan(plan, hw)};
}

// Ring positions walked in the phases that step (more than one step), folded or not.
std::vector<int64_t> walked(const Plan& plan, const DryResult& result) {
  std::vector<int64_t> out;
  for (size_t p = 0; p < plan.phases().size(); ++p)
    if (plan.phases()[p].steps > 1) out.push_back(result.phases[p].walked_positions);
  return out;
}

}  // namespace

TEST_CASE("the comparison of dry results sees a one-ulp difference (negative control)", "[cost][dry][fold]") {
  const Plan plan = build_plan(spec_of(make(Algorithm::ring, LayoutKind::zigzag, 8, true)));
  const Runs runs = both(plan, hardware_preset("h100-nvlink", 64));
  REQUIRE(first_difference(runs.full, runs.folded).empty());
  DryResult broken = runs.folded;
  broken.ranks[5].idle_s = std::nextafter(broken.ranks[5].idle_s, 1.0);
  CHECK(first_difference(runs.full, broken) == "rank 5 idle_s");
  broken = runs.folded;
  broken.steps[3].compute_mean_s = std::nextafter(broken.steps[3].compute_mean_s, 1.0);
  CHECK(first_difference(runs.full, broken) == "step 3");
  broken = runs.folded;
  broken.ranks[7].blocks_masked += 1;
  CHECK(first_difference(runs.full, broken) == "rank 7 blocks_masked");
}

TEST_CASE("folded dry runs equal the full walk on every algorithm, layout and mask", "[cost][dry][fold]") {
  const Algorithm algo = GENERATE(Algorithm::ring, Algorithm::hybrid, Algorithm::ulysses, Algorithm::allgather);
  const LayoutKind layout = GENERATE(LayoutKind::contiguous, LayoutKind::zigzag, LayoutKind::striped);
  const bool causal = GENERATE(false, true);
  const int64_t P = GENERATE(2, 3, 4, 8, 64);
  // Nodes of 8 (NVLink, then InfiniBand), nodes of 2 (a period of 2 at P = 8), and the simulator's
  // host copies (one node).
  const std::string preset = GENERATE(as<std::string>{}, "h100-nvlink", "pairs", "cpu");
  Case c = make(algo, layout, P, causal);
  if (algo == Algorithm::hybrid) {
    if (P % 2 != 0) return;  // U = 2 must divide P
    c.U = 2;
  }
  if (algo == Algorithm::ulysses) c.U = P;
  const Plan plan = build_plan(spec_of(c));
  Hardware hw = hardware_preset(preset == "pairs" ? "h100-pcie" : preset, 64);
  if (preset == "pairs") hw.ranks_per_node = 2;
  const Runs runs = both(plan, hw);
  INFO(plan.spec().describe() << " on " << preset);
  CHECK(first_difference(runs.full, runs.folded).empty());
  const int64_t R = plan.ring();
  for (int64_t w : walked(plan, runs.full)) CHECK(w == R);  // the reference walks every position
  // Rings fold where ranks are equal up to rotation: no causal mask, or zig-zag's equal halves.
  const bool symmetric = !causal || layout == LayoutKind::zigzag;
  const int64_t G = hw.ranks_per_node;
  const int64_t period = G >= P ? 1 : P % G == 0 ? G / std::gcd(G, c.U) : R;  // a partial node: none
  for (int64_t w : walked(plan, runs.folded)) CHECK(w == (symmetric && period < R ? period : R));
}

TEST_CASE("folded dry runs equal the full walk with windows and documents, walking every rank", "[cost][dry][fold]") {
  const LayoutKind layout = GENERATE(LayoutKind::contiguous, LayoutKind::zigzag, LayoutKind::striped);
  const int64_t P = GENERATE(3, 4, 8);
  const int mask = GENERATE(0, 1, 2);  // a window, documents, both
  Case c = make(Algorithm::ring, layout, P, true);
  if (mask != 1) c.window = 300;
  if (mask != 0) c.documents = {32 * P, 192 * P, 32 * P};  // whole layout units per document
  const Plan plan = build_plan(spec_of(c));
  const Runs runs = both(plan, hardware_preset("h100-nvlink", 64));
  INFO(plan.spec().describe());
  CHECK(first_difference(runs.full, runs.folded).empty());
  for (int64_t w : walked(plan, runs.folded)) CHECK(w == plan.ring());  // no symmetry: the full walk
}

TEST_CASE("folding falls back to the full walk for a partial node and for a trace", "[cost][dry][fold]") {
  // 12 ranks on nodes of 8: the last node is partial, so the ring has no node period.
  const Plan plan = build_plan(spec_of(make(Algorithm::ring, LayoutKind::zigzag, 12, true)));
  const Hardware hw = hardware_preset("h100-ib", 64);
  REQUIRE(hw.ranks_per_node == 8);
  const Runs runs = both(plan, hw);
  CHECK(first_difference(runs.full, runs.folded).empty());
  for (int64_t w : walked(plan, runs.folded)) CHECK(w == 12);
  // 16 ranks fold to one node's 8 positions, but not when the timeline is traced rank by rank.
  const Plan sixteen = build_plan(spec_of(make(Algorithm::ring, LayoutKind::zigzag, 16, true)));
  DryOptions traced;
  traced.trace = true;
  const DryResult with_trace = run_dry_plan(sixteen, hw, traced);
  const DryResult without = run_dry_plan(sixteen, hw);
  for (int64_t w : walked(sixteen, without)) CHECK(w == 8);
  for (int64_t w : walked(sixteen, with_trace)) CHECK(w == 16);
  CHECK(first_difference(with_trace, without).empty());
}

TEST_CASE("a zig-zag ring of P = 16384, S = 16M fwd+bwd folds to one node", "[cost][dry][fold][scale]") {
  PlanSpec spec;
  spec.layout = LayoutKind::zigzag;
  spec.ranks = 16384;
  spec.dims = {1, 16777216, 16384, 16384, 128};
  spec.causal = true;
  spec.backward = true;
  spec.element_bytes = 2;
  const Plan plan = build_plan(spec);
  const DryResult result = run_dry_plan(plan, hardware_preset("h100-nvlink", 128));
  for (int64_t w : walked(plan, result)) CHECK(w == 8);
  // Ranks a node apart alike (the zig-zag ring is balanced).
  CHECK(result.ranks[0].finish_s == result.ranks[16376].finish_s);
  CHECK(result.ranks.front().blocks_computed == result.ranks[12345].blocks_computed);
}

TEST_CASE("a walk past the budget is refused before it starts, one line; within it nothing changes",
          "[cost][dry][fold]") {
  // A contiguous causal ring of 64 cannot fold (below and above the diagonal cost differently):
  // 64 ranks x (64 + 1 + 64) steps, fwd+bwd, and a budget under that refuses it before any walking.
  const Plan contiguous = build_plan(spec_of(make(Algorithm::ring, LayoutKind::contiguous, 64, true)));
  const Hardware hw = hardware_preset("h100-nvlink", 64);
  DryOptions tight;
  tight.max_walk_work = 64 * 64;
  std::string message;
  try {
    run_dry_plan(contiguous, hw, tight);
  } catch (const UsageError& e) {
    message = e.what();
  }
  INFO(message);
  CHECK(message.find("P=64") != std::string::npos);
  CHECK(message.find("walked once") != std::string::npos);
  CHECK(message.find('\n') == std::string::npos);
  // The same budget lets the zig-zag ring of 64 through: it folds to one node's 8 positions.
  const Plan zigzag = build_plan(spec_of(make(Algorithm::ring, LayoutKind::zigzag, 64, true)));
  const DryResult folded = run_dry_plan(zigzag, hw, tight);
  for (int64_t w : walked(zigzag, folded)) CHECK(w == 8);
  CHECK(first_difference(folded, run_dry_plan(zigzag, hw)).empty());
  // And the full walk of the contiguous ring under the default budget is the unlimited one's.
  DryOptions unlimited;
  unlimited.max_walk_work = INT64_MAX;
  CHECK(first_difference(run_dry_plan(contiguous, hw), run_dry_plan(contiguous, hw, unlimited)).empty());
}

TEST_CASE("a walk whose pace projects past the time budget is refused with the projection, one line",
          "[cost][dry][fold]") {
  // A balanced layout's blocks hold many units: within the rank-step budget, but each costs far
  // more than a plain block's. The timed check judges the walk by its own pace.
  PlanSpec spec = spec_of(make(Algorithm::ring, LayoutKind::balanced, 16, true));
  spec.window = 40;
  const Plan plan = build_plan(spec);
  const Hardware hw = hardware_preset("h100-nvlink", 16);
  DryOptions impatient;
  impatient.judge_after_s = 0;
  impatient.max_walk_s = 1e-9;
  std::string message;
  try {
    run_dry_plan(plan, hw, impatient);
  } catch (const UsageError& e) {
    message = e.what();
  }
  INFO(message);
  CHECK(message.find("P=16") != std::string::npos);
  CHECK(message.find("s at the pace of its first 16 rank-steps") != std::string::npos);
  CHECK(message.find('\n') == std::string::npos);
  // Not timed, or within the time: the same result.
  DryOptions untimed;
  untimed.max_walk_s = 0;
  CHECK(first_difference(run_dry_plan(plan, hw), run_dry_plan(plan, hw, untimed)).empty());
}
