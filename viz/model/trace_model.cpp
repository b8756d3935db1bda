// Timelines from Chrome trace events, and the model of a whole trace.
//
// One conversion from events to timeline rows and busy / blocked time serves three sources: a
// run's measured trace (attach_measured_time), the cost model's simulated trace of a plan
// (attach_predicted_time: run_dry_plan with a trace), and a trace file (model_from_trace).
//
// A trace file knows less than a plan: no layout (so no token ranges or unit sub-structure), no
// skipped blocks (they make no event), and only what the events' args say. Phases come from the
// events' labels (the plan's phase names, in order of first appearance), steps from "step", the
// grid from the compute events' q_block / kv_block / mask, transfers from the sends. What a "send"
// is depends on the writer (TimeSource): a trace file's run says which (model_from_trace_file).
// Sections: [classifying events] [rows and load] [predicted time] [trace model: phases]
//           [trace model: grid, transfers, collectives] [trace model]
#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "executors/dry/dry_executor.hpp"
#include "reference/bytes_text.hpp"
#include "reference/error.hpp"
#include "sim/plan/queries.hpp"
#include "viz/model/trace_model.hpp"

namespace ringlab::viz {

namespace {

constexpr int64_t kMaxRanks = 4096;
constexpr int64_t kMaxBlocks = 512;
constexpr int64_t kMaxRankSteps = int64_t{1} << 22;  // ranks x steps held per step: ~160 MB at most
// The cost model's simulated trace holds up to three events per op; past this many the plan's
// timeline is left out (the totals still come from the cost model).
constexpr int64_t kMaxPredictedEvents = 600'000;
const char* const kHint = "pass a trace written by ringlab run --trace";

// Where a trace's times come from: they decide what a "send" event is.
enum class TimeSource : uint8_t {
  measured,    // ringlab run: "send" is a blocking send (a wait); "isend" / "irecv" post and return
  cost_model,  // the dry executor: "send" is the transfer itself, asynchronous, on the sender's lane
  // ringlab-gpu run, measured: "send" and "recv" are one asynchronous copy of the whole exchange
  // (gpu-streams: a device-to-device copy on the receiver's transfer stream, seen from both ends;
  // gpu-nccl: an ncclSend / ncclRecv group on the rank's transfer stream) while the compute stream
  // goes on; it waits for the copy only at the plan's Wait, which makes no event.
  device_copies,
};

// ---- [classifying events] --------------------------------------------------------------------

bool starts_with(const std::string& text, const char* prefix) { return text.rfind(prefix, 0) == 0; }

bool is_collective_name(const std::string& name) {
  return starts_with(name, "all_to_all") || starts_with(name, "all_gather") || starts_with(name, "reduce_scatter") ||
         starts_with(name, "all_reduce") || starts_with(name, "barrier") || starts_with(name, "split");
}

SpanKind kind_of(const TraceEvent& e, TimeSource source = TimeSource::measured) {
  if (e.lane == TraceLane::compute) return SpanKind::compute;
  if (is_collective_name(e.name)) return SpanKind::collective;
  if (source == TimeSource::cost_model && e.peer >= 0 &&
      (starts_with(e.name, "send") || starts_with(e.name, "isend"))) {
    return SpanKind::send;
  }
  if (source == TimeSource::device_copies && e.peer >= 0 && (e.name == "send" || e.name == "recv"))
    return SpanKind::send;
  if (e.name == "isend" || e.name == "irecv") return SpanKind::send;  // posting: returns at once
  if (starts_with(e.name, "wait") || e.name == "recv" || e.name == "send" || e.name == "sendrecv")
    return SpanKind::wait;
  return SpanKind::other;
}

BlockShape shape_of(const std::string& mask) {
  for (BlockShape shape : {BlockShape::full, BlockShape::diagonal, BlockShape::q_half, BlockShape::kv_half,
                           BlockShape::masked, BlockShape::skipped, BlockShape::erratum, BlockShape::partial})
    if (mask == block_shape_name(shape)) return shape;
  return mask == "causal" ? BlockShape::diagonal : BlockShape::full;
}

bool is_backward(const TraceEvent& e) {
  return e.name.find("bwd") != std::string::npos || e.name.find("backward") != std::string::npos;
}

std::string span_label(const TraceEvent& e, SpanKind kind) {
  std::string text = e.name;
  if (e.q_block >= 0) text += " b" + std::to_string(e.q_block) + "xb" + std::to_string(e.kv_block);
  if (!e.mask.empty()) text += " (" + e.mask + ")";
  const bool outgoing = kind == SpanKind::send && e.name != "recv";  // a GPU copy seen by its receiver comes in
  if (e.peer >= 0) text += (outgoing ? " -> " : " <- ") + std::string("rank ") + std::to_string(e.peer);
  if (e.bytes > 0) text += ", " + bytes_text(e.bytes);
  return text;
}

// ---- [rows and load] -------------------------------------------------------------------------

// Timeline rows and busy / blocked time from events; `step_of` maps an event to a global step.
template <class StepOf>
void timeline_rows(ScheduleModel& m, std::span<const TraceEvent> events, StepOf step_of, TimeSource source) {
  double t0 = 1e300;
  for (const TraceEvent& e : events) t0 = std::min(t0, e.start_us);
  if (source == TimeSource::cost_model) t0 = 0;  // simulated time starts at 0 by definition
  m.timeline = {};
  m.timeline.measured = source != TimeSource::cost_model;
  for (int64_t r = 0; r < m.ranks; ++r)
    for (int lane = 0; lane < kTimelineLanes; ++lane) m.timeline.rows.push_back({r, lane, {}});
  for (RankLoad& load : m.load.ranks) load.busy = load.blocked = 0;
  for (const TraceEvent& e : events) {
    if (e.rank >= m.ranks) continue;
    const SpanKind kind = kind_of(e, source);
    const double start = (e.start_us - t0) * 1e-6, end = start + e.duration_us * 1e-6;
    const int64_t block = e.kv_block >= 0 ? e.kv_block : kNoBlock;
    m.timeline
        .rows[kTimelineLanes * static_cast<size_t>(e.rank) + (e.lane == TraceLane::compute ? kComputeLane : kCommLane)]
        .spans.push_back({start, end, kind, step_of(e), block, e.peer, span_label(e, kind)});
    RankLoad& load = m.load.ranks[static_cast<size_t>(e.rank)];
    if (kind == SpanKind::compute) load.busy += end - start;
    if (kind == SpanKind::wait || kind == SpanKind::collective) load.blocked += end - start;
  }
  // Microseconds in the file round each back-to-back pair differently: spans of a row that
  // overlap by less than a picosecond are made to touch.
  for (TimelineRow& row : m.timeline.rows) {
    std::stable_sort(row.spans.begin(), row.spans.end(),
                     [](const Span& a, const Span& b) { return a.start < b.start; });
    for (size_t i = 1; i < row.spans.size(); ++i) {
      Span& span = row.spans[i];
      const double overlap = row.spans[i - 1].end - span.start;
      if (overlap > 0 && overlap < 1e-12) span.start = std::min(span.end, row.spans[i - 1].end);
    }
  }
  for (int64_t r = 0; r < m.ranks; ++r) {
    const size_t first = kTimelineLanes * static_cast<size_t>(r);
    m.timeline.rows[first + kExposedLane].spans =
        exposed_spans(m.timeline.rows[first + kComputeLane], m.timeline.rows[first + kCommLane]);
  }
}

// Maps an event to the model's global step by its label (the phase's name) and step.
auto step_by_phase_name(const ScheduleModel& m) {
  std::map<std::string, int64_t> first_step;
  for (const PhaseView& phase : m.phases) first_step.emplace(phase.name, phase.first_step);
  return [first_step = std::move(first_step)](const TraceEvent& e) -> int64_t {
    const auto found = first_step.find(e.label);
    return found == first_step.end() || e.step < 0 ? -1 : found->second + e.step;
  };
}

// ---- [predicted time] ------------------------------------------------------------------------

// The simulated transfers' and collectives' times, onto the model's (the walk's) own.
void time_messages(ScheduleModel& m, std::span<const TraceEvent> events) {
  std::map<std::tuple<int64_t, int64_t, int>, const TraceEvent*> sends;                // (from, to, tag)
  std::map<std::tuple<std::string, int64_t, int64_t>, const TraceEvent*> collectives;  // (phase, step, rank)
  for (const TraceEvent& e : events) {
    if (e.lane != TraceLane::comm) continue;
    if (e.peer >= 0 && e.tag >= 0) sends.emplace(std::tuple{int64_t{e.rank}, int64_t{e.peer}, e.tag}, &e);
    if (is_collective_name(e.name)) collectives.emplace(std::tuple{e.label, int64_t{e.step}, int64_t{e.rank}}, &e);
  }
  for (Transfer& t : m.transfers) {
    const auto found = sends.find({t.from, t.to, t.tag});
    if (found == sends.end()) continue;
    t.start = found->second->start_us * 1e-6;
    t.end = t.start + found->second->duration_us * 1e-6;
  }
  for (CollectiveView& c : m.collectives) {
    if (c.step < 0 || c.members.empty()) continue;
    const StepView& step = m.steps[static_cast<size_t>(c.step)];
    const std::string& phase = m.phases[static_cast<size_t>(step.phase)].name;
    const auto found = collectives.find({phase, step.phase_step, c.members.front()});
    if (found == collectives.end()) continue;  // a group of one moves nothing
    c.start = found->second->start_us * 1e-6;
    c.end = c.start + found->second->duration_us * 1e-6;
  }
}

}  // namespace

void attach_measured_time(ScheduleModel& m, std::span<const TraceEvent> events) {
  timeline_rows(m, events, step_by_phase_name(m), TimeSource::measured);
  summarise(m);
}

void attach_predicted_time(ScheduleModel& m, const Plan& plan, const Hardware& hardware) {
  // Timed as `ringlab run --dry-run --hw` times it: at the machine's element size on the wire.
  PlanSpec spec = plan.spec();
  spec.element_bytes = hardware.element_bytes;
  const Plan costed = spec.element_bytes == plan.spec().element_bytes ? plan : build_plan(spec);
  DryOptions options;
  options.trace = 3 * total_ops(costed) <= kMaxPredictedEvents;
  DryResult dry;
  std::string note;
  try {
    dry = run_dry_plan(costed, hardware, options);
  } catch (const std::logic_error& error) {  // a hand-broken plan the executors cannot run
    note = std::string("the cost model cannot time this plan: ") + error.what();
  }
  timeline_rows(m, dry.trace, step_by_phase_name(m), TimeSource::cost_model);
  m.timeline.hardware = hardware.name;
  m.timeline.note = note;
  if (note.empty() && !options.trace) {
    m.timeline.note = "too many operations to draw (P=" + std::to_string(plan.ranks()) +
                      "): the cost model's totals only, per rank in the load panel";
  }
  for (size_t r = 0; r < dry.ranks.size() && r < m.load.ranks.size(); ++r) {
    m.load.ranks[r].busy = dry.ranks[r].compute_s;
    m.load.ranks[r].blocked = dry.ranks[r].exposed_comm_s + dry.ranks[r].idle_s;
  }
  time_messages(m, dry.trace);
  summarise(m);
  // Elementwise work (finalize, dK/dV accumulation) makes no event: the schedule ends at the
  // makespan even when no span reaches it.
  m.timeline.end = std::max(m.timeline.end, dry.makespan_s);
}

namespace {

// ---- [trace model: phases] -------------------------------------------------------------------

// What the events with a step say about one phase (one label).
struct PhaseSeen {
  double first_start = 0;  // the earliest event's start, microseconds
  int64_t steps = 0;       // 1 + the largest step
  bool backward = false;
  bool compute = false;
  bool collective = false;
};

// Which events count for phases and steps: those with a step, and a label when any event has one.
struct PhaseNaming {
  bool any_label = false;
  std::string name(const TraceEvent& e) const { return any_label ? e.label : std::string("steps"); }
  bool counts(const TraceEvent& e) const { return e.step >= 0 && (!any_label || !e.label.empty()); }
};

struct TraceExtent {
  int64_t max_rank = 0, max_block = -1;
};

std::map<std::string, PhaseSeen> collect_phases(std::span<const TraceEvent> events, const PhaseNaming& naming,
                                                TraceExtent& extent) {
  std::map<std::string, PhaseSeen> seen;
  for (const TraceEvent& e : events) {
    extent.max_rank = std::max<int64_t>(extent.max_rank, e.rank);
    if (e.lane == TraceLane::compute) extent.max_block = std::max<int64_t>({extent.max_block, e.q_block, e.kv_block});
    if (!naming.counts(e)) continue;
    auto [it, inserted] = seen.try_emplace(naming.name(e), PhaseSeen{e.start_us});
    PhaseSeen& phase = it->second;
    phase.first_start = std::min(phase.first_start, e.start_us);
    phase.steps = std::max<int64_t>(phase.steps, int64_t{e.step} + 1);
    phase.backward |= is_backward(e) || e.label.find("backward") != std::string::npos;
    phase.compute |= e.lane == TraceLane::compute;
    phase.collective |= is_collective_name(e.name);
  }
  return seen;
}

// Throws UsageError when the trace describes more than the viewer holds.
void check_extent(const std::map<std::string, PhaseSeen>& seen, const TraceExtent& extent, const std::string& title) {
  if (seen.empty())
    throw UsageError(title + ": no event has a \"step\" in its args, so it shows no schedule; " + kHint);
  if (extent.max_rank + 1 > kMaxRanks) {
    throw UsageError(title + ": rank " + std::to_string(extent.max_rank) + " is beyond the viewer's " +
                     std::to_string(kMaxRanks) + " ranks; " + kHint);
  }
  if (extent.max_block + 1 > kMaxBlocks) {
    throw UsageError(title + ": block " + std::to_string(extent.max_block) + " is beyond the viewer's grid of " +
                     std::to_string(kMaxBlocks) + " blocks; " + kHint);
  }
  int64_t total_steps = 0;
  for (const auto& [name, phase] : seen) total_steps += phase.steps;
  if ((extent.max_rank + 1) * total_steps > kMaxRankSteps) {
    throw UsageError(title + ": " + std::to_string(extent.max_rank + 1) + " ranks x " + std::to_string(total_steps) +
                     " steps is more than the viewer holds; " + kHint);
  }
}

// The model's phases and global steps, in order of each phase's first event; returns each phase's
// first global step by name, and whether a backward phase computes.
std::map<std::string, int64_t> lay_out_phases(ScheduleModel& m, const std::map<std::string, PhaseSeen>& seen,
                                              bool& any_backward) {
  std::vector<std::pair<double, std::string>> order;
  for (const auto& [name, phase] : seen) order.emplace_back(phase.first_start, name);
  std::sort(order.begin(), order.end());
  std::map<std::string, int64_t> first_step;
  any_backward = false;
  for (const auto& [first_start, name] : order) {
    const PhaseSeen& seen_phase = seen.at(name);
    first_step[name] = static_cast<int64_t>(m.steps.size());
    PhaseView phase{name,
                    seen_phase.backward ? Pass::backward : Pass::forward,
                    Family::ring,
                    seen_phase.steps,
                    static_cast<int64_t>(m.steps.size()),
                    seen_phase.compute,
                    seen_phase.collective};
    for (int64_t s = 0; s < seen_phase.steps; ++s) m.steps.push_back({static_cast<int>(m.phases.size()), s, 0, 0});
    m.phases.push_back(phase);
    any_backward |= seen_phase.backward && seen_phase.compute;
  }
  return first_step;
}

// ---- [trace model: grid, transfers, collectives] ---------------------------------------------

// The grid and what each rank computes at each step, from the compute events. Blocks computed
// count the attention blocks (events with a q_block and kv_block): a GPU trace's compute lane
// also times loading K/V, accumulating dK/dV, finalize and the like. Blocks skipped stay unknown:
// a skipped block makes no event.
template <class StepOf>
void fill_grid(ScheduleModel& m, std::span<const TraceEvent> events, StepOf step_of) {
  for (RankLoad& load : m.load.ranks) load.skipped = kUnknownCount;
  for (const TraceEvent& e : events) {
    if (e.lane != TraceLane::compute) continue;
    RankLoad& load = m.load.ranks[static_cast<size_t>(e.rank)];
    if (e.flops > 0) load.flops += e.flops;
    if (e.q_block < 0 || e.kv_block < 0) continue;
    load.computed += 1;
    const int64_t step = step_of(e);
    if (step < 0) continue;
    const BlockShape shape = shape_of(e.mask);
    if (shape == BlockShape::diagonal || shape == BlockShape::masked || shape == BlockShape::erratum ||
        shape == BlockShape::partial)
      load.masked += 1;
    RankStep& held = m.rank_steps[static_cast<size_t>(e.rank)][static_cast<size_t>(step)];
    held.kv_block = held.computed = e.kv_block;
    held.shape = shape;
    held.flops += std::max(0.0, e.flops);
    const bool backward =
        is_backward(e) ||
        m.phases[static_cast<size_t>(m.steps[static_cast<size_t>(step)].phase)].pass == Pass::backward;
    BlockGrid& grid = m.grids[backward && m.grids.size() > 1 ? 1 : 0];
    GridCell& cell = grid.at(e.q_block, e.kv_block);
    cell.planned = true;
    cell.shape = shape;
    cell.step = step;
    cell.phase_step = e.step;
    if (std::find(cell.ranks.begin(), cell.ranks.end(), e.rank) == cell.ranks.end()) cell.ranks.push_back(e.rank);
    cell.flops += std::max(0.0, e.flops);
  }
}

// Transfers: one per (sender, receiver, step, exchange), from the senders' events. The plan's tag
// of an exchange is x = (phase * 4 + exchange id) * 10^6 + step (exchange_tag in
// sim/plan/plan.hpp): exchange id 1 is the dK/dV accumulator. ringlab's sim sends K and V as two
// messages with tags 2x and 2x+1, each half the bytes; a GPU executor copies the exchange as one
// message with tag x.
template <class StepOf>
void fill_transfers(ScheduleModel& m, std::span<const TraceEvent> events, StepOf step_of, TimeSource source) {
  double t0 = 1e300;
  for (const TraceEvent& e : events) t0 = std::min(t0, e.start_us);
  const bool halves = source != TimeSource::device_copies;
  std::set<std::tuple<int64_t, int64_t, int64_t, int64_t>> sent;
  for (const TraceEvent& e : events) {
    if (kind_of(e, source) != SpanKind::send || e.name == "irecv" || e.name == "recv" || e.peer < 0 ||
        e.peer >= m.ranks)
      continue;
    const int64_t step = step_of(e);
    if (step < 0) continue;
    const int64_t exchange = e.tag < 0 ? -1 : halves ? e.tag / 2 : e.tag;
    if (!sent.insert({e.rank, e.peer, step, exchange}).second) continue;
    const bool dkv = exchange >= 0 && exchange_of_tag(exchange) % 4 == 1;
    const int64_t held = m.rank_steps[static_cast<size_t>(e.rank)][static_cast<size_t>(step)].computed;
    const double start = (e.start_us - t0) * 1e-6;
    m.transfers.push_back({e.rank, e.peer, dkv ? Payload::dkv : Payload::kv, dkv ? kNoBlock : held, step,
                           std::max<int64_t>(0, e.bytes) * (e.tag >= 0 && halves ? 2 : 1), start,
                           start + e.duration_us * 1e-6});
  }
  std::stable_sort(m.transfers.begin(), m.transfers.end(),
                   [](const Transfer& a, const Transfer& b) { return a.step < b.step; });
}

// Collectives: the members of each (step, name, group) seen together.
template <class StepOf>
void fill_collectives(ScheduleModel& m, std::span<const TraceEvent> events, StepOf step_of) {
  std::map<std::tuple<int64_t, std::string, std::string>, CollectiveView> groups;
  for (const TraceEvent& e : events) {
    if (!is_collective_name(e.name) || starts_with(e.name, "split")) continue;
    const int64_t step = step_of(e);
    if (step < 0) continue;
    CollectiveView& c = groups[{step, e.name, e.group}];
    c.step = step;
    c.name = m.phases[static_cast<size_t>(m.steps[static_cast<size_t>(step)].phase)].name;
    c.kind = starts_with(e.name, "all_gather")       ? Collective::all_gather_kv
             : starts_with(e.name, "reduce_scatter") ? Collective::reduce_scatter_dkv
                                                     : Collective::all_to_all_qkv;
    c.members.push_back(e.rank);
    c.bytes = std::max<int64_t>(c.bytes, e.bytes);
  }
  for (auto& [key, c] : groups) {
    std::sort(c.members.begin(), c.members.end());
    m.collectives.push_back(std::move(c));
  }
}

}  // namespace

// ---- [trace model] ---------------------------------------------------------------------------

namespace {

// The model of a trace's events, read as `source` says; `spec_ranks` is the run's P when the
// trace names its run (0 when not).
ScheduleModel trace_model(std::span<const TraceEvent> events, const std::string& title, TimeSource source,
                          int64_t spec_ranks) {
  ScheduleModel m;
  m.source = SourceKind::trace;
  m.title = title;
  if (events.empty()) throw UsageError(title + ": the trace has no complete (\"X\") events; " + kHint);

  PhaseNaming naming;
  for (const TraceEvent& e : events) naming.any_label |= e.step >= 0 && !e.label.empty();
  TraceExtent extent;
  const std::map<std::string, PhaseSeen> seen = collect_phases(events, naming, extent);
  check_extent(seen, extent, title);
  // The run's spec sets the controls (and what an edit re-plans), so events from ranks it does not
  // have make a file that contradicts itself: no one schedule to show. (Events from fewer ranks
  // can be a run that failed early, before some ranks recorded anything.)
  if (spec_ranks > 0 && extent.max_rank + 1 > spec_ranks) {
    throw UsageError(title + ": the run's spec has \"ranks\": " + std::to_string(spec_ranks) +
                     " but its events come from " + std::to_string(extent.max_rank + 1) + " ranks (0 to " +
                     std::to_string(extent.max_rank) + "), so the file contradicts itself; " + kHint);
  }
  m.ranks = extent.max_rank + 1;
  m.ring = extent.max_block >= 0 ? extent.max_block + 1 : m.ranks;
  m.ulysses = m.ranks % m.ring == 0 ? m.ranks / m.ring : 1;

  bool any_backward = false;
  const std::map<std::string, int64_t> first_step = lay_out_phases(m, seen, any_backward);
  auto step_of = [&](const TraceEvent& e) -> int64_t {
    if (!naming.counts(e)) return -1;
    return first_step.at(naming.name(e)) + e.step;
  };
  for (Pass pass : {Pass::forward, Pass::backward}) {
    if (pass == Pass::backward && !any_backward) continue;
    m.grids.push_back(empty_grid(pass, m.ring));
  }
  m.rank_steps.assign(static_cast<size_t>(m.ranks), std::vector<RankStep>(m.steps.size()));
  m.load.ranks.assign(static_cast<size_t>(m.ranks), {});
  fill_grid(m, events, step_of);
  fill_transfers(m, events, step_of, source);
  fill_collectives(m, events, step_of);

  timeline_rows(m, events, step_of, source);
  summarise(m);
  locate_first_error(m);
  return m;
}

}  // namespace

ScheduleModel model_from_trace(std::span<const TraceEvent> events, const std::string& title) {
  return trace_model(events, title, TimeSource::measured, 0);
}

ScheduleModel model_from_trace_file(const TraceFile& file, const std::string& title) {
  if (!file.run) return model_from_trace(file.events, title);
  const bool gpu = file.run->tool.rfind("ringlab-gpu", 0) == 0;
  return trace_model(file.events, title, gpu ? TimeSource::device_copies : TimeSource::measured, file.run->spec.ranks);
}

}  // namespace ringlab::viz
