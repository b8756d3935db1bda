// What `ringlab run --dry-run` prints: a header, the per-rank summary (all ranks up to 16, else
// the first and last few and min / median / max over ranks), totals, load imbalance, phases,
// memory per rank by phase, and the model's assumptions with the preset's sources. --json gives
// the same as one object.
#pragma once

#include <iosfwd>
#include <nlohmann/json_fwd.hpp>

#include "executors/dry/dry_executor.hpp"

namespace ringlab {

struct DryReportOptions {
  int64_t all_ranks_up_to = 16;  // more ranks: the compact summary
  int64_t edge_ranks = 3;        // compact summary: first and last ranks shown
};

void print_dry_report(std::ostream& os, const Plan& plan, const Hardware& hardware, const DryResult& result,
                      const DryReportOptions& options = {});

// The per-rank table alone (also used by tests to pin the format).
void print_dry_rank_table(std::ostream& os, const DryResult& result, const DryReportOptions& options = {});
// Memory per rank by phase, MB.
void print_memory_table(std::ostream& os, const MemoryReport& memory);
// The model's assumptions and the hardware's sources.
void print_model_assumptions(std::ostream& os, const Hardware& hardware);

nlohmann::json dry_report_json(const Plan& plan, const Hardware& hardware, const DryResult& result);
nlohmann::json to_json(const DrySummary& summary);

}  // namespace ringlab
