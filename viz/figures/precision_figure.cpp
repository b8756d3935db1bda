// The precision figure: error against P on a log2 P axis — one line per series (a tensor and an
// accumulator), each point a rank count's RMS error as a multiple of the same series' P = 1 error.
// Drawn from plain numbers (ErrorSeries), so the study that measures them stays out of viz/.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "reference/printf_text.hpp"
#include "viz/figures/book_figures.hpp"

namespace ringlab::viz {

namespace {

constexpr double kChartLeft = 70, kChartTop = 60, kChartWidth = 420, kChartHeight = 300;
constexpr double kLegendSample = 24;  // the length of a legend's sample line

// A legend entry that shows the series' line as drawn (solid, dashed or thin) with its point
// marker: the tensors share colours across accumulations, so a colour swatch alone would not say
// which line is which. Returns the next entry's y.
double add_series_legend_item(Figure& figure, double x, double y, const ErrorSeries& s) {
  const double mid = y + 7;
  const std::string css_class = s.dashed ? "legend dashed" : "legend";
  if (s.dashed) {
    for (int dash = 0; dash < 5; dash += 2)  // three dashes
      figure.lines.push_back(
          {x + kLegendSample * dash / 5, mid, x + kLegendSample * (dash + 1) / 5, mid, s.colour, s.width, css_class});
  } else {
    figure.lines.push_back({x, mid, x + kLegendSample, mid, s.colour, s.width, css_class});
  }
  figure.rects.push_back({x + kLegendSample / 2 - 3, mid - 3, 6, 6, s.colour, false, "legend", {}, ""});
  figure.texts.push_back({x + kLegendSample + 8, y + 11, s.label, 10, "start", palette::paper::text});
  return y + 18;
}

}  // namespace

Figure precision_figure(const std::string& title, const std::vector<ErrorSeries>& series) {
  int64_t max_ranks = 2;
  double low = 1, high = 2;  // the ratio axis spans 1x to 2x at least
  for (const ErrorSeries& s : series)
    for (const auto& [ranks, ratio] : s.points) {
      max_ranks = std::max(max_ranks, ranks);
      if (std::isfinite(ratio)) low = std::min(low, ratio), high = std::max(high, ratio);
    }
  // Up to a tick above the highest ratio, and down to the lowest: a P can err less than one rank
  // (fused accumulation sums in another order), and a point below the axis would sit on the P
  // labels, read as 1x. Below 1x the axis ends just under the lowest point, not at a tick, so
  // 0.97x does not stretch the axis down to 0.5x.
  const double step = nice_step(high - low);
  const auto last_tick = static_cast<int64_t>(std::ceil(high / step - 1e-9));
  const double y_high = last_tick * step;
  const double y_low = low < 1 ? std::max(0.0, low - 0.03 * (y_high - low)) : 1;  // no ratio is negative
  const auto first_tick = static_cast<int64_t>(std::ceil(y_low / step - 1e-9));
  const double x_span = std::log2(static_cast<double>(max_ranks));
  auto x_of = [&](int64_t ranks) { return kChartLeft + kChartWidth * std::log2(static_cast<double>(ranks)) / x_span; };
  auto y_of = [&](double ratio) { return kChartTop + kChartHeight * (y_high - ratio) / (y_high - y_low); };

  Figure figure;
  figure.title = title;
  figure.texts.push_back({kChartLeft, 22, title, 13});
  figure.texts.push_back({kChartLeft, 40, "RMS error against float64, as a multiple of the same run's on one rank", 10,
                          "start", palette::paper::text_dim});
  for (int64_t tick = first_tick; tick <= last_tick; ++tick) {
    const double r = tick * step;
    add_rule(figure, kChartLeft - 4, y_of(r), kChartLeft + kChartWidth, y_of(r) + 0.5);
    figure.texts.push_back({kChartLeft - 8, y_of(r) + 4, printf_text("%gx", r), 9, "end", palette::paper::text_dim});
  }
  for (int64_t p = 1; p <= max_ranks; p *= 2) {
    add_rule(figure, x_of(p), kChartTop, x_of(p) + 0.5, kChartTop + kChartHeight + 4);
    figure.texts.push_back(
        {x_of(p), kChartTop + kChartHeight + 16, std::to_string(p), 9, "middle", palette::paper::text_dim});
  }
  figure.texts.push_back({kChartLeft + kChartWidth / 2, kChartTop + kChartHeight + 34, "ranks P", 11, "middle"});

  double legend_y = kChartTop;
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
                               {"ratio", printf_text("%.4g", s.points[i].second)}},
                              s.label + printf_text(", %.3gx", s.points[i].second)});
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
    legend_y = add_series_legend_item(figure, kChartLeft + kChartWidth + 30, legend_y, s);
  }
  figure.width = kChartLeft + kChartWidth + 220;
  figure.height = std::max(kChartTop + kChartHeight + 50, legend_y + 20);
  fit_canvas_to_text(figure);
  return figure;
}

}  // namespace ringlab::viz
