#include "viz/model/geometry.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace ringlab::viz {

namespace {

constexpr float kPi = std::numbers::pi_v<float>;

float node_angle(int64_t rank, int64_t ring, int64_t ulysses) {
  const int64_t U = std::max<int64_t>(1, ulysses), R = std::max<int64_t>(1, ring);
  const int64_t g = rank / U, u = rank % U;
  // With one ring position (pure Ulysses) the group fills the circle; otherwise a group takes
  // half of its position's slot, members side by side.
  const float spread = R == 1 ? 1.0f : 0.5f;
  const float offset =
      U == 1 ? 0.0f
             : (R == 1 ? static_cast<float>(u) / static_cast<float>(U)
                       : spread * (static_cast<float>(u) - 0.5f * static_cast<float>(U - 1)) / static_cast<float>(U));
  return -kPi / 2 + 2 * kPi * (static_cast<float>(g) + offset) / static_cast<float>(R);
}

float floor_px(float v) { return std::floor(v); }

}  // namespace

// ---- ring ------------------------------------------------------------------------------------

Vec2 ring_node(int64_t rank, int64_t ring, int64_t ulysses) {
  const float a = node_angle(rank, ring, ulysses);
  return {std::cos(a), std::sin(a)};
}

Vec2 ring_arc_point(int64_t from, int64_t to, float progress, int64_t ring, int64_t ulysses, float lift) {
  const float a = node_angle(from, ring, ulysses), b = node_angle(to, ring, ulysses);
  float d = std::remainder(b - a, 2 * kPi);  // the shorter way round, in (-pi, pi]
  const float t = std::clamp(progress, 0.0f, 1.0f);
  const float angle = a + d * t;
  // Bulge outwards in the middle of the trip so a moving block is not hidden by the nodes.
  const float radius = 1.0f + lift * std::sin(kPi * t) + lift * 0.25f;
  return {radius * std::cos(angle), radius * std::sin(angle)};
}

RingGeometry ring_geometry(const Rect& canvas, int64_t ranks) {
  RingGeometry g;
  g.centre = {floor_px(canvas.centre().x), floor_px(canvas.centre().y)};
  g.radius = floor_px(0.34f * std::min(canvas.width(), canvas.height()));
  const float per_node = 2 * kPi * g.radius / static_cast<float>(std::max<int64_t>(1, ranks));
  g.node_radius = floor_px(std::clamp(0.32f * per_node, 5.0f, 24.0f));
  return g;
}

// ---- block grid ------------------------------------------------------------------------------

GridGeometry grid_geometry(const Rect& canvas, int64_t blocks) {
  GridGeometry g;
  g.blocks = std::max<int64_t>(1, blocks);
  const float pad = 8;
  const float available =
      std::min(canvas.width() - GridGeometry::kMargin - pad, canvas.height() - GridGeometry::kMargin - pad);
  // Whole pixels while a cell has two or more; below that the cells shrink to fit (the GPU fills
  // each pixel from the cell over its centre): a 2-pixel floor cut off ~100 rows and columns of
  // a 300-block grid, silently.
  const float fit = std::max(0.0f, available) / static_cast<float>(g.blocks);
  g.cell = fit >= 2 ? floor_px(fit) : fit;
  const float x0 = floor_px(canvas.x0 + GridGeometry::kMargin), y0 = floor_px(canvas.y0 + GridGeometry::kMargin);
  g.matrix = {x0, y0, x0 + g.cell * static_cast<float>(g.blocks), y0 + g.cell * static_cast<float>(g.blocks)};
  return g;
}

Rect GridGeometry::cell_rect(int64_t q_block, int64_t kv_block) const {
  const float x = matrix.x0 + cell * static_cast<float>(kv_block), y = matrix.y0 + cell * static_cast<float>(q_block);
  const float gap = cell >= 6 ? kGap : 0;
  return {x, y, x + cell - gap, y + cell - gap};
}

std::vector<Rect> GridGeometry::highlight_bands(int64_t q_block, int64_t kv_block) const {
  const Rect c = cell_rect(q_block, kv_block);
  const float h = std::min(kHighlight, c.width() / 3);
  return {{c.x0, c.y0, c.x1, c.y0 + h},
          {c.x0, c.y1 - h, c.x1, c.y1},
          {c.x0, c.y0 + h, c.x0 + h, c.y1 - h},
          {c.x1 - h, c.y0 + h, c.x1, c.y1 - h}};
}

Rect GridGeometry::column_strip(int64_t kv_block) const {
  const Rect c = cell_rect(0, kv_block);
  return {c.x0, matrix.y0 - kStrip - 3, c.x1, matrix.y0 - 3};
}

Rect GridGeometry::row_strip(int64_t q_block) const {
  const Rect c = cell_rect(q_block, 0);
  return {matrix.x0 - kStrip - 3, c.y0, matrix.x0 - 3, c.y1};
}

bool GridGeometry::hit(Vec2 point, int64_t& q_block, int64_t& kv_block) const {
  if (!matrix.contains(point)) return false;
  kv_block = std::min<int64_t>(blocks - 1, static_cast<int64_t>((point.x - matrix.x0) / cell));
  q_block = std::min<int64_t>(blocks - 1, static_cast<int64_t>((point.y - matrix.y0) / cell));
  return cell_rect(q_block, kv_block).contains(point);
}

// ---- bars and timeline -----------------------------------------------------------------------

BarGeometry bar_geometry(const Rect& canvas, int64_t ranks) {
  BarGeometry g;
  g.plot = {floor_px(canvas.x0 + 8), floor_px(canvas.y0 + 22), floor_px(canvas.x1 - 8), floor_px(canvas.y1 - 18)};
  g.pitch = g.plot.width() / static_cast<float>(std::max<int64_t>(1, ranks));
  g.bar_width = std::max(1.0f, floor_px(g.pitch * 0.72f));
  return g;
}

void TimeWindow::fit(double total) {
  begin = 0;
  end = total > 0 ? total : 1e-6;
}

void TimeWindow::zoom(double anchor, double factor, double total) {
  if (!(factor > 0) || !(total > 0)) return;
  const double width = std::clamp((end - begin) / factor, total * 1e-5, total);
  const double fraction = end > begin ? (anchor - begin) / (end - begin) : 0.5;
  begin = anchor - fraction * width;
  end = begin + width;
  pan(0, total);
}

void TimeWindow::pan(double dt, double total) {
  const double width = end - begin;
  begin = std::clamp(begin + dt, 0.0, std::max(0.0, total - width));
  end = begin + width;
}

float TimeWindow::to_x(double time, const Rect& area) const {
  const double span = end > begin ? end - begin : 1;
  return area.x0 + static_cast<float>((time - begin) / span * area.width());
}

double TimeWindow::to_time(float x, const Rect& area) const {
  const double span = end > begin ? end - begin : 1;
  return begin + (x - area.x0) / std::max(1.0f, area.width()) * span;
}

TimelineGeometry timeline_geometry(const Rect& canvas, int64_t ranks) {
  TimelineGeometry g;
  g.area = {floor_px(canvas.x0 + TimelineGeometry::kLabelWidth), floor_px(canvas.y0 + TimelineGeometry::kAxisHeight),
            floor_px(canvas.x1 - 6), floor_px(canvas.y1 - 4)};
  const float rows = static_cast<float>(kTimelineLanes * std::max<int64_t>(1, ranks));
  g.row_height = std::clamp(floor_px(g.area.height() / rows), 3.0f, 22.0f);
  return g;
}

Rect span_rect(const Span& span, const Rect& row, const TimeWindow& window, const Rect& area, int lane) {
  const float x0 = window.to_x(span.start, area), right = window.to_x(span.end, area);
  const float x1 = right - x0 >= 4 ? right - 1 : std::max(x0 + 1, right);
  const float mid = std::floor((row.y0 + row.y1) / 2);
  if (lane == kCommLane && span.kind == SpanKind::send) return {x0, row.y0 + 1, x1, mid};
  if (lane == kCommLane && span.kind == SpanKind::wait) return {x0, mid, x1, row.y1 - 1};
  return {x0, row.y0 + 1, x1, row.y1 - 1};
}

// ---- what a grid cell shows ------------------------------------------------------------------

std::vector<CellPart> cell_parts(const ScheduleModel& model, const GridCell& cell) {
  if (model.mask.general() && cell.computed() && cell.shape != BlockShape::full && cell.shape != BlockShape::masked &&
      cell.shape != BlockShape::erratum) {
    std::vector<CellPart> tiles;
    const std::vector<ScheduleModel::SubTile> shape = model.mask_tiles(cell.q_block, cell.kv_block);
    int64_t rows = 0, cols = 0;
    for (const ScheduleModel::SubTile& t : shape) rows = std::max(rows, t.row + 1), cols = std::max(cols, t.col + 1);
    for (const ScheduleModel::SubTile& t : shape) {
      const CellPartKind kind = t.visible >= 1   ? CellPartKind::visible
                                : t.visible <= 0 ? CellPartKind::hidden
                                                 : CellPartKind::shaded;
      CellPart part{kind, static_cast<float>(t.col) / static_cast<float>(cols),
                    static_cast<float>(t.row) / static_cast<float>(rows),
                    static_cast<float>(t.col + 1) / static_cast<float>(cols),
                    static_cast<float>(t.row + 1) / static_cast<float>(rows)};
      part.visible = t.visible;
      tiles.push_back(part);
    }
    if (!tiles.empty()) return tiles;
  }
  const bool partial = cell.computed() && (cell.shape == BlockShape::diagonal || cell.shape == BlockShape::q_half ||
                                           cell.shape == BlockShape::kv_half);
  if (!partial) return {};
  std::vector<CellPart> parts;
  const UnitPattern pattern = model.unit_pattern(cell.q_block, cell.kv_block);
  if (pattern.rows > 0) {
    const std::vector<int64_t>& q_units = model.block_units[static_cast<size_t>(cell.q_block)];
    const std::vector<int64_t>& k_units = model.block_units[static_cast<size_t>(cell.kv_block)];
    const auto rows = static_cast<float>(pattern.rows), cols = static_cast<float>(pattern.cols);
    for (int64_t i = 0; i < pattern.rows; ++i)
      for (int64_t j = 0; j < pattern.cols; ++j) {
        const UnitVisibility seen = pattern.at(i, j);
        const CellPartKind kind = seen == UnitVisibility::full       ? CellPartKind::visible
                                  : seen == UnitVisibility::diagonal ? CellPartKind::diagonal
                                                                     : CellPartKind::hidden;
        parts.push_back({kind, static_cast<float>(j) / cols, static_cast<float>(i) / rows,
                         static_cast<float>(j + 1) / cols, static_cast<float>(i + 1) / rows,
                         q_units[static_cast<size_t>(i)], k_units[static_cast<size_t>(j)]});
      }
    return parts;
  }
  switch (cell.shape) {
    case BlockShape::q_half: parts.push_back({CellPartKind::visible, 0, 0.5f, 1, 1}); break;   // the late query half
    case BlockShape::kv_half: parts.push_back({CellPartKind::visible, 0, 0, 0.5f, 1}); break;  // the early key half
    default: parts.push_back({CellPartKind::diagonal, 0, 0, 1, 1}); break;
  }
  return parts;
}

std::vector<DocumentStrip> document_strips(const ScheduleModel& model, const GridGeometry& g) {
  std::vector<DocumentStrip> strips;
  if (!model.mask.has_documents()) return strips;
  for (int64_t b = 0; b < g.blocks; ++b) {
    const std::vector<ScheduleModel::DocumentRun> runs = model.block_documents(b);
    int64_t total = 0;
    for (const ScheduleModel::DocumentRun& run : runs) total += run.tokens;
    if (total == 0) continue;
    const Rect row = g.row_strip(b), column = g.column_strip(b);
    int64_t before = 0;
    for (const ScheduleModel::DocumentRun& run : runs) {
      const float a = static_cast<float>(before) / static_cast<float>(total);
      const float z = static_cast<float>(before + run.tokens) / static_cast<float>(total);
      const Rgba colour = category_colour(run.document);
      strips.push_back({{row.x0, row.y0 + a * row.height(), row.x1, row.y0 + z * row.height()}, run.document, colour});
      strips.push_back({{column.x0 + a * column.width(), column.y0, column.x0 + z * column.width(), column.y1},
                        run.document,
                        colour});
      before += run.tokens;
    }
  }
  return strips;
}

Rgba part_colour(const CellPart& part, Rgba colour) {
  switch (part.kind) {
    case CellPartKind::hidden: return palette::masked_out;
    case CellPartKind::shaded:  // at least a third of the way, so a sliver that is seen shows
      return mix(palette::masked_out, colour, static_cast<float>(0.35 + 0.65 * part.visible));
    case CellPartKind::visible:
    case CellPartKind::diagonal: break;
  }
  return colour;
}

}  // namespace ringlab::viz
