// The book's figures (`ringlab figure KIND`), drawn from the viewer's UI-free model
// (viz/model/schedule_model.hpp) in the viewer's colours (viz/model/palette.hpp), so a figure and
// the same view in ringlab-viz agree: the same step, rank or K/V block has the same colour in both.
//
// Kinds:
//   grid-step  the (query block, key block) grid of one pass, ring positions in ring order, each
//              cell in the colour of the step (within its phase) that computes it; grid-rank: of
//              the rank that computes it. Cells as the viewer's grid panel draws them: a cell cut
//              by the causal mask shows its visible part (per layout unit when its blocks have at
//              most 8 units: zig-zag's half blocks show as such) over the masked-out colour;
//              skipped cells (no kernel call) and computed but fully masked ones (--no-skip) have
//              their own colours. Every cell rect carries class ("cell visible|diagonal|half|
//              masked|skipped|erratum|unplanned") and data-q / data-k / data-step (within its
//              phase) / data-rank; every visible part a class ("part visible|diagonal|hidden")
//              and, when drawn per unit, data-q-unit / data-k-unit (layout units, global order).
//   load       per rank, stacked bars of busy (computing) and blocked (waiting) time, as the
//              viewer's load panel shows them, with the mean and the maximum.
//   timeline   the viewer's timeline: per rank a compute row (spans in their K/V block's colour),
//              a communication row (transfers in its upper half, waits in its lower half,
//              collectives across it) and an exposed row (the waits and collectives the rank spent
//              not computing: timeline_lane, exposed_spans), labelled, with the model's legend.
// Load and timeline show the cost model's time for a hardware preset: every figure draws the
// model the viewer shows for the plan, model_from_plan(plan, hardware).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "sim/cost/hardware.hpp"
#include "sim/plan/plan.hpp"
#include "viz/figures/figure.hpp"
#include "viz/model/controls.hpp"
#include "viz/model/plan_model.hpp"
#include "viz/model/schedule_model.hpp"

namespace ringlab::viz {

enum class FigureKind : uint8_t { grid_step, grid_rank, load, timeline };
const char* figure_kind_name(FigureKind kind);
FigureKind parse_figure_kind(const std::string& name);  // throws UsageError listing the kinds

// Throws UsageError when a figure of `kind` cannot be drawn for `ring` ring positions and `ranks`
// ranks: grids up to 64 ring positions, load bars up to 256 ranks, timelines up to 64 ranks.
// Cheap: call it on the plan before building a model.
void check_figure_size(FigureKind kind, int64_t ring, int64_t ranks);

// ---- the figures -----------------------------------------------------------------------------

// The block grid of one pass, coloured by step or by rank (GridColouring::error needs a run, which
// a figure has not). Throws UsageError when the model has no such pass or too many ring positions.
Figure grid_figure(const ScheduleModel& model, GridColouring colouring, Pass pass);
// Busy and blocked time per rank. Throws UsageError beyond 256 ranks.
Figure load_figure(const ScheduleModel& model);
// The timeline. Throws UsageError beyond 64 ranks, std::logic_error when the model has no spans.
Figure timeline_figure(const ScheduleModel& model);
// One line of the precision figure: (P, error / P = 1's error) points, P ascending.
struct ErrorSeries {
  std::string label;  // "dv, accumulate storage"
  Rgba colour;
  bool dashed = false;
  double width = 2;  // stroke width in px
  std::vector<std::pair<int64_t, double>> points;
};
// Error ratio against P (log2 axis) for each series (`ringlab figure precision`).
Figure precision_figure(const std::string& title, const std::vector<ErrorSeries>& series);

// The figure of `kind` (grids: of `pass`).
Figure draw_figure(FigureKind kind, const ScheduleModel& model, Pass pass);

}  // namespace ringlab::viz
