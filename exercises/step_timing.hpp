// The timing questions of the exercises (overlap-time, erratum-initial-transfer, the overlap
// threshold and profile, the hybrid plan's ring time), answered by the cost model of sim/cost/:
//   * a ring of P equal steps is the ring plan run by the dry executor on a machine where a step
//     computes in c and a K/V block travels in t (ring_times);
//   * one step's compute and transfer come from a Hardware description (peak FLOP/s at full
//     efficiency, one link direction with its latency): DeviceModel::rank_flops, LinkClass::seconds.
// What the model says about the ring (sim/plan/algorithms/ring.cpp): step 0 computes on the rank's own
// K/V, the transfer of block k is posted when step k-1 starts and overlaps its compute, so
//     with overlap:  c + (P-1) max(c, t)        (P - 1 transfers, all hidden when c >= t)
//     without:       P c + (P-1) t              (each transfer completed before the compute needing it)
// The source material's exercise 3 (c = 10 ms, t = 2 ms, P = 8), for example:
//   RingTimes f = ring_times(8, 0.010, 0.002);
//   f.with_overlap     == 0.080   P c: the 7 transfers all hide behind compute — not the source's
//                                 82 ms, whose "unoverlappable initial transfer" does not exist
//   f.without_overlap  == 0.094   the same ring plan with each wait moved before its compute
//   f.naive_loop       == 0.096   P (c + t): a loop that exchanges after every step, the last one
//                                 included — the source's "without overlap", one transfer too many
//   f.source_claim     == 0.082   the source's t + P c
// tests/exercises/test_step_timing.cpp checks these against the closed forms, and
// tests/exercises/test_overlap.cpp the source's figures.
#pragma once

#include <cstdint>

#include "reference/attention.hpp"
#include "sim/cost/hardware.hpp"

namespace ringlab::exercises {

struct RingTimes {
  int64_t transfers = 0;         // K/V transfers per rank in the ring plan: P - 1
  double with_overlap = 0;       // seconds: the ring plan, double-buffered
  double without_overlap = 0;    // the ring plan with each transfer waited before its compute
  double naive_loop = 0;         // a loop that exchanges after every step, the last included: P (c + t)
  double communication = 0;      // (P-1) t: all transfer time
  double exposed = 0;            // communication that no compute hid, per rank: (P-1) max(0, t - c)
  double hidden_fraction = 1;    // 1 - exposed / communication
  double overhead_fraction = 0;  // exposed share of the time with overlap: (with_overlap - P c) / with_overlap
  double speedup = 1;            // without_overlap / with_overlap
  double source_claim = 0;       // the source's formula: an initial transfer + P c
};

// P equal steps of `compute` seconds, K/V transfers of `transfer` seconds: the ring plan and its
// two unoverlapped variants run by the dry executor. Throws UsageError for steps < 1 or a negative
// time.
RingTimes ring_times(int64_t steps, double compute, double transfer);

// A device and a link for the threshold and profile questions.
struct StepCostModel {
  double flops_per_second = 0;       // peak, at full efficiency
  double link_bytes_per_second = 0;  // one direction
  double latency_seconds = 0;        // per transfer
  int64_t element_bytes = 2;         // K and V on the wire (bf16)
};

// The cost model's Hardware for it: efficiencies 1, no launch or memory costs, one link class.
Hardware step_hardware(const StepCostModel& model);

// One ring step of `tokens` tokens per rank, a full (non-causal) block, all heads of `dims`
// (dims.seq is ignored): forward FLOPs of tokens^2 pairs at the device's rate, and one K/V block
// over the link.
double step_compute_seconds(const StepCostModel& model, const AttentionDims& dims, int64_t tokens);
double step_transfer_seconds(const StepCostModel& model, const AttentionDims& dims, int64_t tokens);
// The smallest tokens per rank for which a step's compute covers its transfer (bisection on the
// two functions above, so latency is handled too).
int64_t overlap_threshold_tokens(const StepCostModel& model, const AttentionDims& dims);

}  // namespace ringlab::exercises
