// The precision figure: error against P on log-log axes — one line per series (a tensor and an
// accumulator), each point a rank count's RMS error as a multiple of the same series' P = 1 error.
// Drawn from plain numbers (ErrorSeries), so the study that measures them stays out of viz/.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "viz/figures/book_figures.hpp"

namespace ringlab::viz {

namespace {

constexpr double kLeft = 70, kTop = 60, kWidth = 420, kHeight = 300;

std::string format_number(const char* pattern, double value) {
  char text[48];
  std::snprintf(text, sizeof text, pattern, value);
  return text;
}

}  // namespace

Figure precision_figure(const std::string& title, const std::vector<ErrorSeries>& series) {
  int64_t max_ranks = 2;
  double top = 2;
  for (const ErrorSeries& s : series)
    for (const auto& [ranks, ratio] : s.points) max_ranks = std::max(max_ranks, ranks), top = std::max(top, ratio);
  const double x_span = std::log2(static_cast<double>(max_ranks));
  const double y_top = std::ceil(top);  // linear ratio axis from 1 up
  auto x_of = [&](int64_t ranks) { return kLeft + kWidth * std::log2(static_cast<double>(ranks)) / x_span; };
  auto y_of = [&](double ratio) { return kTop + kHeight * (1 - (ratio - 1) / std::max(1e-9, y_top - 1)); };

  Figure figure;
  figure.title = title;
  figure.texts.push_back({kLeft, 22, title, 13});
  figure.texts.push_back({kLeft, 40, "RMS error against float64, as a multiple of the same run's on one rank", 10,
                          "start", palette::paper::text_dim});
  const double step = nice_step(y_top - 1);
  for (int tick = 0; 1 + tick * step <= y_top + 1e-9; ++tick) {
    const double r = 1 + tick * step;
    add_rule(figure, kLeft - 4, y_of(r), kLeft + kWidth, y_of(r) + 0.5);
    figure.texts.push_back({kLeft - 8, y_of(r) + 4, format_number("%gx", r), 9, "end", palette::paper::text_dim});
  }
  for (int64_t p = 1; p <= max_ranks; p *= 2) {
    add_rule(figure, x_of(p), kTop, x_of(p) + 0.5, kTop + kHeight + 4);
    figure.texts.push_back({x_of(p), kTop + kHeight + 16, std::to_string(p), 9, "middle", palette::paper::text_dim});
  }
  figure.texts.push_back({kLeft + kWidth / 2, kTop + kHeight + 34, "ranks P", 11, "middle"});

  double legend_y = kTop;
  for (const ErrorSeries& s : series) {
    for (size_t i = 0; i < s.points.size(); ++i) {
      const double x = x_of(s.points[i].first), y = y_of(s.points[i].second);
      figure.rects.push_back({x - 3,
                              y - 3,
                              6,
                              6,
                              s.colour,
                              false,
                              "point",
                              {{"series", s.label},
                               {"ranks", std::to_string(s.points[i].first)},
                               {"ratio", format_number("%.4g", s.points[i].second)}},
                              s.label + format_number(", %.3gx", s.points[i].second)});
      if (i == 0) continue;
      const double x0 = x_of(s.points[i - 1].first), y0 = y_of(s.points[i - 1].second);
      if (!s.dashed) {
        figure.lines.push_back({x0, y0, x, y, s.colour, s.width, "series"});
        continue;
      }
      for (int dash = 0; dash < 24; dash += 2) {  // 12 dashes per segment
        const double a = dash / 24.0, b = (dash + 1) / 24.0;
        figure.lines.push_back({x0 + (x - x0) * a, y0 + (y - y0) * a, x0 + (x - x0) * b, y0 + (y - y0) * b, s.colour,
                                s.width, "series dashed"});
      }
    }
    legend_y = add_legend_item(figure, kLeft + kWidth + 30, legend_y, s.colour, s.label);
  }
  figure.width = kLeft + kWidth + 220;
  figure.height = std::max(kTop + kHeight + 50, legend_y + 20);
  fit_canvas_to_text(figure);
  return figure;
}

}  // namespace ringlab::viz
