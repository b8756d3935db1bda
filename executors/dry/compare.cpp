// Sections: [scenarios] [cases] [running] [table] [json]
#include "executors/dry/compare.hpp"

#include <cstdio>
#include <nlohmann/json.hpp>
#include <ostream>

#include "reference/error.hpp"
#include "reference/printf_text.hpp"

namespace ringlab {

// ---- [scenarios] -----------------------------------------------------------------------------

namespace {

// One case of a scenario, on the scenario's sizes: its label, algorithm, layout, P, U and mask.
struct ScenarioCase {
  const char* label;
  Algorithm algo;
  LayoutKind layout;
  int64_t ranks, ulysses;
  bool causal;
};

struct ScenarioRow {
  const char* name;
  const char* title;
  const char* source;
  const char* hardware;
  AttentionDims dims;
  bool backward;
  std::vector<ScenarioCase> cases;
  std::vector<std::string> notes;
};

const std::vector<ScenarioRow>& scenario_rows() {
  using enum Algorithm;
  using enum LayoutKind;
  static const std::vector<ScenarioRow> rows = {
      // Exercise 5: S = 2M on 64 GPUs (8 nodes x 8), H = 8192 hidden = 64 heads x 128, bf16.
      {"hybrid-64",
       "S = 2M tokens on 64 GPUs as 8 nodes x 8: Ulysses inside nodes, ring across (causal, forward)",
       "the source material, exercise 5",
       "h100-ib",
       AttentionDims{1, 2097152, 64, 64, 128},
       false,
       {{"hybrid U=8", hybrid, zigzag, 64, 8, true},
        {"hybrid U=8", hybrid, contiguous, 64, 8, true},
        {"ring 64", ring, zigzag, 64, 1, true},
        {"ring 64", ring, contiguous, 64, 1, true},
        {"ulysses 64", ulysses, contiguous, 64, 64, true},
        {"allgather 64", allgather, zigzag, 64, 1, true}},
       {"Ulysses groups are 8 consecutive ranks (one node: NVLink), the ring runs across nodes (InfiniBand).",
        "Per GPU the ring moves only its own heads' share of a node's K/V: 2 (S/8)(64/8) 128 x 2 bytes = 1.07 GB per "
        "step over its own 50 GB/s NIC, not a whole node's K/V through one link.",
        "The source's NVLink 900 GB/s is the bidirectional aggregate; the preset uses the measured 375 GB/s per "
        "direction."}},
      // Exercise 2: S = 1M, H = 8192 hidden (64 heads x 128), P = 16, bf16: ring vs Ulysses volume.
      {"volume-16",
       "communication volume, S = 1M, hidden 8192 (64 x 128), P = 16, bf16 (full mask, forward)",
       "the source material, exercise 2",
       "h100-ib",
       AttentionDims{1, 1048576, 64, 64, 128},
       false,
       {{"ring", ring, contiguous, 16, 1, false},
        {"allgather", allgather, contiguous, 16, 1, false},
        {"ulysses", ulysses, contiguous, 16, 16, false},
        {"hybrid U=8", hybrid, contiguous, 16, 8, false}},
       {"The source counts 32.2 GB per GPU for the ring and 4.03 GB for Ulysses; the plans send exactly the ring's "
        "figure, and Ulysses' plus the fp32 lse that travels back with out.",
        "Volume is not time: the ring's transfers hide behind compute, Ulysses' all-to-alls block."}},
      // Exercise 4: P = 8 causal ring; "8 / 4.5 = 1.78x" is a work ratio, not a speedup.
      {"causal-8",
       "causal skipping on a ring of 8: work saved vs time saved, by layout (16K tokens per GPU, forward)",
       "the source material, exercise 4; the book's erratum 4",
       "h100-nvlink",
       AttentionDims{1, 131072, 32, 32, 128},
       false,
       {{"ring (no mask)", ring, contiguous, 8, 1, false},
        {"ring causal", ring, contiguous, 8, 1, true},
        {"ring causal", ring, zigzag, 8, 1, true},
        {"ring causal", ring, striped, 8, 1, true}},
       {"Skipping future blocks removes 43.75% of the work (3.5 of 8 blocks per rank on average), but with the "
        "contiguous layout the last rank still computes all 8: compare its time with the no-mask row.",
        "A balanced layout (zigzag, striped) turns the saving into time."}},
      // zhuzilin/ring-flash-attention's README benchmark: Llama-3-8B attention on 8 GPUs, 8K tokens per GPU.
      {"llama3-8b",
       "Llama-3-8B attention (32 q / 8 kv heads, d128), 8K tokens per GPU on 8 GPUs, causal, fwd+bwd",
       "zhuzilin/ring-flash-attention's README, 8xH800, % of ideal (flash-attn / 8)",
       "h100-nvlink",
       AttentionDims{1, 65536, 32, 8, 128},
       true,
       {{"ring", ring, contiguous, 8, 1, true},
        {"ring", ring, zigzag, 8, 1, true},
        {"ring", ring, striped, 8, 1, true}},
       {"Published (8xH800, fwd+bwd): contiguous 53.9%, zigzag 90.2%, stripe 82.9% of ideal.",
        "The model has no per-kernel overheads of the real ring (merges, small-block inefficiency) and an H100 "
        "NVLink; its 'of ideal' is an upper bound for the same schedule."}},
  };
  return rows;
}

}  // namespace

std::vector<std::string> scenario_names() {
  std::vector<std::string> names;
  for (const ScenarioRow& row : scenario_rows()) names.emplace_back(row.name);
  return names;
}

Scenario make_scenario(const std::string& name) {
  for (const ScenarioRow& row : scenario_rows()) {
    if (name != row.name) continue;
    Scenario s{row.name, row.title, row.source, row.hardware, {}, row.notes};
    for (const ScenarioCase& c : row.cases) {
      s.cases.push_back({c.label, PlanSpec{.algo = c.algo,
                                           .layout = c.layout,
                                           .ranks = c.ranks,
                                           .ulysses = c.ulysses,
                                           .dims = row.dims,
                                           .causal = c.causal,
                                           .backward = row.backward}});
    }
    return s;
  }
  std::string list;
  for (const std::string& n : scenario_names()) list += (list.empty() ? "" : ", ") + n;
  throw UsageError("unknown scenario '" + name + "'; use --scenario " + list);
}

// ---- [cases] ---------------------------------------------------------------------------------

std::vector<CompareCase> compare_cases(const PlanSpec& base, int64_t ulysses, const Hardware& hardware) {
  std::vector<LayoutKind> layouts{LayoutKind::contiguous, LayoutKind::zigzag, LayoutKind::striped};
  if (base.window > 0 || base.documents.size() > 1) layouts.push_back(LayoutKind::balanced);  // work by the mask
  std::vector<CompareCase> cases;
  auto with = [&](Algorithm algo, LayoutKind layout, int64_t u) {
    PlanSpec spec = base;
    spec.algo = algo;
    spec.layout = layout;
    spec.block = 0;
    spec.ulysses = u;
    spec.erratum = Erratum::none;
    return repadded(spec);  // each row padded as `ringlab run` pads its algorithm, layout and U
  };
  for (LayoutKind layout : layouts) cases.push_back({"ring", with(Algorithm::ring, layout, 1)});
  for (LayoutKind layout : layouts) cases.push_back({"allgather", with(Algorithm::allgather, layout, 1)});
  cases.push_back({"ulysses", with(Algorithm::ulysses, LayoutKind::contiguous, base.ranks)});
  int64_t u = ulysses;
  if (u == 0) {
    const int64_t G = hardware.ranks_per_node;
    u = (G > 1 && G < base.ranks && base.ranks % G == 0) ? G : 0;
  }
  if (u > 0) {
    for (LayoutKind layout : layouts) {
      cases.push_back({"hybrid U=" + std::to_string(u), with(Algorithm::hybrid, layout, u)});
    }
  }
  return cases;
}

// ---- [running] -------------------------------------------------------------------------------

namespace {

// ring-flash-attention's ideal: the same attention on one device, divided by P.
double ideal_seconds(const PlanSpec& spec, const Hardware& hardware) {
  PlanSpec single = spec;
  single.algo = Algorithm::ring;
  single.layout = LayoutKind::contiguous;
  single.block = 0;
  single.ranks = 1;
  single.ulysses = 1;
  return run_dry_plan(build_plan(repadded(single)), hardware).makespan_s / double(spec.ranks);
}

}  // namespace

std::vector<CompareRow> run_compare(const std::vector<CompareCase>& cases, const Hardware& hardware) {
  std::vector<CompareRow> rows;
  for (const CompareCase& c : cases) {
    CompareRow row;
    row.what = c;
    row.what.spec.element_bytes = hardware.element_bytes;
    try {
      const Plan plan = build_plan(row.what.spec);
      const DryResult result = run_dry_plan(plan, hardware);
      row.ok = true;
      row.ulysses = plan.ulysses();
      row.ring = plan.ring();
      row.summary = summarize(result);
      row.peak_memory_bytes = result.memory.peak_bytes;
      const double ideal = ideal_seconds(row.what.spec, hardware);
      row.ideal_fraction = row.summary.time_s > 0 ? ideal / row.summary.time_s : 0;
      if (hardware.device.memory_capacity_bytes > 0 &&
          double(row.peak_memory_bytes) > hardware.device.memory_capacity_bytes) {
        row.note = "does not fit in device memory";
      }
      // Padding is the row's own: zig-zag pads each document to 2P, striped to P, Ulysses the heads.
      const PlanSpec& spec = row.what.spec;
      std::string padding;
      if (spec.padding_tokens() > 0)
        padding =
            "+" + std::to_string(spec.padding_tokens()) + " padding tokens (S=" + std::to_string(spec.dims.seq) + ")";
      if (spec.padding_heads > 0) {
        padding += std::string(padding.empty() ? "" : ", ") + "+" + std::to_string(spec.padding_heads) +
                   " padding heads (H=" + std::to_string(spec.dims.heads) + ")";
      }
      if (!padding.empty()) row.note += (row.note.empty() ? "" : "; ") + padding;
    } catch (const UsageError& error) {
      row.ok = false;
      row.note = std::string("n/a: ") + error.what();
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

// ---- [table] ---------------------------------------------------------------------------------

namespace {

constexpr const char* kHeader = "%-16s %-11s %5s %5s %11s %10s %10s %12s %10s %9s %8s  %s\n";

}  // namespace

void print_compare_table(std::ostream& os, const std::vector<CompareRow>& rows) {
  os << printf_text(kHeader, "case", "layout", "U", "R", "time", "exposed", "compute", "sent", "peak mem", "imbalance",
                    "of ideal", "note");
  os << printf_text(kHeader, "", "", "", "", "ms", "comm ms", "ms max", "MB/rank", "MB/rank", "max/mean", "%", "");
  for (const CompareRow& row : rows) {
    const std::string layout = row.what.spec.algo == Algorithm::ulysses ? "-" : layout_name(row.what.spec.layout);
    const std::string& label = row.what.label;
    if (!row.ok) {
      os << printf_text("%-16s %-11s %5s %5s %11s %10s %10s %12s %10s %9s %8s  %s\n", label.c_str(), layout.c_str(),
                        "-", "-", "-", "-", "-", "-", "-", "-", "-", row.note.c_str());
      continue;
    }
    const DrySummary& s = row.summary;
    os << printf_text("%-16s %-11s %5lld %5lld %11.3f %10.3f %10.3f %12.2f %10.2f %9.3f %8.1f  %s\n", label.c_str(),
                      layout.c_str(), static_cast<long long>(row.ulysses), static_cast<long long>(row.ring),
                      s.time_s * 1e3, s.exposed_max_s * 1e3, s.compute_max_s * 1e3, double(s.bytes_sent_max) / 1e6,
                      double(row.peak_memory_bytes) / 1e6, s.compute_imbalance, 100 * row.ideal_fraction,
                      row.note.c_str());
  }
}

// ---- [json] ----------------------------------------------------------------------------------

nlohmann::json compare_json(const std::vector<CompareRow>& rows, const Hardware& hardware) {
  nlohmann::json list = nlohmann::json::array();
  for (const CompareRow& row : rows) {
    nlohmann::json item = {
        {"case", row.what.label}, {"config", row.what.spec.describe()}, {"ok", row.ok}, {"note", row.note}};
    if (row.ok) {
      item["ulysses"] = row.ulysses;
      item["ring"] = row.ring;
      item["time_seconds"] = row.summary.time_s;
      item["exposed_comm_max_seconds"] = row.summary.exposed_max_s;
      item["compute_max_seconds"] = row.summary.compute_max_s;
      item["bytes_sent_per_rank"] = row.summary.bytes_sent_max;
      item["peak_memory_bytes"] = row.peak_memory_bytes;
      item["compute_max_over_mean"] = row.summary.compute_imbalance;
      item["fraction_of_ideal"] = row.ideal_fraction;
    }
    list.push_back(item);
  }
  return {{"command", "compare"}, {"hardware", hardware.name}, {"rows", list}};
}

}  // namespace ringlab
