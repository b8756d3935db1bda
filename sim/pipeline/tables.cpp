#include "sim/pipeline/tables.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <ostream>

namespace ringlab {

LoadImbalance load_imbalance(std::span<const RankSummary> ranks) {
  LoadImbalance imbalance;
  if (ranks.empty()) return imbalance;
  double flops_max = 0, flops_sum = 0, busy_max = 0, busy_sum = 0;
  for (const RankSummary& r : ranks) {
    flops_max = std::max(flops_max, r.flops), flops_sum += r.flops;
    busy_max = std::max(busy_max, r.counters.compute_seconds), busy_sum += r.counters.compute_seconds;
  }
  const double n = static_cast<double>(ranks.size());
  if (flops_sum > 0) imbalance.flops_max_over_mean = flops_max / (flops_sum / n);
  if (busy_sum > 0) imbalance.busy_max_over_mean = busy_max / (busy_sum / n);
  return imbalance;
}

void print_rank_table(std::ostream& os, std::span<const RankSummary> ranks) {
  char line[200];
  std::snprintf(line, sizeof line, "%5s %9s %8s %7s %10s %9s %9s %9s %10s\n", "rank", "computed", "skipped", "masked",
                "GFLOP", "MB sent", "MB recv", "busy s", "blocked s");
  os << line;
  for (size_t r = 0; r < ranks.size(); ++r) {
    const RankSummary& s = ranks[r];
    std::snprintf(line, sizeof line, "%5zu %9lld %8lld %7lld %10.4f %9.3f %9.3f %9.4f %10.4f\n", r,
                  static_cast<long long>(s.blocks_computed), static_cast<long long>(s.blocks_skipped),
                  static_cast<long long>(s.blocks_masked), s.flops / 1e9, double(s.counters.bytes_sent) / 1e6,
                  double(s.counters.bytes_received) / 1e6, s.counters.compute_seconds, s.counters.blocked_seconds);
    os << line;
  }
}

void print_load_imbalance(std::ostream& os, const LoadImbalance& imbalance, int64_t ranks, TimeKind clock,
                          int64_t cores) {
  char line[320];
  std::snprintf(line, sizeof line, "load balance: max/mean FLOPs %.3f (the plan's work per rank)\n",
                imbalance.flops_max_over_mean);
  os << line;
  const char* source = clock == TimeKind::predicted ? "cost model"
                       : clock == TimeKind::device  ? "CUDA events"
                                                    : "measured";
  if (clock == TimeKind::wall_clock && ranks > cores) {
    std::snprintf(line, sizeof line,
                  "busy time: max/mean %.3f (measured; %lld ranks share %lld cores, so busy s also counts time a rank "
                  "waited for a core: compare ranks by GFLOP)\n",
                  imbalance.busy_max_over_mean, static_cast<long long>(ranks), static_cast<long long>(cores));
  } else {
    std::snprintf(line, sizeof line, "busy time: max/mean %.3f (%s)\n", imbalance.busy_max_over_mean, source);
  }
  os << line;
}

void print_diagnosis(std::ostream& os, const Plan& plan, const PlanCheck& check, std::span<const BlockError> errors) {
  os << "diagnosis: where the result first goes wrong\n";
  if (!check.findings.empty()) {
    os << "  plan checker:  " << check.findings.front().describe() << "\n";
  }
  const auto bad = std::find_if(errors.begin(), errors.end(), [](const BlockError& e) { return !e.ok; });
  if (bad != errors.end()) {
    char line[240];
    std::snprintf(line, sizeof line,
                  "  first wrong block: rank %lld, step %lld (%s): queries of block %lld x keys of block %lld (%s),"
                  " max abs error %.3g\n",
                  static_cast<long long>(bad->rank), static_cast<long long>(bad->step),
                  plan.phases()[bad->phase].name.c_str(), static_cast<long long>(bad->q_block),
                  static_cast<long long>(bad->kv_block), block_shape_name(bad->shape), bad->max_abs_error);
    os << line;
    if (bad->mask_mismatch) {
      os << "                     and some of its queries see keys they must not, or none they must (lse -inf on one "
            "side)\n";
    }
    const auto count = std::count_if(errors.begin(), errors.end(), [](const BlockError& e) { return !e.ok; });
    os << "  " << count << " of " << errors.size() << " blocks are wrong on their own\n";
  } else if (!errors.empty()) {
    os << "  every block is right on its own (" << errors.size()
       << " checked): the error is in how results travel or merge, not in a kernel\n";
  }
  if (check.findings.empty() && errors.empty()) os << "  (no diagnosis available)\n";
}

nlohmann::json to_json(std::span<const RankSummary> ranks) {
  nlohmann::json array = nlohmann::json::array();
  for (const RankSummary& s : ranks) {
    array.push_back({{"blocks_computed", s.blocks_computed},
                     {"blocks_skipped", s.blocks_skipped},
                     {"blocks_masked", s.blocks_masked},
                     {"pairs", s.pairs},
                     {"flops", s.flops},
                     {"bytes_sent", s.counters.bytes_sent},
                     {"bytes_received", s.counters.bytes_received},
                     {"messages_sent", s.counters.messages_sent},
                     {"busy_seconds", s.counters.compute_seconds},
                     {"blocked_seconds", s.counters.blocked_seconds}});
  }
  return array;
}

nlohmann::json to_json(const LoadImbalance& imbalance) {
  return {{"flops_max_over_mean", imbalance.flops_max_over_mean}, {"busy_max_over_mean", imbalance.busy_max_over_mean}};
}

nlohmann::json to_json(const PlanCheck& check) {
  nlohmann::json findings = nlohmann::json::array();
  for (const PlanFinding& f : check.findings) {
    findings.push_back({{"rank", f.rank}, {"step", f.step}, {"phase", f.phase}, {"message", f.message}});
  }
  return {{"ok", check.ok()},
          {"ops", check.ops},
          {"messages", check.messages},
          {"pairs_checked", check.pairs_checked},
          {"coverage_checked", check.coverage_checked},
          {"findings", findings}};
}

nlohmann::json to_json(std::span<const BlockError> errors) {
  nlohmann::json array = nlohmann::json::array();
  for (const BlockError& e : errors) {
    array.push_back({{"rank", e.rank},
                     {"phase", e.phase},
                     {"step", e.step},
                     {"pass", e.pass == Pass::forward ? "forward" : "backward"},
                     {"q_block", e.q_block},
                     {"kv_block", e.kv_block},
                     {"shape", block_shape_name(e.shape)},
                     {"max_abs_error", e.max_abs_error},
                     {"mask_mismatch", e.mask_mismatch},
                     {"ok", e.ok}});
  }
  return array;
}

}  // namespace ringlab
