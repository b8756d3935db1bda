// The load figure: the viewer's load panel in its busy / blocked mode (viz/view/panel_load.cpp)
// on a white page — per rank, busy time (computing) under blocked time (waiting for messages and
// collectives), the mean of their sum dashed, the largest drawn across; laid out by bar_geometry.
#include <algorithm>
#include <cstdio>
#include <string>

#include "reference/printf_text.hpp"
#include "viz/figures/book_figures.hpp"
#include "viz/model/geometry.hpp"

namespace ringlab::viz {

namespace {

constexpr double kPlotLeft = 70, kPlotTop = 60;  // the plot's corner: room for the title and the ms axis
constexpr double kPlotHeight = 320;

// The ms axis: round ticks from 0 to `top_ms`, grid lines across the plot.
void draw_time_axis(Figure& figure, const Rect& plot, double top_ms) {
  const double step_ms = nice_step(top_ms);
  for (int tick = 0; static_cast<double>(tick) * step_ms <= top_ms * 1.0001; ++tick) {
    const double t = static_cast<double>(tick) * step_ms;
    const double y = plot.y1 - plot.height() * (t / top_ms);
    add_rule(figure, kPlotLeft - 4, y, plot.x1, y + 0.5);
    figure.texts.push_back({kPlotLeft - 8, y + 4, printf_text("%g", t), 9, "end", palette::paper::text_dim});
  }
  figure.texts.push_back({14, kPlotTop - 10, "ms", 10, "start", palette::paper::text_dim});
}

void draw_dashed(Figure& figure, double x0, double x1, double y, Rgba colour, const std::string& css_class) {
  for (int dash = 0; x0 + 8.0 * dash < x1; ++dash) {
    const double x = x0 + 8.0 * dash;
    figure.lines.push_back({x, y, std::min(x + 4, x1), y, colour, 1, css_class});
  }
}

}  // namespace

Figure load_figure(const ScheduleModel& model) {
  const LoadSummary& load = model.load;
  const auto P = static_cast<int64_t>(load.ranks.size());
  check_figure_size(FigureKind::load, model.ring, P);
  const double pitch = std::clamp(std::floor(640.0 / static_cast<double>(std::max<int64_t>(1, P))), 3.0, 48.0);
  // The canvas bar_geometry lays the bars into, placed so its plot starts at (kPlotLeft, kPlotTop).
  const Rect canvas{static_cast<float>(kPlotLeft - 8), static_cast<float>(kPlotTop - 22),
                    static_cast<float>(kPlotLeft + pitch * static_cast<double>(P) + 8),
                    static_cast<float>(kPlotTop + kPlotHeight + 18)};
  const BarGeometry g = bar_geometry(canvas, P);

  Figure figure;
  figure.title = "per-rank time: " + model.title;
  figure.texts.push_back({kPlotLeft, 22, figure.title, 13});
  figure.texts.push_back({kPlotLeft, 40,
                          printf_text("max/mean: FLOPs %.2f", load.flops_imbalance()) +
                              printf_text(", busy time %.2f", load.busy_imbalance()),
                          10, "start", palette::paper::text_dim});
  double top = 0, mean = 0;
  for (const RankLoad& r : load.ranks) top = std::max(top, r.busy + r.blocked), mean += r.busy + r.blocked;
  mean /= static_cast<double>(std::max<int64_t>(1, P));
  top = std::max(top, 1e-12);
  draw_time_axis(figure, g.plot, top * 1e3);
  auto y_of = [&](double seconds) { return g.plot.y1 - g.plot.height() * (seconds / top); };

  for (int64_t i = 0; i < P; ++i) {
    const RankLoad& r = load.ranks[static_cast<size_t>(i)];
    const Rect slot = g.slot(i);
    const std::string rank = std::to_string(i), flops = printf_text("%.6g", r.flops);
    const std::string busy_ms = printf_text("%.6g", r.busy * 1e3), blocked_ms = printf_text("%.6g", r.blocked * 1e3);
    figure.rects.push_back({slot.x0,
                            y_of(r.busy),
                            slot.width(),
                            g.plot.y1 - y_of(r.busy),
                            palette::busy_bar,
                            false,
                            "bar busy",
                            {{"rank", rank}, {"ms", busy_ms}, {"flops", flops}},
                            "rank " + rank + " busy " + busy_ms + " ms, " + flops + " FLOP"});
    figure.rects.push_back({slot.x0,
                            y_of(r.busy + r.blocked),
                            slot.width(),
                            y_of(r.busy) - y_of(r.busy + r.blocked),
                            palette::blocked_bar,
                            false,
                            "bar blocked",
                            {{"rank", rank}, {"ms", blocked_ms}},
                            "rank " + rank + " blocked " + blocked_ms + " ms"});
    if (P <= 32 || i % std::max<int64_t>(1, P / 16) == 0) {
      figure.texts.push_back({slot.centre().x, g.plot.y1 + 14, rank, 9, "middle", palette::paper::text_dim});
    }
  }
  figure.texts.push_back({(g.plot.x0 + g.plot.x1) / 2, g.plot.y1 + 32, "rank", 11, "middle"});
  // The mean of busy + blocked, dashed, and the largest, as the viewer marks them.
  draw_dashed(figure, g.plot.x0, g.plot.x1, y_of(mean), palette::paper::text, "mean");
  figure.lines.push_back({g.plot.x0, y_of(top), g.plot.x1, y_of(top), palette::highlight, 1, "max"});
  figure.texts.push_back({g.plot.x1 + 4, y_of(mean) + 4, "mean", 9, "start", palette::paper::text});

  const double legend_x = g.plot.x1 + 44;
  double y = add_legend_item(figure, legend_x, kPlotTop, palette::busy_bar, "busy: computing");
  y = add_legend_item(figure, legend_x, y, palette::blocked_bar, "blocked: waiting for messages, collectives");
  figure.width = legend_x + 160;
  figure.height = std::max(static_cast<double>(g.plot.y1) + 50, y + 20);
  fit_canvas_to_text(figure);
  return figure;
}

}  // namespace ringlab::viz
