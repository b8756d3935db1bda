// The figures' kinds and their size limits, and drawing one kind.
#include <string>
#include <vector>

#include "reference/error.hpp"
#include "reference/names.hpp"
#include "viz/figures/book_figures.hpp"

namespace ringlab::viz {

namespace {

constexpr int64_t kMaxGridBlocks = 64;
constexpr int64_t kMaxLoadRanks = 256;
constexpr int64_t kMaxTimelineRanks = 64;

constexpr const char* kFigureKindNames[] = {"grid-step", "grid-rank", "load", "timeline"};

}  // namespace

const char* figure_kind_name(FigureKind kind) { return name_of(kFigureKindNames, kind); }

FigureKind parse_figure_kind(const std::string& name) {
  return parse_named<FigureKind>(kFigureKindNames, name, "figure", "ringlab figure");
}

void check_figure_size(FigureKind kind, int64_t ring, int64_t ranks) {
  switch (kind) {
    case FigureKind::grid_step:
    case FigureKind::grid_rank:
      if (ring > kMaxGridBlocks) {
        throw UsageError("a block grid of " + std::to_string(ring) +
                         " ring positions is too large to draw; use at most " + std::to_string(kMaxGridBlocks) +
                         " (--ranks / --ulysses)");
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
