// The sim executor: runs a plan on P virtual ranks (sim/runtime/world.hpp), each interpreting its own
// expanded op list with the reference block kernels (fp32). It knows the op vocabulary of
// sim/plan/plan.hpp and nothing about algorithms.
//
// Each rank starts with its layout tokens of q, k, v (and dout) cut from the global inputs, and
// ends with its tokens of out, lse (and dq, dk, dv), which are scattered back to global order.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "reference/compare.hpp"
#include "sim/plan/plan.hpp"
#include "sim/runtime/report.hpp"
#include "sim/run/result.hpp"
#include "sim/run/verification.hpp"
#include "sim/runtime/world_options.hpp"

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

struct SimResult {
  RunOutputs outputs;                  // global token order; empty unless report.ok()
  std::vector<RankSummary> ranks;      // [P]
  RunReport report;                    // status, counters, trace, deadlock or fault report
  std::vector<BlockError> block_errors;  // with diagnosis: every compute block, in (phase, step, rank) order
};

SimResult run_sim(const Plan& plan, const AttentionInputs<float>& inputs, const SimOptions& options);

}  // namespace ringlab
