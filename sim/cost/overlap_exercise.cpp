#include "sim/cost/overlap_exercise.hpp"

#include "reference/error.hpp"
#include "reference/formulas.hpp"
#include "sim/cost/dry_executor.hpp"

namespace ringlab {

namespace {

constexpr int64_t kTokensPerRank = 64;

// A machine on which one ring step of `spec` computes for exactly c seconds and one K/V block
// travels in exactly t seconds; nothing else costs anything.
Hardware exercise_machine(const Plan& plan, double compute_s, double transfer_s) {
  const int64_t n = plan.block_tokens();
  Hardware hw;
  hw.name = "exercise";
  hw.description = "the exercise's machine: a step computes in c, a K/V block travels in t";
  hw.element_bytes = plan.spec().element_bytes;
  hw.device.name = "exercise device";
  hw.device.peak_flops = compute_s > 0 ? forward_flops(n * n, plan.spec().dims) / compute_s : 1e300;
  hw.device.q_tile = hw.device.kv_tile = n;
  const double bytes = double(payload_bytes(plan, Payload::kv));
  LinkClass link{"exercise link", 0, transfer_s > 0 ? bytes / transfer_s : 1e300, false, 0};
  hw.intra_node = hw.inter_node = link;
  hw.ranks_per_node = plan.ranks();
  hw.sources = {"the exercise's figures"};
  return hw;
}

// The ring plan's variants for the comparison rows, written with the plan vocabulary.
Phase variant_phase(int64_t P, bool exchange_every_step, bool wait_before_compute) {
  const SlotPair now{Slot::kv0, Slot::kv1, 0}, next{Slot::kv0, Slot::kv1, 1};
  const ExchangeT exchange{0, Payload::kv, true, true, now, next, Shift{1, 0}, Shift{-1, 0}};
  const ComputeT compute{Pass::forward, now, Shift{0, -1}, false, {}, false};
  const Steps transfer_steps = exchange_every_step ? Steps{} : Steps{0, 1};
  Phase phase{"ring forward (variant)", Pass::forward, Family::ring, P, {}};
  phase.body.push_back({LoadKvT{now}, Steps{0, P - 1}});
  if (wait_before_compute) {
    phase.body.push_back({exchange, transfer_steps});
    phase.body.push_back({WaitT{0, 0}, transfer_steps});
    phase.body.push_back({compute, Steps{}});
  } else {  // compute first, then a blocking exchange (no double buffering)
    phase.body.push_back({compute, Steps{}});
    phase.body.push_back({exchange, transfer_steps});
    phase.body.push_back({WaitT{0, 0}, transfer_steps});
  }
  return phase;
}

}  // namespace

RingOverlapFigures ring_overlap_figures(int64_t ranks, double compute_per_step_s, double transfer_per_step_s) {
  if (ranks < 1) throw UsageError("the overlap exercise needs P >= 1 ranks, got " + std::to_string(ranks));
  if (!(compute_per_step_s >= 0) || !(transfer_per_step_s >= 0)) {
    throw UsageError("the overlap exercise needs non-negative compute and transfer times per step");
  }
  PlanSpec spec;
  spec.algo = Algorithm::ring;
  spec.ranks = ranks;
  spec.dims = {1, ranks * kTokensPerRank, 1, 1, 64};
  const Plan ring = build_plan(spec);
  const Hardware hw = exercise_machine(ring, compute_per_step_s, transfer_per_step_s);
  const DrySummary overlapped = summarize(run_dry_plan(ring, hw));

  RingOverlapFigures f;
  f.ranks = ranks;
  f.compute_per_step_s = compute_per_step_s;
  f.transfer_per_step_s = transfer_per_step_s;
  f.transfers = ranks - 1;
  f.with_overlap_s = overlapped.time_s;
  f.exposed_s = overlapped.exposed_max_s;
  f.hidden_fraction = overlapped.hidden_fraction;
  const double compute_total = double(ranks) * compute_per_step_s;
  f.overhead_fraction = f.with_overlap_s > 0 ? (f.with_overlap_s - compute_total) / f.with_overlap_s : 0;
  const Plan naive(ring.spec(), {variant_phase(ranks, true, false)});
  f.naive_loop_s = run_dry_plan(naive, hw).makespan_s;
  const Plan serialized(ring.spec(), {variant_phase(ranks, false, true)});
  f.without_overlap_s = run_dry_plan(serialized, hw).makespan_s;
  f.source_claim_s = transfer_per_step_s + compute_total;
  f.speedup = f.with_overlap_s > 0 ? f.without_overlap_s / f.with_overlap_s : 1;
  return f;
}

}  // namespace ringlab
