// The model's queries, its timeline helpers and summaries, and the first error: what every builder
// (viz/model/plan_model.hpp, viz/model/trace_model.hpp) shares.
// Sections: [names and queries] [timeline] [summaries] [first error] [ring directions and hops]
#include "viz/model/schedule_model.hpp"

#include <algorithm>
#include <array>
#include <cstdio>

#include "reference/names.hpp"
#include "reference/printf_text.hpp"
#include "sim/plan/queries.hpp"
#include "sim/plan/walk.hpp"

namespace ringlab::viz {

// ---- [names and queries] ---------------------------------------------------------------------

const char* error_cause_name(ErrorCause cause) {
  constexpr const char* kNames[] = {"none", "wrong result", "wrong mask", "misrouted dK/dV"};
  return name_of(kNames, cause);
}

const char* source_name(SourceKind kind) {
  constexpr const char* kNames[] = {"plan", "trace", "run"};
  return name_of(kNames, kind);
}

std::string time_source(const Timeline& timeline) {
  if (timeline.measured) return "measured";
  return "the cost model's prediction for " +
         (timeline.hardware.empty() ? std::string("no machine") : timeline.hardware);
}

namespace {

std::string flops_text(double flops) {
  if (flops >= 1e12) return printf_text("%.2f TFLOP", flops / 1e12);
  if (flops >= 1e9) return printf_text("%.2f GFLOP", flops / 1e9);
  if (flops >= 1e6) return printf_text("%.2f MFLOP", flops / 1e6);
  return printf_text("%.0f FLOP", flops);
}

const char* shape_meaning(BlockShape shape) {
  switch (shape) {
    case BlockShape::full: return "full: every query sees every key";
    case BlockShape::diagonal: return "diagonal: the causal mask cuts through it";
    case BlockShape::q_half: return "q-half: only some query units see the keys (computed as a rectangle)";
    case BlockShape::kv_half: return "kv-half: the queries see only some key units (computed as a rectangle)";
    case BlockShape::masked: return "masked: fully masked but computed anyway (--no-skip)";
    case BlockShape::skipped: return "skipped: fully masked, no kernel call";
    case BlockShape::erratum: return "erratum: masked by the query's index within its block";
    case BlockShape::partial: return "partial: a window or document mask cuts through it";
  }
  return "?";
}

}  // namespace

const BlockGrid* ScheduleModel::grid_of(Pass pass) const {
  for (const BlockGrid& grid : grids)
    if (grid.pass == pass) return &grid;
  return nullptr;
}

BlockGrid empty_grid(Pass pass, int64_t blocks) {
  BlockGrid grid{pass, blocks, {}};
  grid.cells.resize(static_cast<size_t>(blocks * blocks));
  for (int64_t q = 0; q < blocks; ++q)
    for (int64_t k = 0; k < blocks; ++k) {
      grid.at(q, k).q_block = q;
      grid.at(q, k).kv_block = k;
    }
  return grid;
}

BlockGrid* ScheduleModel::grid_of(Pass pass) {
  for (BlockGrid& grid : grids)
    if (grid.pass == pass) return &grid;
  return nullptr;
}

const BlockGrid* ScheduleModel::grid_at(int64_t step) const {
  const BlockGrid* grid = step < 0 || step >= step_count()
                              ? nullptr
                              : grid_of(phases[static_cast<size_t>(steps[static_cast<size_t>(step)].phase)].pass);
  return grid ? grid : (grids.empty() ? nullptr : &grids.front());
}

std::string ScheduleModel::step_label(int64_t step) const {
  if (step < 0 || step >= step_count()) return "no step";
  const StepView& s = steps[static_cast<size_t>(step)];
  const PhaseView& phase = phases[static_cast<size_t>(s.phase)];
  // --step counts from 0, so "of N" would read as a count of steps: the last index is named instead.
  std::string text = printf_text("step %lld (last %lld): %s", static_cast<long long>(step),
                                 static_cast<long long>(step_count() - 1), phase.name.c_str());
  if (phase.steps > 1) text += printf_text(", step %lld", static_cast<long long>(s.phase_step));
  return text;
}

UnitPattern ScheduleModel::unit_pattern(int64_t q_block, int64_t kv_block, int64_t max_units) const {
  UnitPattern pattern;
  if (q_block < 0 || kv_block < 0 || q_block >= static_cast<int64_t>(block_units.size()) ||
      kv_block >= static_cast<int64_t>(block_units.size())) {
    return pattern;
  }
  const std::vector<int64_t>& q = block_units[static_cast<size_t>(q_block)];
  const std::vector<int64_t>& k = block_units[static_cast<size_t>(kv_block)];
  if (q.empty() || k.empty() || static_cast<int64_t>(q.size()) > max_units ||
      static_cast<int64_t>(k.size()) > max_units) {
    return pattern;
  }
  pattern.rows = static_cast<int64_t>(q.size());
  pattern.cols = static_cast<int64_t>(k.size());
  for (int64_t a : q)
    for (int64_t c : k)
      pattern.entries.push_back(!causal || c < a ? UnitVisibility::full
                                                 : (c == a ? UnitVisibility::diagonal : UnitVisibility::none));
  return pattern;
}

std::vector<ScheduleModel::SubTile> ScheduleModel::mask_tiles(int64_t q_block, int64_t kv_block, int64_t tiles) const {
  std::vector<SubTile> out;
  const auto blocks = static_cast<int64_t>(block_positions.size());
  if (q_block < 0 || kv_block < 0 || q_block >= blocks || kv_block >= blocks || tiles < 1) return out;
  const std::vector<int64_t>& q = block_positions[static_cast<size_t>(q_block)];
  const std::vector<int64_t>& k = block_positions[static_cast<size_t>(kv_block)];
  if (q.empty() || k.empty()) return out;
  const int64_t rows = std::min<int64_t>(tiles, static_cast<int64_t>(q.size()));
  const int64_t cols = std::min<int64_t>(tiles, static_cast<int64_t>(k.size()));
  auto cut = [](const std::vector<int64_t>& v, int64_t parts, int64_t i) {  // the i-th of `parts` equal runs
    const auto n = static_cast<int64_t>(v.size());
    return std::span<const int64_t>(v.data() + i * n / parts, static_cast<size_t>((i + 1) * n / parts - i * n / parts));
  };
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) {
      const std::span<const int64_t> qs = cut(q, rows, i), ks = cut(k, cols, j);
      const double all = static_cast<double>(qs.size()) * static_cast<double>(ks.size());
      out.push_back({i, j, all > 0 ? static_cast<double>(mask.pairs(qs, ks)) / all : 0});
    }
  return out;
}

std::vector<ScheduleModel::DocumentRun> ScheduleModel::block_documents(int64_t block) const {
  std::vector<DocumentRun> runs;
  if (block < 0 || block >= static_cast<int64_t>(block_positions.size())) return runs;
  for (const int64_t position : block_positions[static_cast<size_t>(block)]) {
    const int64_t document = mask.has_documents() ? mask.document_of(position) : 0;
    if (runs.empty() || runs.back().document != document) runs.push_back({document, 0});
    ++runs.back().tokens;
  }
  return runs;
}

std::vector<std::string> ScheduleModel::describe_cell(const BlockGrid& grid, int64_t q_block, int64_t kv_block) const {
  std::vector<std::string> lines;
  if (q_block < 0 || kv_block < 0 || q_block >= grid.blocks || kv_block >= grid.blocks) return lines;
  const GridCell& cell = grid.at(q_block, kv_block);
  auto tokens = [&](int64_t block) {
    return block < static_cast<int64_t>(block_tokens.size())
               ? " (tokens " + block_tokens[static_cast<size_t>(block)] + ")"
               : std::string();
  };
  const char* pass = grid.pass == Pass::forward ? "forward" : "backward";
  lines.push_back(
      printf_text("%s: queries of block %lld%s", pass, static_cast<long long>(q_block), tokens(q_block).c_str()));
  lines.push_back(printf_text("x keys of block %lld%s", static_cast<long long>(kv_block), tokens(kv_block).c_str()));
  if (!cell.planned) {
    lines.push_back(source == SourceKind::trace ? "not in the trace: skipped, or not traced"
                                                : "not computed by this plan");
    return lines;
  }
  std::string who = cell.ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < cell.ranks.size(); ++i) who += (i ? ", " : "") + std::to_string(cell.ranks[i]);
  lines.push_back(who + (cell.ranks.size() > 1 ? " (one head group each)" : "") + ", " + step_label(cell.step));
  lines.push_back(shape_meaning(cell.shape));
  if (cell.computed()) {
    lines.push_back("work: " + flops_text(cell.flops) +
                    printf_text(", %lld visible pairs per (batch, head)", static_cast<long long>(cell.pairs)));
  }
  switch (cell.cause) {
    case ErrorCause::none: break;
    case ErrorCause::wrong_result:
      lines.push_back(printf_text("WRONG: its own result is off by %.3g (%.0fx the tolerance)", cell.max_abs_error,
                                  cell.tolerance_used));
      break;
    case ErrorCause::wrong_mask:
      lines.push_back("WRONG (plan): masked by the query's index within its block, not by position");
      break;
    case ErrorCause::misrouted_gradient:
      lines.push_back(printf_text("WRONG: its dK/dV are added into the accumulator of block %lld, not %lld",
                                  static_cast<long long>(cell.misrouted_into), static_cast<long long>(kv_block)));
      break;
  }
  if (cell.measured && cell.cause == ErrorCause::none) {
    lines.push_back(printf_text("own result ok: max abs error %.3g (%.0f%% of the tolerance)", cell.max_abs_error,
                                100 * cell.tolerance_used));
  }
  if (diagnosis.present && kv_block < static_cast<int64_t>(diagnosis.blocks.size()) && grid.pass == Pass::backward) {
    const BlockResult& r = diagnosis.blocks[static_cast<size_t>(kv_block)];
    lines.push_back(printf_text("key block %lld final dK/dV: max abs error %.3g / %.3g (%s)",
                                static_cast<long long>(kv_block), r.dk_error, r.dv_error, r.key_ok ? "ok" : "WRONG"));
  }
  if (!diagnosis.present && cell.cause == ErrorCause::none && source != SourceKind::trace) {
    lines.push_back("no run attached: Run measures each block's error");
  }
  return lines;
}

std::vector<const Transfer*> ScheduleModel::transfers_at(int64_t step) const {
  std::vector<const Transfer*> found;
  for (const Transfer& t : transfers)
    if (t.step == step) found.push_back(&t);
  return found;
}

std::vector<const CollectiveView*> ScheduleModel::collectives_at(int64_t step) const {
  std::vector<const CollectiveView*> found;
  for (const CollectiveView& c : collectives)
    if (c.step == step) found.push_back(&c);
  return found;
}

// ---- [timeline] ----------------------------------------------------------------------------

const char* timeline_lane_name(int lane) {
  constexpr const char* kNames[] = {"compute", "comm", "exposed"};
  return lane >= 0 && lane < kTimelineLanes ? kNames[lane] : "?";
}

std::vector<Span> exposed_spans(const TimelineRow& compute, const TimelineRow& communication) {
  std::vector<Span> exposed;
  for (const Span& span : communication.spans) {
    if (span.kind != SpanKind::wait && span.kind != SpanKind::collective) continue;
    if (span.label.rfind("wait (peer late)", 0) == 0) continue;  // idle: the peer had not posted yet
    // The span less the compute spans that overlap it (a rank that computes is not waiting).
    double from = span.start;
    for (const Span& busy : compute.spans) {
      if (busy.end <= from || busy.start >= span.end) continue;
      if (busy.start > from)
        exposed.push_back({from, busy.start, span.kind, span.step, span.block, span.peer, span.label});
      from = std::max(from, busy.end);
    }
    if (span.end > from) exposed.push_back({from, span.end, span.kind, span.step, span.block, span.peer, span.label});
  }
  std::stable_sort(exposed.begin(), exposed.end(), [](const Span& a, const Span& b) { return a.start < b.start; });
  return exposed;
}

std::vector<LegendEntry> timeline_legend(const ScheduleModel& model) {
  std::vector<LegendEntry> legend{{"compute (coloured by its K/V block)", SpanKind::compute, 0}};
  bool sends = false, waits = false, collectives = false;
  for (const TimelineRow& row : model.timeline.rows)
    for (const Span& span : row.spans) {
      sends |= span.kind == SpanKind::send;
      waits |= span.kind == SpanKind::wait && row.lane == kCommLane;
      collectives |= span.kind == SpanKind::collective;
    }
  if (sends) legend.push_back({"comm: transfer in flight (upper half)", SpanKind::send, kNoBlock});
  if (waits) legend.push_back({"comm: wait (lower half)", SpanKind::wait, kNoBlock});
  if (collectives) legend.push_back({"comm: collective", SpanKind::collective, kNoBlock});
  legend.push_back({"exposed: waiting on communication instead of computing", SpanKind::wait, kNoBlock});
  return legend;
}

// ---- [summaries] ---------------------------------------------------------------------------

std::string load_blocks_text(const RankLoad& load) {
  const std::string skipped = load.skipped == kUnknownCount ? "unknown (no event)" : std::to_string(load.skipped);
  return "blocks: " + std::to_string(load.computed) + " computed, " + skipped + " skipped, " +
         std::to_string(load.masked) + " masked";
}

// Step times, cumulative FLOPs and max/mean from the walk's (or a trace's) spans and cells.
void summarise(ScheduleModel& m) {
  const size_t steps = m.steps.size();
  std::vector<double> start(steps, 1e300), end(steps, -1e300);
  m.timeline.end = 0;
  for (TimelineRow& row : m.timeline.rows) {
    std::stable_sort(row.spans.begin(), row.spans.end(),
                     [](const Span& a, const Span& b) { return a.start < b.start; });
    for (const Span& span : row.spans) {
      m.timeline.end = std::max(m.timeline.end, span.end);
      if (span.step < 0 || span.step >= static_cast<int64_t>(steps)) continue;
      start[static_cast<size_t>(span.step)] = std::min(start[static_cast<size_t>(span.step)], span.start);
      end[static_cast<size_t>(span.step)] = std::max(end[static_cast<size_t>(span.step)], span.end);
    }
  }
  double previous_end = 0;
  for (size_t t = 0; t < steps; ++t) {
    StepView& s = m.steps[t];
    s.start = start[t] <= end[t] ? std::max(start[t], previous_end) : previous_end;
    s.end = std::max(s.start, start[t] <= end[t] ? end[t] : previous_end);
    previous_end = s.end;
  }
  LoadSummary& load = m.load;
  load.flops_max = load.flops_mean = load.busy_max = load.busy_mean = 0;
  for (size_t r = 0; r < load.ranks.size(); ++r) {
    RankLoad& rank = load.ranks[r];
    rank.flops_until.assign(steps, 0);
    double sum = 0;
    for (size_t t = 0; t < steps && r < m.rank_steps.size(); ++t) rank.flops_until[t] = sum += m.rank_steps[r][t].flops;
    load.flops_max = std::max(load.flops_max, rank.flops);
    load.busy_max = std::max(load.busy_max, rank.busy);
    load.flops_mean += rank.flops;
    load.busy_mean += rank.busy;
  }
  if (!load.ranks.empty()) {
    load.flops_mean /= static_cast<double>(load.ranks.size());
    load.busy_mean /= static_cast<double>(load.ranks.size());
  }
}

// ---- [first error] ---------------------------------------------------------------------------

void locate_first_error(ScheduleModel& m) {
  m.first_error = {};
  const GridCell* best = nullptr;
  Pass best_pass = Pass::forward;
  for (const BlockGrid& grid : m.grids)
    for (const GridCell& cell : grid.cells) {
      if (!cell.wrong() || cell.step < 0) continue;
      if (!best || cell.step < best->step || (cell.step == best->step && cell.q_block < best->q_block)) {
        best = &cell;
        best_pass = grid.pass;
      }
    }
  if (!best) return;
  ErrorEntry& e = m.first_error;
  e.step = best->step;
  e.rank = best->ranks.empty() ? -1 : best->ranks.front();
  e.pass = best_pass;
  e.q_block = best->q_block;
  e.kv_block = best->kv_block;
  e.cause = best->cause;
  const std::string where = m.step_label(e.step) + ", rank " + std::to_string(e.rank) + ": ";
  const long long q = e.q_block, k = e.kv_block;
  switch (e.cause) {
    case ErrorCause::misrouted_gradient:
      e.text = where +
               printf_text(
                   "dK/dV of key block %lld (from queries of block %lld) are added into the accumulator of block %lld",
                   k, q, static_cast<long long>(best->misrouted_into));
      break;
    case ErrorCause::wrong_mask:
      e.text = where +
               printf_text("block %lld x %lld is masked by the query's index within its block, not its position", q, k);
      break;
    case ErrorCause::wrong_result:
      e.text =
          where + printf_text("block %lld x %lld is wrong on its own (max abs error %.3g)", q, k, best->max_abs_error);
      break;
    case ErrorCause::none: break;
  }
}

// ---- [ring directions and hops] --------------------------------------------------------------

namespace {

// The phase's ring-neighbour direction of a payload from its transfers: +1, -1 or 0.
int phase_direction(const ScheduleModel& model, int phase, Payload payload) {
  const int64_t R = model.ring, U = std::max<int64_t>(1, model.ulysses);
  if (R < 2) return 0;
  for (const Transfer& t : model.transfers) {
    if (t.payload != payload || t.step < 0 || t.step >= model.step_count()) continue;
    if (model.steps[static_cast<size_t>(t.step)].phase != phase) continue;
    const int64_t hop = ((t.to / U - t.from / U) % R + R) % R;
    if (hop == 1) return +1;
    if (hop == R - 1) return -1;
  }
  return 0;
}

bool valid_step(const ScheduleModel& model, int64_t step) { return step >= 0 && step < model.step_count(); }

}  // namespace

int ring_direction(const ScheduleModel& model, int64_t step, Payload payload) {
  if (!valid_step(model, step)) return 0;
  return phase_direction(model, model.steps[static_cast<size_t>(step)].phase, payload);
}

std::string ring_direction_text(const ScheduleModel& model, int64_t step) {
  auto way = [](int direction) {
    return direction > 0 ? "clockwise (g to g+1)" : direction < 0 ? "counter-clockwise (g to g-1)" : "";
  };
  std::string text;
  for (const auto& [payload, name] : {std::pair{Payload::kv, "K/V"}, std::pair{Payload::dkv, "dK/dV"}}) {
    const int direction = ring_direction(model, step, payload);
    if (direction == 0) continue;
    text += (text.empty() ? "" : "; ") + std::string(name) + " travel " + way(direction);
  }
  return text;
}

std::vector<Hop> skipped_hops(const ScheduleModel& model, int64_t step) {
  std::vector<Hop> skipped;
  if (!valid_step(model, step) || model.ring < 2) return skipped;
  const StepView& view = model.steps[static_cast<size_t>(step)];
  const PhaseView& phase = model.phases[static_cast<size_t>(view.phase)];
  const int direction = phase_direction(model, view.phase, Payload::kv);
  if (phase.family != Family::ring || direction == 0 || view.phase_step > model.ring - 2) return skipped;
  const int64_t R = model.ring, U = std::max<int64_t>(1, model.ulysses);
  std::vector<bool> sends(static_cast<size_t>(model.ranks), false);
  for (const Transfer* t : model.transfers_at(step))
    if (t->payload == Payload::kv) sends[static_cast<size_t>(t->from)] = true;
  for (int64_t r = 0; r < model.ranks; ++r) {
    if (sends[static_cast<size_t>(r)]) continue;
    const int64_t to = ((r / U + direction) % R + R) % R * U + r % U;
    skipped.push_back({r, to});
  }
  return skipped;
}

HopCount kv_hop_count(const ScheduleModel& model, int64_t step) {
  HopCount count;
  if (!valid_step(model, step) || model.ring < 2) return count;
  const int phase = model.steps[static_cast<size_t>(step)].phase;
  // Family::ring also names the phases around a ring (finalize, the all-gather) and every phase of
  // a trace: only K/V travelling between neighbours make it a ring with hops.
  if (model.phases[static_cast<size_t>(phase)].family != Family::ring ||
      phase_direction(model, phase, Payload::kv) == 0)
    return count;
  count.full = model.ring - 1;
  std::vector<int64_t> made(static_cast<size_t>(model.ranks), 0);
  for (const Transfer& t : model.transfers)
    if (t.payload == Payload::kv && valid_step(model, t.step) &&
        model.steps[static_cast<size_t>(t.step)].phase == phase)
      ++made[static_cast<size_t>(t.from)];
  count.made = *std::max_element(made.begin(), made.end());
  return count;
}

std::string kv_hop_text(const ScheduleModel& model, int64_t step) {
  const HopCount hops = kv_hop_count(model, step);
  if (hops.full == 0 || hops.made >= hops.full) return "";
  std::string text = "K/V hops: " + std::to_string(hops.made) + " of " + std::to_string(hops.full);
  if (!skipped_hops(model, step).empty()) text += " (skipped: dotted, crossed)";
  return text;
}

}  // namespace ringlab::viz
