// The sim executor: runs a plan on P virtual ranks (sim/world.hpp), each interpreting its own
// expanded op list with the reference block kernels (fp32). It knows the op vocabulary of
// sim/plan.hpp and nothing about algorithms.
//
// Each rank starts with its layout tokens of q, k, v (and dout) cut from the global inputs, and
// ends with its tokens of out, lse (and dq, dk, dv), which are scattered back to global order.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "reference/compare.hpp"
#include "sim/plan.hpp"
#include "sim/run_report.hpp"
#include "sim/verification.hpp"
#include "sim/world_options.hpp"

namespace ringlab {

struct SimOptions {
  WorldOptions world;                           // ranks is taken from the plan
  int threads_per_rank = 0;                     // kernel threads per rank; 0 = max(1, cores / P)
  std::atomic<int64_t>* ops_done = nullptr;     // progress: incremented after every op
  // Diagnosis: when set, every compute block's own result is compared with the exact result of
  // that block (float64), so the first diverging (rank, step, block) can be named.
  const AttentionInputs<double>* diagnose_inputs = nullptr;
  const ReferenceOutputs* diagnose_reference = nullptr;
};

// What one rank did.
struct RankSummary {
  int64_t blocks_computed = 0;  // compute steps with at least one kernel call
  int64_t blocks_skipped = 0;   // fully masked and skipped
  int64_t blocks_masked = 0;    // computed under a mask (diagonal, --no-skip, erratum)
  int64_t pairs = 0;            // visible (query, key) pairs per (batch, head)
  double flops = 0;             // of the visible pairs
  RankCounters counters;        // traffic, blocked and compute seconds
};

// The error of one compute block against its exact counterpart (diagnosis).
struct BlockError {
  int64_t rank = 0, phase = 0, step = 0;
  Pass pass = Pass::forward;
  int64_t q_block = 0, kv_block = 0;
  BlockShape shape = BlockShape::full;
  double max_abs_error = 0;  // over finite pairs of out and lse (forward) or dq, dk, dv (backward)
  bool mask_mismatch = false;  // an lse is -inf on one side only: a query sees keys it must not (or none it must)
  bool ok = true;              // within the fp32 tolerances
};

struct SimResult {
  RunOutputs outputs;                  // global token order; empty unless report.ok()
  std::vector<RankSummary> ranks;      // [P]
  RunReport report;                    // status, counters, trace, deadlock or fault report
  std::vector<BlockError> block_errors;  // with diagnosis: every compute block, in (phase, step, rank) order
};

SimResult run_sim(const Plan& plan, const AttentionInputs<float>& inputs, const SimOptions& options);

// Total ops of a plan over all ranks (for a progress bar).
int64_t total_ops(const Plan& plan);

}  // namespace ringlab
