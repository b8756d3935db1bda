// The tables `ringlab run` prints besides the verification table: per-rank work and traffic,
// the load imbalance, and the diagnosis of a failed run. Shared by every executor's command.
#pragma once

#include <iosfwd>
#include <nlohmann/json.hpp>
#include <span>

#include "sim/plan/check.hpp"
#include "sim/run/result.hpp"

namespace ringlab {

struct LoadImbalance {
  double flops_max_over_mean = 1;  // 1 = perfectly balanced work
  double busy_max_over_mean = 1;   // the same for measured compute time
};

LoadImbalance load_imbalance(std::span<const RankSummary> ranks);

// rank  computed skipped masked  GFLOP  MB sent  MB recv  busy s  blocked s
void print_rank_table(std::ostream& os, std::span<const RankSummary> ranks);
// "load balance: max/mean FLOPs 1.00, max/mean busy time 1.03"
void print_load_imbalance(std::ostream& os, const LoadImbalance& imbalance);

// The first (rank, step, block) that diverges: the plan checker's first finding (a routing
// mistake: dK/dV added to the wrong accumulator...) and the first compute block whose own
// result is wrong (a kernel or mask mistake), in plan order.
void print_diagnosis(std::ostream& os, const Plan& plan, const PlanCheck& check, std::span<const BlockError> errors);

nlohmann::json to_json(std::span<const RankSummary> ranks);
nlohmann::json to_json(const LoadImbalance& imbalance);
nlohmann::json to_json(const PlanCheck& check);
nlohmann::json to_json(std::span<const BlockError> errors);

}  // namespace ringlab
