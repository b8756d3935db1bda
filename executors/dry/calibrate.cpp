// Calibration on measured steps. Sections: [tables] [machine] [fit]
#include "executors/dry/calibrate.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <optional>
#include <set>
#include <sstream>
#include <utility>

#include "executors/dry/dry_executor.hpp"
#include "reference/error.hpp"
#include "sim/cost/block_work.hpp"

namespace ringlab {

// ---- [tables] --------------------------------------------------------------------------------

namespace {

std::vector<std::string> words(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

bool is_count(const std::string& w) {
  return !w.empty() && std::all_of(w.begin(), w.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// The number after `key` in `text` (e.g. "S=" in "B=1 S=8192"), or throws.
int64_t field(const std::string& text, const std::string& key, const std::string& where) {
  size_t at = 0;
  while ((at = text.find(key, at)) != std::string::npos) {
    if (at == 0 || text[at - 1] == ' ' || text[at - 1] == ',') break;
    ++at;
  }
  if (at == std::string::npos) throw UsageError(where + ": no " + key + " in the table's title");
  return std::stoll(text.substr(at + key.size()));
}

// "ring zigzag, causal+skip, P=4, B=1 S=8192 H=32 HKV=8 D=128, forward (...)"
StepTable parse_title(const std::string& title, const std::string& where, int64_t element_bytes) {
  StepTable t;
  const size_t p_at = title.find(", P=");
  if (p_at == std::string::npos) throw UsageError(where + ": the table's title has no ', P='");
  t.schedule = title.substr(0, p_at);
  const std::vector<std::string> name = words(t.schedule);
  if (name.size() < 2) throw UsageError(where + ": schedule '" + t.schedule + "' is not '<algorithm> <layout>, ...'");
  std::string layout = name[1];
  if (!layout.empty() && layout.back() == ',') layout.pop_back();
  t.spec.algo = parse_algorithm(name[0]);
  t.spec.layout = parse_layout(layout);
  t.spec.causal = t.schedule.find("causal") != std::string::npos;
  t.spec.skip = t.schedule.find("noskip") == std::string::npos;
  const std::string rest = title.substr(p_at + 2);
  t.spec.ranks = field(rest, "P=", where);
  t.spec.dims.batch = field(rest, "B=", where);
  t.spec.dims.seq = field(rest, "S=", where);
  t.spec.dims.heads = field(rest, "H=", where);
  t.spec.dims.kv_heads = field(rest, "HKV=", where);
  t.spec.dims.dim = field(rest, "D=", where);
  t.spec.backward = rest.find("backward") != std::string::npos;
  t.spec.element_bytes = element_bytes;
  return t;
}

// One row of the ring-efficiency table: "ring zigzag, causal+skip   2  fwd+bwd  12.641  11.726 ...":
// the schedule (words up to the P column), the pass and T(1) in ms. False for any other line.
bool efficiency_row(const std::string& line, std::string& schedule, bool& backward, double& t1_ms) {
  const std::vector<std::string> w = words(line);
  const auto p_at = std::find_if(w.begin(), w.end(), is_count);
  if (p_at == w.begin() || p_at == w.end() || w.end() - p_at < 4) return false;
  const std::string& pass = *(p_at + 1);
  if (pass != "fwd" && pass != "fwd+bwd") return false;
  char* end = nullptr;
  t1_ms = std::strtod((p_at + 2)->c_str(), &end);
  if (end == (p_at + 2)->c_str() || !(t1_ms > 0)) return false;
  schedule.clear();
  for (auto it = w.begin(); it != p_at; ++it) schedule += (schedule.empty() ? "" : " ") + *it;
  backward = pass == "fwd+bwd";
  return true;
}

}  // namespace

StepTable whole_block_backward(const std::string& schedule, PlanSpec spec, double forward_s, double both_s) {
  if (!(both_s > forward_s) || !(forward_s > 0)) {
    char times[160];
    std::snprintf(times, sizeof times,
                  "forward+backward run (%.3f ms) must take longer than the forward alone (%.3f ms)", both_s * 1e3,
                  forward_s * 1e3);
    throw UsageError(schedule + ": the P = 1 " + times + "; give the table as bench_gpu_ring printed it");
  }
  StepTable t;
  t.schedule = schedule + ", P=1 backward";
  spec.ranks = 1, spec.ulysses = 1, spec.backward = true;
  t.spec = spec;
  t.phase = "ring backward";
  t.measured = {both_s - forward_s};
  return t;
}

std::vector<StepTable> parse_step_tables(const std::string& text, const std::string& source, int64_t element_bytes) {
  std::vector<StepTable> tables;
  std::istringstream in(text);
  bool inside = false;
  size_t first_of_title = 0;  // the tables (one per phase) of the title being read
  int line_number = 0;
  // The ring-efficiency table: its title's dims (", B=1 S=8192 ..., bf16") and line, once read, and
  // T(1) by schedule: forward, forward+backward (ms; 0 = not seen).
  std::optional<std::pair<std::string, std::string>> efficiency;
  std::vector<std::pair<std::string, std::pair<double, double>>> t1;
  for (std::string line; std::getline(in, line);) {
    ++line_number;
    const std::string where = source + ":" + std::to_string(line_number);
    const std::string efficiency_key = "efficiency on ";
    if (line.rfind(efficiency_key, 0) == 0) {
      // "efficiency on <device>: T(one kernel, P=1) / T(P virtual ranks), B=1 S=8192 H=32 HKV=8 D=128, bf16"
      const size_t dims_at = line.find(", B=");
      if (dims_at == std::string::npos) continue;
      efficiency = {line.substr(dims_at), where};
      inside = false;
      continue;
    }
    if (efficiency && !inside) {
      std::string schedule;
      bool backward = false;
      double ms = 0;
      if (efficiency_row(line, schedule, backward, ms)) {
        auto found = std::find_if(t1.begin(), t1.end(), [&](const auto& e) { return e.first == schedule; });
        if (found == t1.end()) found = t1.insert(t1.end(), {schedule, {0.0, 0.0}});
        (backward ? found->second.second : found->second.first) = ms;
        continue;
      }
    }
    const std::string title_key = "per-step times: ";
    if (line.rfind(title_key, 0) == 0) {
      tables.push_back(parse_title(line.substr(title_key.size()), where, element_bytes));
      first_of_title = tables.size() - 1;
      inside = true;
      continue;
    }
    if (!inside) continue;
    if (line.rfind("simple model:", 0) == 0) {
      // "max(step FLOPs / 341.6 TFLOP/s, step bytes / 1439 GB/s)"
      const size_t f = line.find("FLOPs / "), b = line.find("bytes / ");
      for (size_t i = first_of_title; i < tables.size(); ++i) {  // every phase of the table
        if (f != std::string::npos) tables[i].flops_per_s = std::stod(line.substr(f + 8)) * 1e12;
        if (b != std::string::npos) tables[i].copy_Bps = std::stod(line.substr(b + 8)) * 1e9;
      }
      inside = false;
      continue;
    }
    const std::vector<std::string> w = words(line);
    if (w.empty()) {
      inside = false;
      continue;
    }
    const auto step_at = std::find_if(w.begin(), w.end(), is_count);
    if (step_at == w.begin() || step_at == w.end() || step_at + 1 == w.end()) continue;  // a header line
    std::string phase;
    for (auto it = w.begin(); it != step_at; ++it) phase += (phase.empty() ? "" : " ") + *it;
    if (!tables.back().phase.empty() && phase != tables.back().phase) {  // the next phase of the same run
      StepTable next = tables.back();
      next.measured.clear();
      tables.push_back(next);
    }
    StepTable& t = tables.back();
    t.phase = phase;
    const int64_t step = std::stoll(*step_at);
    if (step != static_cast<int64_t>(t.measured.size())) {
      throw UsageError(where + ": step " + std::to_string(step) + " where step " + std::to_string(t.measured.size()) +
                       " was expected; list the steps in order from 0");
    }
    char* end = nullptr;
    const double ms = std::strtod((step_at + 1)->c_str(), &end);
    if (end == (step_at + 1)->c_str() || !(ms > 0)) {
      throw UsageError(where + ": measured time '" + *(step_at + 1) + "' is not a positive number of ms");
    }
    t.measured.push_back(ms * 1e-3);
  }
  if (tables.empty()) {
    throw UsageError(source + ": no per-step table ('per-step times: ...', as bench_gpu_ring prints them)");
  }
  for (const StepTable& t : tables)
    if (t.measured.empty()) throw UsageError(source + ": the table of '" + t.schedule + "' has no step rows");
  bool seen[2] = {false, false};  // a whole-block backward without / with the causal mask
  for (const auto& [schedule, times] : t1) {
    if (times.first <= 0 || times.second <= 0 || schedule.rfind("ring ", 0) != 0) continue;
    // The schedule at P = 1 with the title's dims, read as a per-step table's title would be.
    const PlanSpec spec = parse_title(schedule + ", P=1" + efficiency->first, efficiency->second, element_bytes).spec;
    if (std::exchange(seen[spec.causal ? 1 : 0], true)) continue;
    StepTable t;
    try {
      t = whole_block_backward(schedule, spec, times.first * 1e-3, times.second * 1e-3);
    } catch (const UsageError& e) {
      throw UsageError(source + ": " + e.what());
    }
    t.flops_per_s = tables.front().flops_per_s, t.copy_Bps = tables.front().copy_Bps;
    tables.push_back(t);
  }
  return tables;
}

KernelRows parse_kernel_rows(const std::string& text, const std::string& source, int64_t element_bytes) {
  KernelRows rows;
  std::istringstream in(text);
  std::string dims;  // ", B=1 S=8192 H=32 HKV=8 D=128, bf16" of the efficiency table's title
  bool inside = false;
  int line_number = 0;
  for (std::string line; std::getline(in, line);) {
    ++line_number;
    const std::string where = source + ":" + std::to_string(line_number);
    if (line.rfind("efficiency on ", 0) == 0) {
      const size_t dims_at = line.find(", B="), sms_at = line.find(" SMs");
      if (dims_at != std::string::npos) dims = line.substr(dims_at);
      if (sms_at != std::string::npos) {  // "(sm_90, 132 SMs, ...)"; anything else: no SM count
        const size_t number = line.rfind(' ', sms_at - 1);
        const std::string count = line.substr(number + 1, sms_at - number - 1);
        if (number != std::string::npos && is_count(count)) rows.sms = std::stoll(count);
      }
      continue;
    }
    if (line.rfind("one kernel by block size", 0) == 0) {
      if (dims.empty())
        throw UsageError(where + ": a one-kernel table before the efficiency table that gives its dims");
      inside = true;
      continue;
    }
    if (!inside) continue;
    const std::vector<std::string> w = words(line);
    if (w.empty()) {
      inside = false;
      continue;
    }
    if (w.size() < 3 || !is_count(w[0])) continue;  // the header lines
    if (w[1] != "no" && w[1] != "yes") throw UsageError(where + ": causal '" + w[1] + "' is neither yes nor no");
    const bool causal = w[1] == "yes";
    char* end = nullptr;
    const double ms = std::strtod(w[2].c_str(), &end);
    if (end == w[2].c_str() || !(ms > 0)) {
      throw UsageError(where + ": measured time '" + w[2] + "' is not a positive number of ms");
    }
    // The efficiency table's dims at this S: its title's, read as a per-step title would be.
    std::string at_seq = dims;
    const size_t s_at = at_seq.find(" S=");
    if (s_at == std::string::npos) throw UsageError(where + ": the efficiency table's title gives no S=");
    const size_t s_end = at_seq.find(' ', s_at + 1);
    at_seq.replace(s_at, s_end - s_at, " S=" + w[0]);
    const std::string schedule = std::string("ring contiguous, ") + (causal ? "causal+skip" : "full");
    StepTable t = parse_title(schedule + ", P=1" + at_seq, where, element_bytes);
    t.schedule = "one kernel, S=" + w[0] + (causal ? ", causal" : ", full");
    t.phase = "ring forward";
    t.measured = {ms * 1e-3};
    rows.tables.push_back(std::move(t));
  }
  return rows;
}

// ---- [machine] -------------------------------------------------------------------------------

Hardware gpu_streams_machine(double flops_per_s, double copy_Bps, int64_t ranks, int64_t element_bytes,
                             const std::string& description, bool shared_device, int64_t peak_rows) {
  Hardware hw;
  hw.name = shared_device ? "one GPU, P virtual ranks, calibrated" : "one GPU, 1/P each";
  hw.description = description;
  hw.device.name = description;
  hw.device.peak_flops = flops_per_s;  // achieved by one whole kernel: the efficiencies are against it
  if (shared_device) {
    hw.device.ranks_per_device = ranks;
    if (peak_rows > 0) hw.device.block_rows.push_back({peak_rows, 1, 1});
  } else {
    hw.device.shared_cores = 1;  // each rank 1/P of the device throughout
  }
  hw.device.kernel_launch_s = 5e-6;
  hw.device.memory_bandwidth_Bps = copy_Bps * 2;  // a copy reads and writes each byte
  LinkClass link;
  link.name = "device-to-device copy on one GPU";
  link.latency_s = 5e-6;
  link.bandwidth_Bps = copy_Bps / double(ranks);  // P ranks copy at once, sharing it
  hw.intra_node = hw.inter_node = link;
  hw.ranks_per_node = ranks;
  hw.element_bytes = element_bytes;
  char line[200];
  std::snprintf(line, sizeof line, "peak = %.1f TFLOP/s: one whole kernel's rate, measured (efficiency 1 = that rate)",
                flops_per_s / 1e12);
  hw.sources.emplace_back(line);
  std::snprintf(line, sizeof line, "copy = %.0f GB/s: device-to-device cudaMemcpyAsync, measured; P ranks share it",
                copy_Bps / 1e9);
  hw.sources.emplace_back(line);
  if (shared_device && peak_rows > 0) {
    hw.sources.push_back("block_rows[" + std::to_string(peak_rows) +
                         "] = 1: the peak is that block's (one whole S x S kernel, S = " + std::to_string(peak_rows) +
                         ")");
  }
  hw.sources.emplace_back("launch = 5 us, message latency = 5 us: assumptions");
  return hw;
}

namespace {

// The model's step times of `phase` of a built plan.
std::vector<double> plan_steps(const Plan& plan, const std::string& phase, const Hardware& hardware) {
  int index = -1;
  std::string names;
  for (size_t p = 0; p < plan.phases().size(); ++p) {
    names += (names.empty() ? "" : ", ") + plan.phases()[p].name;
    if (plan.phases()[p].name == phase) index = static_cast<int>(p);
  }
  if (index < 0) throw UsageError("the plan has no phase '" + phase + "'; its phases are " + names);
  const DryResult dry = run_dry_plan(plan, hardware);
  std::vector<double> out;
  double before = dry.phases[static_cast<size_t>(index)].start_s;
  for (const DryStep& step : dry.steps) {
    if (step.phase != index) continue;
    out.push_back(step.end_s - before);
    before = step.end_s;
  }
  return out;
}

Plan plan_for(const PlanSpec& spec, const Hardware& hardware) {
  PlanSpec s = spec;
  s.element_bytes = hardware.element_bytes;
  return build_plan(s);
}

}  // namespace

std::vector<double> predicted_steps(const PlanSpec& spec, const std::string& phase, const Hardware& hardware) {
  return plan_steps(plan_for(spec, hardware), phase, hardware);
}

// ---- [fit] -----------------------------------------------------------------------------------

namespace {

// Nelder-Mead minimisation from x0 with initial steps `scale`; deterministic.
std::vector<double> nelder_mead(const std::function<double(const std::vector<double>&)>& f,
                                const std::vector<double>& x0, double scale, int evaluations) {
  const size_t n = x0.size();
  std::vector<std::vector<double>> simplex(n + 1, x0);
  for (size_t i = 0; i < n; ++i) simplex[i + 1][i] += scale;
  std::vector<double> value(n + 1);
  for (size_t i = 0; i <= n; ++i) value[i] = f(simplex[i]);
  int used = static_cast<int>(n + 1);
  auto along = [&](const std::vector<double>& centre, const std::vector<double>& worst, double t) {
    std::vector<double> x(n);
    for (size_t j = 0; j < n; ++j) x[j] = centre[j] + t * (worst[j] - centre[j]);
    return x;
  };
  while (used < evaluations) {
    std::vector<size_t> order(n + 1);
    for (size_t i = 0; i <= n; ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return value[a] < value[b]; });
    const size_t best = order[0], worst = order[n], second = order[n - 1];
    if (value[worst] - value[best] < 1e-14) break;
    std::vector<double> centre(n, 0.0);
    for (size_t i = 0; i <= n; ++i)
      if (i != worst)
        for (size_t j = 0; j < n; ++j) centre[j] += simplex[i][j] / double(n);
    const std::vector<double> reflected = along(centre, simplex[worst], -1.0);
    const double fr = f(reflected);
    ++used;
    if (fr < value[best]) {
      const std::vector<double> expanded = along(centre, simplex[worst], -2.0);
      const double fe = f(expanded);
      ++used;
      simplex[worst] = fe < fr ? expanded : reflected, value[worst] = std::min(fe, fr);
    } else if (fr < value[second]) {
      simplex[worst] = reflected, value[worst] = fr;
    } else {
      const std::vector<double> contracted = along(centre, simplex[worst], 0.5);
      const double fc = f(contracted);
      ++used;
      if (fc < value[worst]) {
        simplex[worst] = contracted, value[worst] = fc;
      } else {  // shrink toward the best
        for (size_t i = 0; i <= n; ++i) {
          if (i == best) continue;
          for (size_t j = 0; j < n; ++j) simplex[i][j] = simplex[best][j] + 0.5 * (simplex[i][j] - simplex[best][j]);
          value[i] = f(simplex[i]);
          ++used;
        }
      }
    }
  }
  return simplex[static_cast<size_t>(std::min_element(value.begin(), value.end()) - value.begin())];
}

// One unknown: a name, how to read it from a machine and how to set it.
struct Knob {
  std::string name;
  std::function<double(const Hardware&)> get;
  std::function<void(Hardware&, double)> set;
  double most = 1;  // efficiencies are fractions of the peak; row factors may exceed 1
};

// What the tables' kernels look like, by pass: block row counts, masked / whole tiles, short calls.
struct Shapes {
  std::set<int64_t> rows;
  std::set<int64_t> backward_rows;  // the row counts of the backward's kernels
  bool full[2] = {false, false}, masked[2] = {false, false};
  bool short_queries[2] = {false, false}, short_keys[2] = {false, false};
};

Shapes shapes_of(const Hardware& base, const std::vector<StepTable>& tables) {
  Shapes s;
  for (const StepTable& t : tables) {
    const int pass = t.phase.find("backward") != std::string::npos ? 1 : 0;
    PlanSpec spec = t.spec;
    spec.element_bytes = base.element_bytes;
    const Plan plan = build_plan(spec);
    const int64_t block = plan.block_tokens();
    BlockClassifier classifier(plan, base.device.q_tile, base.device.kv_tile);
    for (int64_t g = 0; g < plan.ring(); ++g)
      for (int64_t kv = 0; kv < plan.ring(); ++kv) {
        const BlockWork w = classifier.classify(g, kv);
        if (w.kernels == 0) continue;
        s.rows.insert(block);
        if (pass == 1) s.backward_rows.insert(block);
        s.full[pass] = s.full[pass] || w.full_area > 0;
        s.masked[pass] = s.masked[pass] || w.masked_area > 0;
        s.short_queries[pass] = s.short_queries[pass] || 2 * w.q_rows.size() <= block;
        s.short_keys[pass] = s.short_keys[pass] || 2 * w.kv_rows.size() <= block;
      }
  }
  return s;
}

Knob factor_knob(const std::string& name, bool backward, PassFactor DeviceModel::*member) {
  return {name, [backward, member](const Hardware& h) { return (h.device.*member).of(backward); },
          [backward, member](Hardware& h, double v) {
            (backward ? (h.device.*member).backward : (h.device.*member).forward) = v;
          },
          4.0};
}

}  // namespace

FitResult fit_device(const Hardware& base, const std::vector<StepTable>& tables) {
  int points = 0;
  for (const StepTable& t : tables) points += static_cast<int>(t.measured.size());
  if (points == 0) throw UsageError("no measured step to fit; give bench_gpu_ring's per-step tables");
  const Shapes shapes = shapes_of(base, tables);
  Hardware start = base;
  // Row counts: the base's points are anchors (kept); every other row count the data show gets a
  // point to fit. Without anchors the largest row count seen is the reference (1) and the
  // efficiencies on whole tiles carry the scale; with them, the anchors do.
  const bool anchored = !base.device.block_rows.empty();
  std::vector<BlockRows> rows = base.device.block_rows;
  std::vector<int64_t> free_rows;
  for (int64_t n : shapes.rows) {
    const bool anchor = std::any_of(rows.begin(), rows.end(), [n](const BlockRows& k) { return k.rows == n; });
    if (anchor || (!anchored && n == *shapes.rows.rbegin())) continue;
    free_rows.push_back(n);
    rows.push_back({n, base.device.rows_factor(false, n), base.device.rows_factor(true, n)});
  }
  if (!anchored && !free_rows.empty()) rows.push_back({*shapes.rows.rbegin(), 1, 1});
  std::sort(rows.begin(), rows.end(), [](const BlockRows& a, const BlockRows& b) { return a.rows < b.rows; });
  start.device.block_rows = rows;
  const bool fit_full = !anchored || free_rows.empty();
  // A fitted size's own backward factor needs backward data at an anchored size too (see the head
  // comment); otherwise it keeps the base's.
  const bool backward_anchor = std::any_of(base.device.block_rows.begin(), base.device.block_rows.end(),
                                           [&](const BlockRows& k) { return shapes.backward_rows.count(k.rows) > 0; });
  std::vector<Knob> knobs;
  const char* pass_name[2] = {"forward", "backward"};
  for (int pass = 0; pass < 2; ++pass) {
    const bool b = pass == 1;
    const std::string p = pass_name[pass];
    if (!shapes.full[pass] && !shapes.masked[pass]) continue;
    if (shapes.full[pass] && (fit_full || b)) {
      knobs.push_back(
          {p + "_full efficiency",
           [b](const Hardware& h) { return b ? h.device.backward_full_efficiency : h.device.forward_full_efficiency; },
           [b](Hardware& h, double v) {
             (b ? h.device.backward_full_efficiency : h.device.forward_full_efficiency) = v;
           }});
    }
    if (shapes.masked[pass]) {
      knobs.push_back({p + "_masked efficiency",
                       [b](const Hardware& h) {
                         return b ? h.device.backward_masked_efficiency : h.device.forward_masked_efficiency;
                       },
                       [b](Hardware& h, double v) {
                         (b ? h.device.backward_masked_efficiency : h.device.forward_masked_efficiency) = v;
                       }});
    }
    for (int64_t n : free_rows) {
      if (b && (!backward_anchor || shapes.backward_rows.count(n) == 0)) continue;
      const size_t i = static_cast<size_t>(
          std::find_if(rows.begin(), rows.end(), [n](const BlockRows& k) { return k.rows == n; }) - rows.begin());
      knobs.push_back(
          {p + " block_rows[" + std::to_string(n) + "]",
           [b, i](const Hardware& h) { return b ? h.device.block_rows[i].backward : h.device.block_rows[i].forward; },
           [b, i](Hardware& h, double v) {
             (b ? h.device.block_rows[i].backward : h.device.block_rows[i].forward) = v;
           },
           4.0});
    }
    if (shapes.short_queries[pass]) knobs.push_back(factor_knob(p + " short_queries", b, &DeviceModel::short_queries));
    if (shapes.short_keys[pass]) knobs.push_back(factor_knob(p + " short_keys", b, &DeviceModel::short_keys));
  }
  // Each unknown v in (0, most) is most / (1 + e^-u) of a free u: smooth, no bound to get stuck on.
  auto value_of = [&](size_t i, double u) { return knobs[i].most / (1 + std::exp(-u)); };
  auto apply = [&](const std::vector<double>& x) {
    Hardware h = start;
    for (size_t i = 0; i < knobs.size(); ++i) knobs[i].set(h, value_of(i, x[i]));
    return h;
  };
  std::vector<Plan> plans;
  for (const StepTable& t : tables) plans.push_back(plan_for(t.spec, start));
  auto objective = [&](const std::vector<double>& x) {
    const Hardware h = apply(x);
    double sum = 0;
    for (size_t i = 0; i < tables.size(); ++i) {
      const std::vector<double> predicted = plan_steps(plans[i], tables[i].phase, h);
      for (size_t s = 0; s < tables[i].measured.size(); ++s) {
        const double r =
            s < predicted.size() && predicted[s] > 0 ? std::log(predicted[s] / tables[i].measured[s]) : 10.0;
        sum += r * r;
      }
    }
    return sum;
  };
  // From the base's values (an efficiency at its cap starts at 80% of it), restarted from the best
  // point found until a restart gains nothing.
  std::vector<double> x;
  for (size_t i = 0; i < knobs.size(); ++i) {
    const double v = std::clamp(knobs[i].get(start) / knobs[i].most, 0.05, 0.8);
    x.push_back(std::log(v / (1 - v)));
  }
  double best = knobs.empty() ? 0 : objective(x);
  for (int round = 0; round < 6 && !knobs.empty(); ++round) {
    x = nelder_mead(objective, x, 0.5, 1500);
    const double now = objective(x);
    if (best - now < 1e-12) break;
    best = now;
  }
  FitResult result;
  result.hardware = apply(x);
  result.points = points;
  for (const Knob& k : knobs) {
    char line[240];
    std::snprintf(line, sizeof line, "%s = %.4g", k.name.c_str(), k.get(result.hardware));
    result.fitted.emplace_back(line);
    std::snprintf(line, sizeof line,
                  "%s = %.4g: fitted to %d measured step times (%zu unknowns; least squares on log(predicted / "
                  "measured), in-sample)",
                  k.name.c_str(), k.get(result.hardware), points, knobs.size());
    result.hardware.sources.emplace_back(line);
  }
  for (size_t i = 0; i < tables.size(); ++i) {
    const StepTable& t = tables[i];
    const std::vector<double> predicted = plan_steps(plans[i], t.phase, result.hardware);
    for (size_t s = 0; s < t.measured.size() && s < predicted.size(); ++s)
      result.max_abs_error = std::max(result.max_abs_error, std::abs(predicted[s] / t.measured[s] - 1));
  }
  return result;
}

FitResult fit_floor(const Hardware& fitted, const KernelRows& rows) {
  if (rows.tables.empty()) throw UsageError("no one-kernel row to fit the kernels' floor to");
  if (rows.sms <= 0) throw UsageError("the one-kernel rows need the device's SM count (the efficiency table's title)");
  Hardware start = fitted;
  start.device.floor_sms = rows.sms;
  start.device.floor_blocks_per_sm = 2;  // the forward kernel: 4 warps, up to 255 registers (gpu/README.md)
  start.device.floor_block_queries = 128;
  std::vector<Plan> plans;
  for (const StepTable& t : rows.tables) plans.push_back(plan_for(t.spec, start));
  auto with = [&](double startup) {
    Hardware h = start;
    h.device.floor_startup_s = startup;
    return h;
  };
  auto objective = [&](double startup) {
    const Hardware h = with(startup);
    double sum = 0;
    for (size_t i = 0; i < rows.tables.size(); ++i) {
      const double r = std::log(plan_steps(plans[i], "ring forward", h).at(0) / rows.tables[i].measured.at(0));
      sum += r * r;
    }
    return sum;
  };
  // Golden-section search: the objective is flat where no floor binds and convex where floors do.
  double a = 0, b = 1e-3;
  const double g = (std::sqrt(5.0) - 1) / 2;
  double c = b - g * (b - a), d = a + g * (b - a), fc = objective(c), fd = objective(d);
  for (int i = 0; i < 60; ++i) {
    if (fc <= fd) {
      b = d, d = c, fd = fc, c = b - g * (b - a), fc = objective(c);
    } else {
      a = c, c = d, fc = fd, d = a + g * (b - a), fd = objective(d);
    }
  }
  FitResult result;
  result.hardware = with((a + b) / 2);
  result.points = static_cast<int>(rows.tables.size());
  char line[240];
  std::snprintf(line, sizeof line, "forward floor start-up = %.1f us", result.hardware.device.floor_startup_s * 1e6);
  result.fitted.emplace_back(line);
  const DeviceModel& m = result.hardware.device;
  std::snprintf(line, sizeof line,
                "floor: %lld SMs x %lld forward thread blocks of %lld queries; start-up %.1f us fitted to %d "
                "one-kernel rows (least squares on log(predicted / measured), in-sample)",
                static_cast<long long>(m.floor_sms), static_cast<long long>(m.floor_blocks_per_sm),
                static_cast<long long>(m.floor_block_queries), m.floor_startup_s * 1e6, result.points);
  result.hardware.sources.emplace_back(line);
  for (size_t i = 0; i < rows.tables.size(); ++i) {
    const double p = plan_steps(plans[i], "ring forward", result.hardware).at(0);
    result.max_abs_error = std::max(result.max_abs_error, std::abs(p / rows.tables[i].measured.at(0) - 1));
  }
  return result;
}

}  // namespace ringlab
