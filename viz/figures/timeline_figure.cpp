// The timeline figure: the viewer's timeline panel (viz/view/panel_timeline.cpp) on a white page,
// fitted to the whole run — per rank a compute row, a communication row and an exposed-communication
// row (labelled), laid out by timeline_geometry, spans in span_colour, with the model's legend.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>
#include <stdexcept>
#include <string>

#include "viz/figures/book_figures.hpp"
#include "viz/model/geometry.hpp"

namespace ringlab::viz {

namespace {

constexpr double kRowsLeft = 70, kRowsTop = 40;  // the rows' corner: room for the title
constexpr double kRowHeight = 14;
constexpr double kPlotWidth = 900;
constexpr int64_t kLegendBlocks = 16;

const char* span_kind_name(SpanKind kind) {
  switch (kind) {
    case SpanKind::compute: return "compute";
    case SpanKind::send: return "send";
    case SpanKind::wait: return "wait";
    case SpanKind::collective: return "collective";
    case SpanKind::other: break;
  }
  return "other";
}

void draw_span(Figure& figure, const TimelineRow& row, const Span& span, const Rect& r) {
  char tip[64];
  std::snprintf(tip, sizeof tip, ": %.3f-%.3f ms", span.start * 1e3, span.end * 1e3);
  figure.rects.push_back({r.x0,
                          r.y0,
                          r.width(),
                          r.height(),
                          span_colour(span.kind, span.block),
                          false,
                          std::string(row.lane == kExposedLane ? "exposed " : "event ") + span_kind_name(span.kind),
                          {{"rank", std::to_string(row.rank)},
                           {"step", std::to_string(span.step)},
                           {"block", std::to_string(span.block)},
                           {"name", span.label}},
                          "rank " + std::to_string(row.rank) + " " + span.label + tip});
}

// The time axis under the rows: round ticks in ms.
void draw_time_axis(Figure& figure, const Rect& area, const TimeWindow& window, double rows_bottom) {
  const double end_ms = window.end * 1e3, step_ms = nice_step(end_ms);
  for (int tick = 0; static_cast<double>(tick) * step_ms <= end_ms * 1.0001; ++tick) {
    const double t = static_cast<double>(tick) * step_ms;
    const double x = window.to_x(t * 1e-3, area);
    add_rule(figure, x, area.y0 - 4, x + 0.5, rows_bottom);
    char label[32];
    std::snprintf(label, sizeof label, "%g", t);
    figure.texts.push_back({x, rows_bottom + 14, label, 9, "middle", palette::paper::text_dim});
  }
  figure.texts.push_back({(area.x0 + area.x1) / 2, rows_bottom + 32,
                          "ms (per rank: compute, communication and exposed communication)", 11, "middle"});
}

// Under the axis: the K/V blocks' colours of the compute spans, then the communication kinds.
void draw_legend(Figure& figure, const ScheduleModel& model, double y) {
  std::set<int64_t> blocks;
  std::set<SpanKind> kinds;
  for (const TimelineRow& row : model.timeline.rows)
    for (const Span& span : row.spans) {
      kinds.insert(span.kind);
      if (span.kind == SpanKind::compute && span.block >= 0) blocks.insert(span.block);
    }
  double x = kRowsLeft;
  figure.texts.push_back({x, y + 11, "compute, by K/V block:", 10});
  x = text_box(figure.texts.back()).x1 + 8;
  int64_t shown = 0;
  for (int64_t block : blocks) {
    if (shown++ == kLegendBlocks) {
      figure.texts.push_back({x, y + 11, "...", 10});
      break;
    }
    figure.rects.push_back(
        {x, y, 12, 12, category_colour(block), true, "legend", {{"block", std::to_string(block)}}, ""});
    figure.texts.push_back({x + 16, y + 10, std::to_string(block), 10});
    x += 36;
  }
  // The communication and exposed lanes' entries, one per line.
  for (const LegendEntry& entry : timeline_legend(model)) {
    if (entry.kind == SpanKind::compute) continue;
    y += 18;
    figure.rects.push_back({kRowsLeft, y, 12, 12, span_colour(entry.kind, entry.block), true, "legend", {}, ""});
    figure.texts.push_back({kRowsLeft + 16, y + 10, entry.label, 10});
  }
  if (kinds.count(SpanKind::other)) {
    y += 18;
    figure.rects.push_back({kRowsLeft, y, 12, 12, span_colour(SpanKind::other, -1), true, "legend", {}, ""});
    figure.texts.push_back({kRowsLeft + 16, y + 10, "other", 10});
  }
}

// How far below `y` the legend reaches.
double legend_height(const ScheduleModel& model) {
  double height = 20;
  for (const LegendEntry& entry : timeline_legend(model)) height += entry.kind == SpanKind::compute ? 0 : 18;
  return height + 18;
}

}  // namespace

Figure timeline_figure(const ScheduleModel& model) {
  check_figure_size(FigureKind::timeline, model.ring, model.ranks);
  bool any_span = false;
  for (const TimelineRow& row : model.timeline.rows) any_span |= !row.spans.empty();
  if (!any_span) throw std::logic_error("timeline_figure needs a model whose timeline has spans");
  const double rows_height = kRowHeight * kTimelineLanes * static_cast<double>(model.ranks);
  // The canvas timeline_geometry lays the rows into, placed so the rows start at (kRowsLeft, kRowsTop).
  const Rect canvas{static_cast<float>(kRowsLeft - TimelineGeometry::kLabelWidth),
                    static_cast<float>(kRowsTop - TimelineGeometry::kAxisHeight),
                    static_cast<float>(kRowsLeft + kPlotWidth + 6), static_cast<float>(kRowsTop + rows_height + 4)};
  const TimelineGeometry g = timeline_geometry(canvas, model.ranks);
  TimeWindow window;
  window.fit(model.timeline.end);

  Figure figure;
  figure.title = "simulated timeline: " + model.title;
  figure.texts.push_back({kRowsLeft, 22, figure.title, 13});
  const double rows_bottom = g.row(model.ranks - 1, kTimelineLanes - 1).y1;
  for (int64_t r = 0; r < model.ranks; ++r) {
    const Rect compute = g.row(r, kComputeLane);
    figure.texts.push_back({kRowsLeft - 8, compute.y1 - 3, "rank " + std::to_string(r), 9, "end"});
    for (const int lane : {kCommLane, kExposedLane})
      figure.texts.push_back(
          {kRowsLeft - 8, g.row(r, lane).y1 - 4, timeline_lane_name(lane), 7, "end", palette::paper::text_dim});
    if (r > 0) add_rule(figure, kRowsLeft, compute.y0 - 0.25, kRowsLeft + kPlotWidth, compute.y0 + 0.25);
  }
  draw_time_axis(figure, g.area, window, rows_bottom);
  for (const TimelineRow& row : model.timeline.rows) {
    const Rect band = g.row(row.rank, row.lane);
    for (const Span& span : row.spans) draw_span(figure, row, span, span_rect(span, band, window, g.area, row.lane));
  }
  draw_legend(figure, model, rows_bottom + 44);
  figure.width = kRowsLeft + kPlotWidth + 40;
  figure.height = rows_bottom + 44 + legend_height(model);
  fit_canvas_to_text(figure);
  return figure;
}

}  // namespace ringlab::viz
