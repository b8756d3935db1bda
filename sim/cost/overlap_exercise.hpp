// The source material's overlap exercise (seeds/000_..., exercise 3: "attention compute takes
// 10 ms and the K/V transfer 2 ms per ring step, P = 8") answered by the cost model rather than
// by a formula: the ring plan is built and run by the dry executor on a machine made so that one
// step's compute takes exactly `compute_per_step_s` and one K/V transfer `transfer_per_step_s`.
//
//   RingOverlapFigures f = ring_overlap_figures(8, 0.010, 0.002);
//   f.with_overlap_s      == 0.080   P c: the 7 transfers (step 0 uses the rank's own K/V) all
//                                    hide behind compute — not the source's 82 ms, whose
//                                    "unoverlappable initial transfer" does not exist (erratum 5)
//   f.transfers           == 7
//   f.hidden_fraction     == 1.0
//   f.without_overlap_s   == 0.094   the same ring plan with each wait moved before its compute:
//                                    P c + (P - 1) t, what overlap saves
//   f.naive_loop_s        == 0.096   P (c + t): a loop that computes and then exchanges with a
//                                    blocking send/recv on every step, the last one included —
//                                    the source's "without overlap", one transfer too many
//   f.source_claim_s      == 0.082   the source's t + P c, for the erratum's comparison
// For the exercises and the book (another part calls it; tests/cost/test_overlap.cpp pins it).
#pragma once

#include <cstdint>

namespace ringlab {

struct RingOverlapFigures {
  int64_t ranks = 0;
  double compute_per_step_s = 0;
  double transfer_per_step_s = 0;
  int64_t transfers = 0;           // K/V transfers per rank in the ring plan: P - 1
  double with_overlap_s = 0;       // the ring plan: a step's compute overlaps the next step's transfer
  double exposed_s = 0;            // communication not hidden, per rank (P-1) max(0, t - c)
  double hidden_fraction = 0;      // of the transfer time; 1 = all hidden
  double overhead_fraction = 0;    // (with_overlap - P c) / with_overlap
  double without_overlap_s = 0;    // the ring plan's P - 1 transfers, each waited before its compute
  double naive_loop_s = 0;         // P steps of compute, each followed by a blocking exchange
  double source_claim_s = 0;       // the source's formula: initial transfer + P c
  double speedup = 0;              // without_overlap / with_overlap (the same plan, with and without overlap)
};

// Throws UsageError for P < 1 or a negative time.
RingOverlapFigures ring_overlap_figures(int64_t ranks, double compute_per_step_s, double transfer_per_step_s);

}  // namespace ringlab
