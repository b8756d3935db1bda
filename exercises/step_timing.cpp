// The exercises' timing questions through the cost model (step_timing.hpp).
// Sections: [ring of equal steps] [one step on a device and a link]
#include "exercises/step_timing.hpp"

#include <string>

#include "executors/dry/dry_executor.hpp"
#include "reference/error.hpp"
#include "reference/formulas.hpp"

namespace ringlab::exercises {

// ---- [ring of equal steps] ---------------------------------------------------------------------

namespace {

constexpr int64_t kTokensPerRank = 64;

// A machine on which one ring step of `plan` computes for exactly `compute_s` seconds and one K/V
// block travels in exactly `transfer_s`; nothing else costs anything.
Hardware equal_step_machine(const Plan& plan, double compute_s, double transfer_s) {
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

// The ring plan's phase rewritten without double buffering, for the comparison rows: either each
// transfer waited before the compute that needs it (P - 1 transfers), or a loop that computes and
// then exchanges with a blocking send/recv on every step, the last one included (P transfers).
Phase unoverlapped_phase(int64_t P, bool exchange_every_step, bool wait_before_compute) {
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

RingTimes ring_times(int64_t steps, double compute, double transfer) {
  if (steps < 1) throw UsageError("a ring of equal steps needs P >= 1 ranks, got " + std::to_string(steps));
  if (!(compute >= 0) || !(transfer >= 0)) {
    throw UsageError("a ring of equal steps needs non-negative compute and transfer times per step");
  }
  PlanSpec spec;
  spec.algo = Algorithm::ring;
  spec.ranks = steps;
  spec.dims = {1, steps * kTokensPerRank, 1, 1, 64};
  const Plan ring = build_plan(spec);
  const Hardware hw = equal_step_machine(ring, compute, transfer);
  const DrySummary overlapped = summarize(run_dry_plan(ring, hw));

  RingTimes times;
  times.transfers = steps - 1;
  times.with_overlap = overlapped.time_s;
  times.exposed = overlapped.exposed_max_s;
  times.hidden_fraction = overlapped.hidden_fraction;
  times.communication = double(times.transfers) * transfer;
  const double compute_total = double(steps) * compute;
  times.overhead_fraction = times.with_overlap > 0 ? (times.with_overlap - compute_total) / times.with_overlap : 0;
  times.naive_loop = run_dry_plan(Plan(ring.spec(), {unoverlapped_phase(steps, true, false)}), hw).makespan_s;
  times.without_overlap = run_dry_plan(Plan(ring.spec(), {unoverlapped_phase(steps, false, true)}), hw).makespan_s;
  times.source_claim = transfer + compute_total;
  times.speedup = times.with_overlap > 0 ? times.without_overlap / times.with_overlap : 1;
  return times;
}

// ---- [one step on a device and a link] ---------------------------------------------------------

Hardware step_hardware(const StepCostModel& model) {
  Hardware hw;
  hw.name = "exercise";
  hw.description = "peak FLOP/s at full efficiency, one link direction";
  hw.element_bytes = model.element_bytes;
  hw.device.name = "exercise device";
  hw.device.peak_flops = model.flops_per_second;
  LinkClass link{"exercise link", model.latency_seconds, model.link_bytes_per_second, false, 0};
  hw.intra_node = hw.inter_node = link;
  return hw;
}

double step_compute_seconds(const StepCostModel& model, const AttentionDims& dims, int64_t tokens) {
  const Hardware hw = step_hardware(model);
  return forward_flops(tokens * tokens, dims) / hw.device.rank_flops(false, MaskedWork::full, 1);
}

double step_transfer_seconds(const StepCostModel& model, const AttentionDims& dims, int64_t tokens) {
  return step_hardware(model).intra_node.seconds(kv_bytes(tokens, dims, model.element_bytes));
}

int64_t overlap_threshold_tokens(const StepCostModel& model, const AttentionDims& dims) {
  auto covered = [&](int64_t tokens) {
    return step_compute_seconds(model, dims, tokens) >= step_transfer_seconds(model, dims, tokens);
  };
  int64_t hi = 1;
  while (!covered(hi)) hi *= 2;  // compute grows as tokens^2, the transfer as tokens: this ends
  int64_t lo = hi / 2;           // not covered (or 0)
  if (lo == 0) return hi;
  while (hi - lo > 1) {
    const int64_t mid = lo + (hi - lo) / 2;
    (covered(mid) ? hi : lo) = mid;
  }
  return hi;
}

}  // namespace ringlab::exercises
