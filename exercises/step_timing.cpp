// The exercises' timing questions through the cost model (step_timing.hpp).
#include "exercises/step_timing.hpp"

#include "reference/formulas.hpp"
#include "sim/cost/overlap_exercise.hpp"

namespace ringlab::exercises {

RingTimes ring_times(int64_t steps, double compute, double transfer) {
  const RingOverlapFigures f = ring_overlap_figures(steps, compute, transfer);
  RingTimes times;
  times.transfers = f.transfers;
  times.with_overlap = f.with_overlap_s;
  times.without_overlap = f.without_overlap_s;
  times.naive_loop = f.naive_loop_s;
  times.communication = double(f.transfers) * transfer;
  times.exposed = f.exposed_s;
  times.hidden_fraction = f.hidden_fraction;
  return times;
}

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
