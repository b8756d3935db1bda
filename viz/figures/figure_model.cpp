// The figures' kinds, their size limits, and the model they draw from.
#include <string>
#include <vector>

#include "reference/error.hpp"
#include "sim/cost/dry_executor.hpp"
#include "viz/figures/book_figures.hpp"

namespace ringlab::viz {

namespace {

constexpr int64_t kMaxGridBlocks = 64;
constexpr int64_t kMaxLoadRanks = 256;
constexpr int64_t kMaxTimelineRanks = 64;

}  // namespace

const char* figure_kind_name(FigureKind kind) {
  switch (kind) {
    case FigureKind::grid_step: return "grid-step";
    case FigureKind::grid_rank: return "grid-rank";
    case FigureKind::load: return "load";
    case FigureKind::timeline: return "timeline";
  }
  return "?";
}

FigureKind parse_figure_kind(const std::string& name) {
  for (FigureKind kind : {FigureKind::grid_step, FigureKind::grid_rank, FigureKind::load, FigureKind::timeline})
    if (name == figure_kind_name(kind)) return kind;
  throw UsageError("unknown figure '" + name + "'; use ringlab figure grid-step, grid-rank, load or timeline");
}

void check_figure_size(FigureKind kind, int64_t ring, int64_t ranks) {
  switch (kind) {
    case FigureKind::grid_step:
    case FigureKind::grid_rank:
      if (ring > kMaxGridBlocks) {
        throw UsageError("a block grid of " + std::to_string(ring) + " ring positions is too large to draw; use at most " +
                         std::to_string(kMaxGridBlocks) + " (--ranks / --ulysses)");
      }
      break;
    case FigureKind::load:
      if (ranks > kMaxLoadRanks) {
        throw UsageError("a load figure of " + std::to_string(ranks) + " ranks is too wide; use at most " +
                         std::to_string(kMaxLoadRanks) + " --ranks");
      }
      break;
    case FigureKind::timeline:
      if (ranks > kMaxTimelineRanks) {
        throw UsageError("a timeline of " + std::to_string(ranks) + " ranks is too tall; use at most " +
                         std::to_string(kMaxTimelineRanks) + " --ranks");
      }
      break;
  }
}

ScheduleModel figure_model(const Plan& plan, const Hardware& hardware) {
  ScheduleModel model = model_from_plan(plan);
  DryOptions options;
  options.trace = true;
  DryResult dry = run_dry_plan(plan, hardware, options);
  // The dry executor names a transfer in flight "send" and a host copy that stalls the rank
  // "isend (copy)"; the trace model reads "send" as a blocking send (a wait, as the simulator's
  // trace means it). Named as the trace model reads them: a transfer, and a wait.
  for (TraceEvent& event : dry.trace) {
    if (event.name == "send") event.name = "isend";
    else if (event.name == "isend (copy)") event.name = "wait (host copy)";
  }
  attach_measured_time(model, dry.trace);
  return model;
}

Figure draw_figure(FigureKind kind, const ScheduleModel& model, Pass pass) {
  switch (kind) {
    case FigureKind::grid_step: return grid_figure(model, GridColouring::step, pass);
    case FigureKind::grid_rank: return grid_figure(model, GridColouring::rank, pass);
    case FigureKind::load: return load_figure(model);
    case FigureKind::timeline: break;
  }
  return timeline_figure(model);
}

}  // namespace ringlab::viz
