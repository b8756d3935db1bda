#include <algorithm>
#include <cmath>
#include <cstdio>

#include "viz/view/draw_util.hpp"
#include "viz/view/panels.hpp"

namespace ringlab::viz {

namespace {

std::string time_text(double seconds) {
  char text[32];
  const double a = std::fabs(seconds);
  if (a < 1e-3)
    std::snprintf(text, sizeof text, "%.1f us", seconds * 1e6);
  else if (a < 1)
    std::snprintf(text, sizeof text, "%.3f ms", seconds * 1e3);
  else
    std::snprintf(text, sizeof text, "%.3f s", seconds);
  return text;
}

void handle_zoom_and_pan(ViewState& view, const TimelineGeometry& g, double total, bool hovered, bool active) {
  const ImGuiIO& io = ImGui::GetIO();
  TimeWindow& w = view.time_window;
  const double width = w.end - w.begin;
  if (hovered && io.MouseWheel != 0) w.zoom(w.to_time(io.MousePos.x, g.area), std::pow(1.25, io.MouseWheel), total);
  if (hovered && io.MouseWheelH != 0) w.pan(-io.MouseWheelH * 0.1 * width, total);
  if (active && ImGui::IsMouseDragging(ImGuiMouseButton_Left, 0.0f)) {
    w.pan(-static_cast<double>(io.MouseDelta.x) / std::max(1.0f, g.area.width()) * width, total);
  }
  if (hovered && ImGui::IsMouseDoubleClicked(ImGuiMouseButton_Left)) w.fit(total);
}

// One line of swatches and labels: what each colour and lane means (timeline_legend).
void draw_legend(const ScheduleModel& model) {
  ImDrawList* list = ImGui::GetWindowDrawList();
  bool first = true;
  for (const LegendEntry& entry : timeline_legend(model)) {
    if (!first) ImGui::SameLine(0, 14);
    first = false;
    const ImVec2 at = ImGui::GetCursorScreenPos();
    const float side = ImGui::GetTextLineHeight() - 2;
    list->AddRectFilled({at.x, at.y + 1}, {at.x + side, at.y + 1 + side},
                        to_imgui(span_colour(entry.kind, entry.block)));
    ImGui::Dummy({side, side});
    ImGui::SameLine(0, 4);
    ImGui::TextUnformatted(entry.label.c_str());
  }
}

}  // namespace

void draw_timeline_panel(const ScheduleModel& model, const Playback& playback, ViewState& view) {
  const double total = model.timeline.end > 0 ? model.timeline.end : 1e-6;
  if (!view.time_window_fitted) {
    view.time_window.fit(total);
    view.time_window_fitted = true;
  }
  help_marker(Panel::timeline);
  ImGui::SameLine();
  if (ImGui::SmallButton("fit")) view.time_window.fit(total);
  ImGui::SameLine();
  ImGui::Text("%s, %s .. %s of %s  (wheel: zoom, drag: pan, double-click: fit)", time_source(model.timeline).c_str(),
              time_text(view.time_window.begin).c_str(), time_text(view.time_window.end).c_str(),
              time_text(total).c_str());
  if (!model.timeline.note.empty()) ImGui::TextDisabled("%s", model.timeline.note.c_str());
  draw_legend(model);

  const Rect canvas = begin_canvas(view, Panel::timeline, "##timeline");
  const bool hovered = ImGui::IsItemHovered(), active = ImGui::IsItemActive();
  const TimelineGeometry g = timeline_geometry(canvas, model.ranks);
  handle_zoom_and_pan(view, g, total, hovered, active);
  const TimeWindow& w = view.time_window;
  ImDrawList* list = ImGui::GetWindowDrawList();

  // Axis ticks and row labels.
  list->PushClipRect({canvas.x0, canvas.y0}, {canvas.x1, canvas.y1}, true);
  for (int i = 0; i <= 4; ++i) {
    const double t = w.begin + (w.end - w.begin) * i / 4;
    const float x = w.to_x(t, g.area);
    list->AddLine({x, g.area.y0 - 4}, {x, g.area.y1}, to_imgui(palette::grid_line), 1);
    text_at(list, {std::min(x + 2, g.area.x1 - 60), canvas.y0 + 2}, palette::text_dim, time_text(t));
  }
  for (int64_t r = 0; r < model.ranks && g.row_height >= 9; ++r) {
    const Rect compute = g.row(r, kComputeLane);
    text_at(list, {canvas.x0 + 4, compute.y0 + (g.row_height - 13) / 2}, palette::text, "r" + std::to_string(r));
    for (const int lane : {kCommLane, kExposedLane})
      text_at(list, {canvas.x0 + 14, g.row(r, lane).y0 + (g.row_height - 13) / 2}, palette::text_dim,
              timeline_lane_name(lane));
  }
  list->PopClipRect();

  // Spans.
  list->PushClipRect({g.area.x0, g.area.y0}, {g.area.x1, g.area.y1}, true);
  for (const TimelineRow& row : model.timeline.rows) {
    const Rect band = g.row(row.rank, row.lane);
    if (band.y0 > g.area.y1) break;
    for (const Span& span : row.spans) {
      if (span.end < w.begin || span.start > w.end) continue;
      fill(list, span_rect(span, band, w, g.area, row.lane), span_colour(span.kind, span.block));
    }
  }
  // The current step's time.
  const int64_t step = playback.step();
  if (step >= 0 && step < model.step_count()) {
    const StepView& s = model.steps[static_cast<size_t>(step)];
    const float x = w.to_x(s.start + (s.end - s.start) * playback.fraction(), g.area);
    list->AddLine({x, g.area.y0}, {x, g.area.y1}, to_imgui(palette::highlight), 2);
  }
  // The hover line, across every row, and what each row does at that time.
  view.timeline_hover = {};
  if (hovered) {
    const float x = ImGui::GetIO().MousePos.x;
    if (x >= g.area.x0 && x < g.area.x1) {
      list->AddLine({x, g.area.y0}, {x, g.area.y1}, to_imgui(palette::hover_line), 1);
      TimelineHover& h = view.timeline_hover;
      h.valid = true;
      h.time = w.to_time(x, g.area);
      for (const TimelineRow& row : model.timeline.rows)
        for (const Span& span : row.spans)
          if (span.start <= h.time && h.time < std::max(span.end, span.start + 1e-12)) {
            h.lines.push_back("rank " + std::to_string(row.rank) + " " + timeline_lane_name(row.lane) + ": " +
                              span.label + (span.step >= 0 ? " [step " + std::to_string(span.step) + "]" : ""));
          }
      ImGui::BeginTooltip();
      ImGui::TextUnformatted(time_text(h.time).c_str());
      for (size_t i = 0; i < h.lines.size() && i < 24; ++i) ImGui::TextUnformatted(h.lines[i].c_str());
      if (h.lines.size() > 24) ImGui::Text("... and %zu more", h.lines.size() - 24);
      ImGui::EndTooltip();
    }
  }
  list->PopClipRect();
}

}  // namespace ringlab::viz
