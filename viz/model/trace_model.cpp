// The model of a Chrome trace (sim/run/trace.hpp) and measured time for a live run's model.
//
// A trace knows less than a plan: no layout (so no token ranges or unit sub-structure), no
// skipped blocks (they make no event), and only what the events' args say. Phases come from the
// events' labels (the plan's phase names, in order of first appearance), steps from "step", the
// grid from the compute events' q_block / kv_block / mask, transfers from the sends.
// Sections: [classifying events] [rows and load] [trace model]
#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "reference/error.hpp"
#include "viz/model/schedule_model.hpp"

namespace ringlab::viz {

namespace {

constexpr int64_t kMaxRanks = 4096;
constexpr int64_t kMaxBlocks = 512;
constexpr int64_t kMaxRankSteps = int64_t{1} << 22;  // ranks x steps held per step: ~160 MB at most
const char* const kHint = "pass a trace written by ringlab run --trace";

// ---- [classifying events] --------------------------------------------------------------------

bool starts_with(const std::string& text, const char* prefix) { return text.rfind(prefix, 0) == 0; }

bool is_collective_name(const std::string& name) {
  return starts_with(name, "all_to_all") || starts_with(name, "all_gather") || starts_with(name, "reduce_scatter") ||
         starts_with(name, "all_reduce") || starts_with(name, "barrier") || starts_with(name, "split");
}

SpanKind kind_of(const TraceEvent& e) {
  if (e.lane == TraceLane::compute) return SpanKind::compute;
  if (is_collective_name(e.name)) return SpanKind::collective;
  if (e.name == "isend" || e.name == "irecv") return SpanKind::send;  // posting: returns at once
  if (starts_with(e.name, "wait") || e.name == "recv" || e.name == "send" || e.name == "sendrecv") return SpanKind::wait;
  return SpanKind::other;
}

BlockShape shape_of(const std::string& mask) {
  for (BlockShape shape : {BlockShape::full, BlockShape::diagonal, BlockShape::q_half, BlockShape::kv_half,
                           BlockShape::masked, BlockShape::skipped, BlockShape::erratum})
    if (mask == block_shape_name(shape)) return shape;
  return mask == "causal" ? BlockShape::diagonal : BlockShape::full;
}

bool is_backward(const TraceEvent& e) {
  return e.name.find("bwd") != std::string::npos || e.name.find("backward") != std::string::npos;
}

std::string span_label(const TraceEvent& e) {
  std::string text = e.name;
  if (e.q_block >= 0) text += " b" + std::to_string(e.q_block) + "xb" + std::to_string(e.kv_block);
  if (!e.mask.empty()) text += " (" + e.mask + ")";
  if (e.peer >= 0) text += (kind_of(e) == SpanKind::send ? " -> " : " <- ") + std::string("rank ") + std::to_string(e.peer);
  if (e.bytes > 0) text += ", " + std::to_string(e.bytes) + " B";
  return text;
}

// ---- [rows and load] -------------------------------------------------------------------------

// Timeline rows and busy / blocked time from events; `step_of` maps an event to a global step.
template <class StepOf>
void measured_rows(ScheduleModel& m, std::span<const TraceEvent> events, StepOf step_of) {
  double t0 = 1e300;
  for (const TraceEvent& e : events) t0 = std::min(t0, e.start_us);
  m.timeline = {};
  m.timeline.measured = true;
  for (int64_t r = 0; r < m.ranks; ++r)
    for (int lane = 0; lane < 2; ++lane) m.timeline.rows.push_back({r, lane, {}});
  for (RankLoad& load : m.load.ranks) load.busy = load.blocked = 0;
  for (const TraceEvent& e : events) {
    if (e.rank >= m.ranks) continue;
    const SpanKind kind = kind_of(e);
    const double start = (e.start_us - t0) * 1e-6, end = start + e.duration_us * 1e-6;
    const int64_t block = e.kv_block >= 0 ? e.kv_block : kNoBlock;
    m.timeline.rows[2 * static_cast<size_t>(e.rank) + (e.lane == TraceLane::compute ? 0 : 1)].spans.push_back(
        {start, end, kind, step_of(e), block, e.peer, span_label(e)});
    RankLoad& load = m.load.ranks[static_cast<size_t>(e.rank)];
    if (kind == SpanKind::compute) load.busy += end - start;
    if (kind == SpanKind::wait || kind == SpanKind::collective) load.blocked += end - start;
  }
}

}  // namespace

void attach_measured_time(ScheduleModel& m, std::span<const TraceEvent> events) {
  std::map<std::string, int64_t> first_step;
  for (const PhaseView& phase : m.phases) first_step.emplace(phase.name, phase.first_step);
  measured_rows(m, events, [&](const TraceEvent& e) -> int64_t {
    const auto found = first_step.find(e.label);
    return found == first_step.end() || e.step < 0 ? -1 : found->second + e.step;
  });
  summarise(m);
}

// ---- [trace model] ---------------------------------------------------------------------------

ScheduleModel model_from_trace(std::span<const TraceEvent> events, const std::string& title) {
  ScheduleModel m;
  m.source = SourceKind::trace;
  m.title = title;
  if (events.empty()) throw UsageError(title + ": the trace has no complete (\"X\") events; " + kHint);

  // Phases: the labels of events with a step, in order of first appearance in time.
  bool any_label = false;
  for (const TraceEvent& e : events) any_label |= e.step >= 0 && !e.label.empty();
  auto phase_name = [&](const TraceEvent& e) { return any_label ? e.label : std::string("steps"); };
  auto counts = [&](const TraceEvent& e) { return e.step >= 0 && (!any_label || !e.label.empty()); };
  std::map<std::string, std::tuple<double, int64_t, bool, bool, bool>> seen;  // first start, steps, bwd, compute, collective
  int64_t max_rank = 0, max_block = -1;
  for (const TraceEvent& e : events) {
    max_rank = std::max<int64_t>(max_rank, e.rank);
    if (e.lane == TraceLane::compute) max_block = std::max<int64_t>({max_block, e.q_block, e.kv_block});
    if (!counts(e)) continue;
    auto [it, inserted] = seen.try_emplace(phase_name(e), e.start_us, 0, false, false, false);
    auto& [first, steps, backward, compute, collective] = it->second;
    first = std::min(first, e.start_us);
    steps = std::max<int64_t>(steps, int64_t{e.step} + 1);
    backward |= is_backward(e) || e.label.find("backward") != std::string::npos;
    compute |= e.lane == TraceLane::compute;
    collective |= is_collective_name(e.name);
  }
  if (seen.empty()) throw UsageError(title + ": no event has a \"step\" in its args, so it shows no schedule; " + kHint);
  if (max_rank + 1 > kMaxRanks) {
    throw UsageError(title + ": rank " + std::to_string(max_rank) + " is beyond the viewer's " + std::to_string(kMaxRanks) +
                     " ranks; " + kHint);
  }
  if (max_block + 1 > kMaxBlocks) {
    throw UsageError(title + ": block " + std::to_string(max_block) + " is beyond the viewer's grid of " +
                     std::to_string(kMaxBlocks) + " blocks; " + kHint);
  }
  int64_t total_steps = 0;
  for (const auto& [name, info] : seen) total_steps += std::get<1>(info);
  if ((max_rank + 1) * total_steps > kMaxRankSteps) {
    throw UsageError(title + ": " + std::to_string(max_rank + 1) + " ranks x " + std::to_string(total_steps) +
                     " steps is more than the viewer holds; " + kHint);
  }
  m.ranks = max_rank + 1;
  m.ring = max_block >= 0 ? max_block + 1 : m.ranks;
  m.ulysses = m.ranks % m.ring == 0 ? m.ranks / m.ring : 1;

  std::vector<std::pair<double, std::string>> order;
  for (const auto& [name, info] : seen) order.emplace_back(std::get<0>(info), name);
  std::sort(order.begin(), order.end());
  std::map<std::string, int64_t> first_step;
  bool any_backward = false;
  for (const auto& [first_time, name] : order) {
    const auto& [first, steps, backward, compute, collective] = seen.at(name);
    (void)first;
    first_step[name] = static_cast<int64_t>(m.steps.size());
    PhaseView phase{name, backward ? Pass::backward : Pass::forward, Family::ring, steps,
                    static_cast<int64_t>(m.steps.size()), compute, collective};
    for (int64_t s = 0; s < steps; ++s) m.steps.push_back({static_cast<int>(m.phases.size()), s, 0, 0});
    m.phases.push_back(phase);
    any_backward |= backward && compute;
  }
  auto step_of = [&](const TraceEvent& e) -> int64_t {
    if (!counts(e)) return -1;
    return first_step.at(phase_name(e)) + e.step;
  };

  // Grid and what each rank computes at each step.
  for (Pass pass : {Pass::forward, Pass::backward}) {
    if (pass == Pass::backward && !any_backward) continue;
    m.grids.push_back(empty_grid(pass, m.ring));
  }
  m.rank_steps.assign(static_cast<size_t>(m.ranks), std::vector<RankStep>(m.steps.size()));
  m.load.ranks.assign(static_cast<size_t>(m.ranks), {});
  for (const TraceEvent& e : events) {
    if (e.lane != TraceLane::compute) continue;
    RankLoad& load = m.load.ranks[static_cast<size_t>(e.rank)];
    load.computed += 1;
    if (e.flops > 0) load.flops += e.flops;
    const int64_t step = step_of(e);
    if (step < 0 || e.q_block < 0 || e.kv_block < 0) continue;
    const BlockShape shape = shape_of(e.mask);
    if (shape == BlockShape::diagonal || shape == BlockShape::masked || shape == BlockShape::erratum) load.masked += 1;
    RankStep& held = m.rank_steps[static_cast<size_t>(e.rank)][static_cast<size_t>(step)];
    held.kv_block = held.computed = e.kv_block;
    held.shape = shape;
    held.flops += std::max(0.0, e.flops);
    const bool backward = is_backward(e) || m.phases[static_cast<size_t>(m.steps[static_cast<size_t>(step)].phase)].pass == Pass::backward;
    BlockGrid& grid = m.grids[backward && m.grids.size() > 1 ? 1 : 0];
    GridCell& cell = grid.at(e.q_block, e.kv_block);
    cell.planned = true;
    cell.shape = shape;
    cell.step = step;
    cell.phase_step = e.step;
    if (std::find(cell.ranks.begin(), cell.ranks.end(), e.rank) == cell.ranks.end()) cell.ranks.push_back(e.rank);
    cell.flops += std::max(0.0, e.flops);
  }

  // Transfers: one per (sender, receiver, step, exchange). ringlab's sim sends K and V as two
  // messages with tags 2x and 2x+1, where x = (phase * 4 + exchange id) * 10^6 + step (see
  // expand() in sim/plan/plan.cpp): exchange id 1 is the dK/dV accumulator.
  double t0 = 1e300;
  for (const TraceEvent& e : events) t0 = std::min(t0, e.start_us);
  std::set<std::tuple<int64_t, int64_t, int64_t, int64_t>> sent;
  for (const TraceEvent& e : events) {
    if (kind_of(e) != SpanKind::send || e.name == "irecv" || e.peer < 0 || e.peer >= m.ranks) continue;
    const int64_t step = step_of(e);
    if (step < 0) continue;
    const int64_t exchange = e.tag >= 0 ? e.tag / 2 : -1;
    if (!sent.insert({e.rank, e.peer, step, exchange}).second) continue;
    const bool dkv = exchange >= 0 && (exchange / 1000000) % 4 == 1;
    const int64_t held = m.rank_steps[static_cast<size_t>(e.rank)][static_cast<size_t>(step)].computed;
    const double start = (e.start_us - t0) * 1e-6;
    m.transfers.push_back({e.rank, e.peer, dkv ? Payload::dkv : Payload::kv, dkv ? kNoBlock : held, step,
                           std::max<int64_t>(0, e.bytes) * (e.tag >= 0 ? 2 : 1), start, start + e.duration_us * 1e-6});
  }
  std::stable_sort(m.transfers.begin(), m.transfers.end(), [](const Transfer& a, const Transfer& b) { return a.step < b.step; });

  // Collectives: the members of each (step, name, group) seen together.
  std::map<std::tuple<int64_t, std::string, std::string>, CollectiveView> groups;
  for (const TraceEvent& e : events) {
    if (!is_collective_name(e.name) || starts_with(e.name, "split")) continue;
    const int64_t step = step_of(e);
    if (step < 0) continue;
    CollectiveView& c = groups[{step, e.name, e.group}];
    c.step = step;
    c.name = m.phases[static_cast<size_t>(m.steps[static_cast<size_t>(step)].phase)].name;
    c.kind = starts_with(e.name, "all_gather") ? Collective::all_gather_kv
             : starts_with(e.name, "reduce_scatter") ? Collective::reduce_scatter_dkv
                                                     : Collective::all_to_all_qkv;
    c.members.push_back(e.rank);
    c.bytes = std::max<int64_t>(c.bytes, e.bytes);
  }
  for (auto& [key, c] : groups) {
    std::sort(c.members.begin(), c.members.end());
    m.collectives.push_back(std::move(c));
  }

  measured_rows(m, events, step_of);
  summarise(m);
  locate_first_error(m);
  return m;
}

}  // namespace ringlab::viz
