// Sections: [rank table] [totals and phases] [memory] [assumptions] [json]
#include "executors/dry/dry_report.hpp"
#include "reference/printf_text.hpp"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <ostream>
#include <utility>

namespace ringlab {

namespace {

constexpr double kMB = 1e6;

// Columns of the per-rank table, as values of one rank (or of a min/median/max row).
struct RankRow {
  double compute_ms, other_ms, exposed_ms, idle_ms, total_ms, gflop, mb_sent, peak_mb;
};

RankRow row_of(const DryRank& r, double peak_mb) {
  return {r.compute_s * 1e3, r.other_s * 1e3, r.exposed_comm_s * 1e3,     r.idle_s * 1e3,
          r.finish_s * 1e3,  r.flops / 1e9,   double(r.bytes_sent) / kMB, peak_mb};
}

std::string row_text(const std::string& label, const RankRow& v) {
  return printf_text("%8s %10.3f %9.3f %10.3f %9.3f %10.3f %11.2f %10.2f %9.2f\n", label.c_str(), v.compute_ms,
                     v.other_ms, v.exposed_ms, v.idle_ms, v.total_ms, v.gflop, v.mb_sent, v.peak_mb);
}

}  // namespace

// ---- [rank table] ----------------------------------------------------------------------------

void print_dry_rank_table(std::ostream& os, const DryResult& result, const DryReportOptions& options) {
  os << printf_text("%8s %10s %9s %10s %9s %10s %11s %10s %9s\n", "rank", "compute", "other", "exposed", "idle",
                    "total", "work", "sent", "peak mem");
  os << printf_text("%8s %10s %9s %10s %9s %10s %11s %10s %9s\n", "", "ms", "ms", "comm ms", "ms", "ms", "GFLOP", "MB",
                    "MB");
  const double peak_mb = double(result.memory.peak_bytes) / kMB;
  const int64_t P = static_cast<int64_t>(result.ranks.size());
  if (P <= options.all_ranks_up_to) {
    for (int64_t r = 0; r < P; ++r)
      os << row_text(std::to_string(r), row_of(result.ranks[static_cast<size_t>(r)], peak_mb));
    return;
  }
  const int64_t edge = std::min(options.edge_ranks, P / 2);
  for (int64_t r = 0; r < edge; ++r)
    os << row_text(std::to_string(r), row_of(result.ranks[static_cast<size_t>(r)], peak_mb));
  os << printf_text("%8s   (%lld ranks not shown)\n", "...", static_cast<long long>(P - 2 * edge));
  for (int64_t r = P - edge; r < P; ++r)
    os << row_text(std::to_string(r), row_of(result.ranks[static_cast<size_t>(r)], peak_mb));
  // Min / median / max of every column over all ranks.
  std::vector<RankRow> rows;
  rows.reserve(static_cast<size_t>(P));
  for (const DryRank& r : result.ranks) rows.push_back(row_of(r, peak_mb));
  std::array<RankRow, 3> stats{};
  double RankRow::*columns[] = {&RankRow::compute_ms, &RankRow::other_ms, &RankRow::exposed_ms, &RankRow::idle_ms,
                                &RankRow::total_ms,   &RankRow::gflop,    &RankRow::mb_sent,    &RankRow::peak_mb};
  std::vector<double> values(static_cast<size_t>(P));
  for (double RankRow::*column : columns) {
    for (size_t i = 0; i < rows.size(); ++i) values[i] = rows[i].*column;
    std::sort(values.begin(), values.end());
    stats[0].*column = values.front();
    stats[1].*column = values[values.size() / 2];
    stats[2].*column = values.back();
  }
  os << row_text("min", stats[0]) << row_text("median", stats[1]) << row_text("max", stats[2]);
}

// ---- [totals and phases] ---------------------------------------------------------------------

namespace {

void print_totals(std::ostream& os, const DryResult& result) {
  const DrySummary s = summarize(result);
  const DryRank& any = result.ranks.front();
  os << printf_text("time: %.3f ms (the slowest rank's finish); compute %.3f ms max, %.3f ms mean per rank\n",
                    s.time_s * 1e3, s.compute_max_s * 1e3, s.compute_mean_s * 1e3);
  os << printf_text(
      "communication: %.3f ms of transfers per rank, %.1f%% of it hidden (the rank was busy or waiting on "
      "a peer); exposed %.3f ms max, %.3f ms mean\n",
      s.comm_mean_s * 1e3, 100 * s.hidden_fraction, s.exposed_max_s * 1e3, s.exposed_mean_s * 1e3);
  auto sends_less = [](const DryRank& a, const DryRank& b) {
    return std::pair(a.bytes_sent, a.messages_sent) < std::pair(b.bytes_sent, b.messages_sent);
  };
  const auto fewest = std::min_element(result.ranks.begin(), result.ranks.end(), sends_less);
  const auto most = std::max_element(result.ranks.begin(), result.ranks.end(), sends_less);
  if (fewest->bytes_sent == most->bytes_sent && fewest->messages_sent == most->messages_sent) {
    os << printf_text(
        "traffic: %.3f MB sent per rank in %lld messages (every rank the same); %.3f TFLOP of visible work\n",
        double(any.bytes_sent) / kMB, static_cast<long long>(any.messages_sent), s.flops_total / 1e12);
  } else {  // a trimmed ring's ranks relay different blocks; a hybrid's ring ends differ
    int64_t bytes = 0;
    for (const DryRank& r : result.ranks) bytes += r.bytes_sent;
    os << printf_text(
        "traffic: %.3f MB sent per rank on average, %.3f (rank %lld) to %.3f (rank %lld); %.3f TFLOP of visible "
        "work\n",
        double(bytes) / double(result.ranks.size()) / kMB, double(fewest->bytes_sent) / kMB,
        static_cast<long long>(fewest - result.ranks.begin()), double(most->bytes_sent) / kMB,
        static_cast<long long>(most - result.ranks.begin()), s.flops_total / 1e12);
  }
  os << printf_text("load imbalance: max/mean FLOPs %.3f, max/mean compute time %.3f\n", s.flops_imbalance,
                    s.compute_imbalance);
}

void print_phases(std::ostream& os, const DryResult& result) {
  os << printf_text("%-40s %7s %11s %11s\n", "phase", "steps", "start ms", "end ms");
  for (const DryPhase& p : result.phases) {
    os << printf_text("%-40s %7lld %11.3f %11.3f\n", p.name.c_str(), static_cast<long long>(p.steps), p.start_s * 1e3,
                      p.end_s * 1e3);
  }
}

}  // namespace

// ---- [memory] --------------------------------------------------------------------------------

void print_memory_table(std::ostream& os, const MemoryReport& memory) {
  os << printf_text("%-32s", "phase");
  for (size_t c = 0; c < kMemoryCategories; ++c)
    os << printf_text(" %12s", memory_category_name(static_cast<MemoryCategory>(c)));
  os << printf_text(" %10s\n", "total");
  os << printf_text("%-32s", "");
  for (size_t c = 0; c <= kMemoryCategories; ++c) os << printf_text(c == kMemoryCategories ? " %10s" : " %12s", "MB");
  os << "\n";
  for (const PhaseMemory& m : memory.phases) {
    const std::string name = m.phase.size() > 32 ? m.phase.substr(0, 31) + "~" : m.phase;
    os << printf_text("%-32s", name.c_str());
    for (int64_t b : m.bytes) os << printf_text(" %12.2f", double(b) / kMB);
    os << printf_text(" %10.2f\n", double(m.total()) / kMB);
  }
  if (!memory.phases.empty()) {
    os << printf_text("peak: %.2f MB per rank, in phase \"%s\" (every rank holds the same sizes)\n",
                      double(memory.peak_bytes) / kMB,
                      memory.phases[static_cast<size_t>(memory.peak_phase)].phase.c_str());
  }
}

// ---- [assumptions] ---------------------------------------------------------------------------

void print_model_assumptions(std::ostream& os, const Hardware& hw) {
  const DeviceModel& d = hw.device;
  os << "model: " << hw.name << " - " << hw.description << "\n";
  os << printf_text(
      "  device: %s; %.4g TFLOP/s%s; efficiency forward %.3f (diagonal tiles %.3f), backward %.3f "
      "(diagonal tiles %.3f); tiles %lld x %lld rows; %.3g us per kernel call\n",
      d.name.c_str(), d.peak_flops / 1e12, d.shared_cores > 0 ? " per core" : "", d.forward_full_efficiency,
      d.forward_masked_efficiency, d.backward_full_efficiency, d.backward_masked_efficiency,
      static_cast<long long>(d.q_tile), static_cast<long long>(d.kv_tile), d.kernel_launch_s * 1e6);
  if (d.shared_cores > 0) {
    os << printf_text(
        "  ranks are threads sharing %lld cores: a kernel uses max(1, cores/P) threads, and with P > cores each "
        "rank gets cores/P of a core\n",
        static_cast<long long>(d.shared_cores));
  }
  if (d.ranks_per_device > 1) {
    os << printf_text(
        "  %lld ranks share each device: their kernels run under processor sharing (k at once: 1/k each)\n",
        static_cast<long long>(d.ranks_per_device));
  }
  if (!d.block_rows.empty() || d.short_queries.forward != 1 || d.short_queries.backward != 1 ||
      d.short_keys.forward != 1 || d.short_keys.backward != 1) {
    std::string rows;
    for (const BlockRows& b : d.block_rows)
      rows += printf_text("%s%lld: %.3g/%.3g", rows.empty() ? "" : ", ", static_cast<long long>(b.rows), b.forward,
                          b.backward);
    os << printf_text(
        "  kernel throughput factors (forward/backward): block rows %s; half the queries %.3g/%.3g; half the "
        "keys %.3g/%.3g\n",
        rows.empty() ? "-" : rows.c_str(), d.short_queries.forward, d.short_queries.backward, d.short_keys.forward,
        d.short_keys.backward);
  }
  auto link = [&](const char* what, const LinkClass& l) {
    os << printf_text("  %s: %s, %.4g GB/s per direction, %.3g us latency%s\n", what, l.name.c_str(),
                      l.bandwidth_Bps / 1e9, l.latency_s * 1e6,
                      l.host_copy ? "; copied by the sending thread (no overlap), checksummed by the receiver" : "");
  };
  if (hw.ranks_per_node < (int64_t{1} << 40)) {
    link("intra-node", hw.intra_node);
    link("inter-node", hw.inter_node);
    os << printf_text(
        "  topology: %lld ranks per node (rank p on node p / %lld); ring neighbours as the plan places them\n",
        static_cast<long long>(hw.ranks_per_node), static_cast<long long>(hw.ranks_per_node));
  } else {
    link("links", hw.intra_node);
  }
  os << "  overlap: the transfer for step t+1 runs during the compute of step t, as the plan's double buffer says;\n"
        "    all-to-all (grouped send/recv to every peer) and ring all-gather / reduce-scatter block the rank\n";
  os << printf_text(
      "  precision: q, k, v, out on the wire and in memory %lld bytes per element; accumulators, lse and "
      "dK/dV fp32\n",
      static_cast<long long>(hw.element_bytes));
  os << "sources:\n";
  for (const std::string& source : hw.sources) os << "  - " << source << "\n";
}

void print_dry_report(std::ostream& os, const Plan& plan, const Hardware& hw, const DryResult& result,
                      const DryReportOptions& options) {
  os << "ringlab run --dry-run | " << plan.spec().describe() << " | hw " << hw.name << "\n\n";
  print_dry_rank_table(os, result, options);
  os << "\n";
  print_totals(os, result);
  os << "\n";
  print_phases(os, result);
  os << "\nmemory per rank by phase\n";
  print_memory_table(os, result.memory);
  os << "\n";
  print_model_assumptions(os, hw);
}

// ---- [json] ----------------------------------------------------------------------------------

nlohmann::json to_json(const DrySummary& s) {
  return {
      {"time_seconds", s.time_s},
      {"compute_max_seconds", s.compute_max_s},
      {"compute_mean_seconds", s.compute_mean_s},
      {"exposed_comm_max_seconds", s.exposed_max_s},
      {"exposed_comm_mean_seconds", s.exposed_mean_s},
      {"idle_max_seconds", s.idle_max_s},
      {"comm_mean_seconds", s.comm_mean_s},
      {"hidden_fraction", s.hidden_fraction},
      {"bytes_sent_per_rank", s.bytes_sent_max},
      {"flops_total", s.flops_total},
      {"load_imbalance", {{"flops_max_over_mean", s.flops_imbalance}, {"compute_max_over_mean", s.compute_imbalance}}}};
}

nlohmann::json dry_report_json(const Plan& plan, const Hardware& hw, const DryResult& result) {
  nlohmann::json ranks = nlohmann::json::array();
  for (const DryRank& r : result.ranks) {
    ranks.push_back({{"compute_seconds", r.compute_s},
                     {"other_seconds", r.other_s},
                     {"exposed_comm_seconds", r.exposed_comm_s},
                     {"idle_seconds", r.idle_s},
                     {"comm_seconds", r.comm_s},
                     {"hidden_comm_seconds", r.hidden_comm_s},
                     {"total_seconds", r.finish_s},
                     {"bytes_sent", r.bytes_sent},
                     {"bytes_received", r.bytes_received},
                     {"messages_sent", r.messages_sent},
                     {"blocks_computed", r.blocks_computed},
                     {"blocks_skipped", r.blocks_skipped},
                     {"blocks_masked", r.blocks_masked},
                     {"pairs", r.pairs},
                     {"flops", r.flops},
                     {"peak_memory_bytes", result.memory.peak_bytes}});
  }
  nlohmann::json phases = nlohmann::json::array();
  for (const DryPhase& p : result.phases) {
    phases.push_back({{"name", p.name}, {"steps", p.steps}, {"start_seconds", p.start_s}, {"end_seconds", p.end_s}});
  }
  nlohmann::json document = {{"command", "run"},
                             {"mode", "dry-run"},
                             {"config", plan.spec().describe()},
                             {"hardware", to_json(hw)},
                             {"summary", to_json(summarize(result))},
                             {"ranks", ranks},
                             {"phases", phases},
                             {"memory", to_json(result.memory)},
                             {"exit_status", 0}};
  constexpr size_t kMaxSteps = 4096;
  if (result.steps.size() <= kMaxSteps) {
    nlohmann::json steps = nlohmann::json::array();
    for (const DryStep& s : result.steps) {
      steps.push_back({{"phase", s.phase},
                       {"step", s.step},
                       {"compute_min_seconds", s.compute_min_s},
                       {"compute_mean_seconds", s.compute_mean_s},
                       {"compute_max_seconds", s.compute_max_s},
                       {"end_seconds", s.end_s}});
    }
    document["steps"] = steps;
  } else {
    document["steps_omitted"] = result.steps.size();
  }
  return document;
}

}  // namespace ringlab
