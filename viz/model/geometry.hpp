// Where things are drawn, as pure functions of a canvas rectangle: the view lays every panel out
// through these, and the tests compute the same pixels from them (the screenshot test checks the
// colour found where grid_geometry says a cell or the current-step highlight is).
#pragma once

#include <cstdint>
#include <vector>

#include "viz/model/palette.hpp"
#include "viz/model/schedule_model.hpp"

namespace ringlab::viz {

struct Vec2 {
  float x = 0, y = 0;
  friend bool operator==(const Vec2&, const Vec2&) = default;
};

struct Rect {
  float x0 = 0, y0 = 0, x1 = 0, y1 = 0;
  float width() const { return x1 - x0; }
  float height() const { return y1 - y0; }
  Vec2 centre() const { return {(x0 + x1) / 2, (y0 + y1) / 2}; }
  bool contains(Vec2 p) const { return p.x >= x0 && p.x < x1 && p.y >= y0 && p.y < y1; }
  Rect inset(float d) const { return {x0 + d, y0 + d, x1 - d, y1 - d}; }
  friend bool operator==(const Rect&, const Rect&) = default;
};

// ---- ring ------------------------------------------------------------------------------------

// Ranks on a circle: ring position g at angle -90° + 360° g / R (clockwise from the top, so K/V
// moving g -> g+1 travels clockwise); the U ranks of a Ulysses group sit side by side around
// their position. Unit circle, centre (0, 0), y down (screen convention).
Vec2 ring_node(int64_t rank, int64_t ring, int64_t ulysses);
// A point on the arc from rank `from` to rank `to` (the shorter way round), progress 0..1,
// lifted `lift` radii outwards so that opposite directions do not overlap.
Vec2 ring_arc_point(int64_t from, int64_t to, float progress, int64_t ring, int64_t ulysses, float lift);

struct RingGeometry {
  Vec2 centre;
  float radius = 0;       // of the circle the nodes sit on
  float node_radius = 0;  // of each rank's disc
  Vec2 to_canvas(Vec2 unit) const { return {centre.x + unit.x * radius, centre.y + unit.y * radius}; }
  Vec2 node(int64_t rank, int64_t ring, int64_t ulysses) const { return to_canvas(ring_node(rank, ring, ulysses)); }
};
RingGeometry ring_geometry(const Rect& canvas, int64_t ranks);

// ---- block grid ------------------------------------------------------------------------------

// An R x R matrix of (query block, key block) cells, square, inside a canvas, with a margin on
// the left and top for the axis labels and the per-block result strips.
struct GridGeometry {
  Rect matrix;     // all cells
  float cell = 0;  // cell side
  int64_t blocks = 0;
  static constexpr float kMargin = 34;    // room for labels and strips, left and top
  static constexpr float kStrip = 8;      // thickness of a per-block result strip
  static constexpr float kHighlight = 3;  // thickness of the current-step outline
  static constexpr float kGap = 1;        // between cells

  Rect cell_rect(int64_t q_block, int64_t kv_block) const;
  // The current-step outline of a cell as four opaque bands (top, bottom, left, right).
  std::vector<Rect> highlight_bands(int64_t q_block, int64_t kv_block) const;
  Rect column_strip(int64_t kv_block) const;  // above the matrix: the key block's dK/dV result
  Rect row_strip(int64_t q_block) const;      // left of it: the query block's out/dq result
  // The cell under a point; false outside the matrix or in a gap.
  bool hit(Vec2 point, int64_t& q_block, int64_t& kv_block) const;
};
GridGeometry grid_geometry(const Rect& canvas, int64_t blocks);

// ---- bars and timeline -----------------------------------------------------------------------

// One bar per rank in a canvas, left to right; each bar's rect spans the full height available.
struct BarGeometry {
  Rect plot;  // below the title line, above the rank labels
  float bar_width = 0, pitch = 0;
  Rect slot(int64_t rank) const {
    return {plot.x0 + pitch * rank, plot.y0, plot.x0 + pitch * rank + bar_width, plot.y1};
  }
};
BarGeometry bar_geometry(const Rect& canvas, int64_t ranks);

// Visible time window of the timeline, and the zoom and pan that change it.
struct TimeWindow {
  double begin = 0, end = 1;  // seconds of model time

  void fit(double total);
  // Zooms by `factor` (> 1 zooms in) keeping `anchor` (a time) under the same screen x.
  void zoom(double anchor, double factor, double total);
  // Moves the window by `dt` seconds, clamped to [0, total] where the window fits.
  void pan(double dt, double total);
  float to_x(double time, const Rect& area) const;
  double to_time(float x, const Rect& area) const;
};

// Rows of the timeline: per rank a compute row and a communication row.
struct TimelineGeometry {
  Rect area;  // the time axis spans area.x0..x1
  float row_height = 0;
  static constexpr float kLabelWidth = 64;
  static constexpr float kAxisHeight = 18;
  Rect row(int64_t rank, int lane) const {  // a TimelineLane
    const float y = area.y0 + row_height * static_cast<float>(kTimelineLanes * rank + lane);
    return {area.x0, y, area.x1, y + row_height};
  }
};
TimelineGeometry timeline_geometry(const Rect& canvas, int64_t ranks);
// Where a span is drawn in its row: from its start to its end on the time axis `area` of
// `window` (a unit of gap after spans wide enough to keep it, so back-to-back spans stay apart),
// in its band — sends in the upper half of the communication row, waits in the lower half,
// everything else (and everything in the compute and exposed rows) across the row (one unit in
// from its edges).
Rect span_rect(const Span& span, const Rect& row, const TimeWindow& window, const Rect& area, int lane = kCommLane);

// ---- what a grid cell shows ------------------------------------------------------------------

// A piece of a computed cell, in fractions of the cell's square (0..1, y down): what the grid
// panel and the grid figure fill inside a cell cut by the causal mask. A diagonal piece is the
// triangle below its square's diagonal: (x0, y0), (x0, y1), (x1, y1).
// Under documents or a window a cell is drawn as sub-tiles (ScheduleModel::mask_tiles): visible,
// hidden, or shaded — the cell's colour mixed into the masked-out colour by the fraction seen.
enum class CellPartKind : uint8_t { visible, diagonal, hidden, shaded };
struct CellPart {
  CellPartKind kind = CellPartKind::visible;
  float x0 = 0, y0 = 0, x1 = 1, y1 = 1;
  int64_t q_unit = -1, k_unit = -1;  // layout units (global order) when drawn per unit
  double visible = 1;                // shaded: the fraction of its pairs the mask shows
  // The piece inside a cell drawn at `cell`.
  Rect in(const Rect& cell) const {
    return {cell.x0 + x0 * cell.width(), cell.y0 + y0 * cell.height(), cell.x0 + x1 * cell.width(),
            cell.y0 + y1 * cell.height()};
  }
};
// Tokens coloured by document: for every block, its row strip (left of the matrix) and column
// strip (above it) cut into one piece per run of its tokens in one document (block_documents), in
// proportion to the run's tokens. Empty when the model has no documents.
struct DocumentStrip {
  Rect rect;
  int64_t document = 0;
  Rgba colour;  // category_colour(document)
};
std::vector<DocumentStrip> document_strips(const ScheduleModel& model, const GridGeometry& g);

// The pieces of a cell, empty when it is drawn as one flat square (not cut by the mask, skipped,
// or computed although fully masked). Under documents or a window (a general mask): its true
// shape in 8 x 8 sub-tiles (mask_tiles). Else per layout unit when the model knows the units and
// both blocks have at most 8 (ScheduleModel::unit_pattern), else by the block's shape.
std::vector<CellPart> cell_parts(const ScheduleModel& model, const GridCell& cell);
// The colour a part is filled with, for a cell of `colour`.
Rgba part_colour(const CellPart& part, Rgba colour);

}  // namespace ringlab::viz
