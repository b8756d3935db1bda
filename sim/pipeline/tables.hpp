// The tables `ringlab run` prints besides the verification table: per-rank work and traffic,
// the load imbalance, and the diagnosis of a failed run. Shared by every executor's command.
#pragma once

#include <iosfwd>
#include <nlohmann/json_fwd.hpp>
#include <span>

#include "sim/pipeline/executor.hpp"
#include "sim/pipeline/result.hpp"
#include "sim/plan/check.hpp"

namespace ringlab {

struct LoadImbalance {
  double flops_max_over_mean = 1;  // 1 = perfectly balanced work
  double busy_max_over_mean = 1;   // the same for measured compute time
};

LoadImbalance load_imbalance(std::span<const RankSummary> ranks);

// rank  computed skipped masked  GFLOP  MB sent  MB recv  busy s  blocked s
void print_rank_table(std::ostream& os, std::span<const RankSummary> ranks);

// The headline is the plan's work (FLOPs are exact); the busy time is a measurement, and what it
// means depends on the clock: with wall-clock time and more ranks than cores, ranks share cores
// and a rank's busy time also counts the time its thread waited for one, so a balanced plan can
// show 1.4-1.9 there. `cores` is the host's (std::thread::hardware_concurrency()).
//   load balance: max/mean FLOPs 1.000 (the plan's work per rank)
//   busy time: max/mean 1.157 (measured; 8 ranks share 2 cores, so busy s also counts ...)
void print_load_imbalance(std::ostream& os, const LoadImbalance& imbalance, int64_t ranks, TimeKind clock,
                          int64_t cores);

// The first (rank, step, block) that diverges: the plan checker's first finding (a routing
// mistake: dK/dV added to the wrong accumulator...) and the first compute block whose own
// result is wrong (a kernel or mask mistake), in plan order.
void print_diagnosis(std::ostream& os, const Plan& plan, const PlanCheck& check, std::span<const BlockError> errors);

nlohmann::json to_json(std::span<const RankSummary> ranks);
nlohmann::json to_json(const LoadImbalance& imbalance);
nlohmann::json to_json(const PlanCheck& check);
nlohmann::json to_json(std::span<const BlockError> errors);

}  // namespace ringlab
