#include <algorithm>
#include <cstdio>

#include "viz/view/draw_util.hpp"
#include "viz/view/panels.hpp"

namespace ringlab::viz {

namespace {

void dashed_line(ImDrawList* list, float x0, float x1, float y, Rgba colour) {
  for (int dash = 0; x0 + 8.0f * float(dash) < x1; ++dash) {
    const float x = x0 + 8.0f * float(dash);
    list->AddLine({x, y}, {std::min(x + 4, x1), y}, to_imgui(colour), 1);
  }
}

}  // namespace

void draw_load_panel(const ScheduleModel& model, const Playback& playback, ViewState& view) {
  const LoadSummary& load = model.load;
  const int64_t step = std::clamp<int64_t>(playback.step(), 0, std::max<int64_t>(0, model.step_count() - 1));
  help_marker(Panel::load);
  ImGui::SameLine();
  if (ImGui::RadioButton("FLOPs", !view.load_shows_time)) view.load_shows_time = false;
  ImGui::SameLine();
  if (ImGui::RadioButton("busy/blocked", view.load_shows_time)) view.load_shows_time = true;
  ImGui::TextWrapped("max/mean: FLOPs %.2f, busy %.2f (%s)", load.flops_imbalance(), load.busy_imbalance(),
                     time_source(model.timeline).c_str());
  if (!load.layouts.empty()) {
    // The chosen layout against the others, same problem: one item per layout, flowing onto as
    // many lines as the panel needs (the dashboard's load panel is ~345 px wide at 1600 x 1000).
    ImGui::TextUnformatted("FLOPs max/mean by layout:");
    for (const LayoutBalance& b : load.layouts) {
      char text[96];
      if (b.applies)
        std::snprintf(text, sizeof text, "%s%s %.2f", b.chosen ? "> " : "", b.layout.c_str(), b.imbalance);
      else
        std::snprintf(text, sizeof text, "%s n/a", b.layout.c_str());
      flow_same_line(ImGui::CalcTextSize(text).x);
      if (!b.applies) {
        ImGui::TextDisabled("%s", text);
        if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s", b.why.c_str());
        continue;
      }
      ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(to_imgui(b.chosen ? palette::highlight : palette::text)), "%s",
                         text);
    }
  }

  const Rect canvas = begin_canvas(view, Panel::load, "##load");
  const bool hovered = ImGui::IsItemHovered();
  ImDrawList* list = ImGui::GetWindowDrawList();
  list->PushClipRect({canvas.x0, canvas.y0}, {canvas.x1, canvas.y1}, true);
  const BarGeometry g = bar_geometry(canvas, model.ranks);
  // The caption, shortened where the panel is too narrow for it (the book's 1200-pixel overview).
  const char* caption = view.load_shows_time ? "busy (green) and blocked (red) seconds per rank"
                                             : "FLOPs per rank: done by this step / total";
  if (ImGui::CalcTextSize(caption).x > g.plot.width())
    caption = view.load_shows_time ? "busy (green), blocked (red)" : "FLOPs: done / total";
  text_at(list, {g.plot.x0, canvas.y0 + 3}, palette::text_dim, caption);

  double top = 0;
  for (const RankLoad& r : load.ranks) top = std::max(top, view.load_shows_time ? r.busy + r.blocked : r.flops);
  const float height = g.plot.height();
  auto y_of = [&](double value) { return g.plot.y1 - static_cast<float>(top > 0 ? value / top : 0) * height; };
  for (size_t i = 0; i < load.ranks.size(); ++i) {
    const RankLoad& r = load.ranks[i];
    const Rect slot = g.slot(static_cast<int64_t>(i));
    if (view.load_shows_time) {
      fill(list, {slot.x0, y_of(r.busy), slot.x1, slot.y1}, palette::busy_bar);
      fill(list, {slot.x0, y_of(r.busy + r.blocked), slot.x1, y_of(r.busy)}, palette::blocked_bar);
    } else {
      const double done =
          step < static_cast<int64_t>(r.flops_until.size()) ? r.flops_until[static_cast<size_t>(step)] : r.flops;
      fill(list, {slot.x0, y_of(r.flops), slot.x1, slot.y1}, dimmed(palette::flops_bar, 0.45f));
      fill(list, {slot.x0, y_of(done), slot.x1, slot.y1}, palette::flops_bar);
    }
    if (g.pitch >= 14) text_at(list, {slot.x0, g.plot.y1 + 2}, palette::text_dim, std::to_string(i));
  }
  const double mean = view.load_shows_time ? load.busy_mean : load.flops_mean;
  if (top > 0) {
    double mean_total = mean;
    if (view.load_shows_time) {
      mean_total = 0;
      for (const RankLoad& r : load.ranks) mean_total += r.busy + r.blocked;
      mean_total /= static_cast<double>(std::max<size_t>(1, load.ranks.size()));
    }
    dashed_line(list, g.plot.x0, g.plot.x1, y_of(mean_total), palette::text);
    list->AddLine({g.plot.x0, y_of(top)}, {g.plot.x1, y_of(top)}, to_imgui(palette::highlight), 1);
    text_at(list, {g.plot.x1 - 34, y_of(mean_total) + 2}, palette::text, "mean");
  }
  list->PopClipRect();

  view.bar_hover = -1;
  if (hovered) {
    const Vec2 mouse = from_imgui(ImGui::GetIO().MousePos);
    for (size_t i = 0; i < load.ranks.size(); ++i) {
      const Rect slot = g.slot(static_cast<int64_t>(i));
      if (mouse.x < slot.x0 || mouse.x >= slot.x1) continue;
      const RankLoad& r = load.ranks[i];
      view.bar_hover = static_cast<int64_t>(i);
      ImGui::BeginTooltip();
      ImGui::Text("rank %zu", i);
      ImGui::Text("%.4g FLOP (%.2fx the mean)", r.flops, load.flops_mean > 0 ? r.flops / load.flops_mean : 1.0);
      ImGui::Text("busy %.3g s, blocked %.3g s", r.busy, r.blocked);
      ImGui::TextUnformatted(load_blocks_text(r).c_str());
      ImGui::EndTooltip();
    }
  }
}

}  // namespace ringlab::viz
