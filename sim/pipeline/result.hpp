// What every executor reports about each rank — the sim executor on virtual ranks, the GPU
// executors from CUDA events, the dry executor from its cost model — and the per-block errors of a
// diagnosed run. The tables of sim/pipeline/tables.hpp print these whatever the executor.
#pragma once

#include <cstdint>

#include "sim/pipeline/rank_counters.hpp"
#include "sim/plan/plan.hpp"

namespace ringlab {

// What one rank did.
struct RankSummary {
  int64_t blocks_computed = 0;  // compute steps with at least one kernel call
  int64_t blocks_skipped = 0;   // fully masked and skipped
  int64_t blocks_masked = 0;    // computed under a mask (diagonal, --no-skip, erratum)
  int64_t pairs = 0;            // visible (query, key) pairs per (batch, head)
  double flops = 0;             // of the visible pairs
  RankCounters counters;        // traffic, blocked and compute seconds
};

// Counts one compute op into a rank's summary: skipped, or computed (and masked) with its pairs
// and FLOPs. Every executor counts blocks through this one function.
void count_block(RankSummary& summary, const ComputeOp& compute);

// The error of one compute block against its exact counterpart (diagnosis).
struct BlockError {
  int64_t rank = 0, phase = 0, step = 0;
  Pass pass = Pass::forward;
  int64_t q_block = 0, kv_block = 0;
  BlockShape shape = BlockShape::full;
  double max_abs_error = 0;    // over finite pairs of out and lse (forward) or dq, dk, dv (backward)
  bool mask_mismatch = false;  // an lse is -inf on one side only: a query sees keys it must not (or none it must)
  bool ok = true;              // within the fp32 tolerances
};

}  // namespace ringlab
