#include "viz/model/palette.hpp"

#include <algorithm>
#include <array>
#include <cmath>

#include "viz/model/schedule_model.hpp"

namespace ringlab::viz {

Rgba mix(Rgba a, Rgba b, float t) {
  auto channel = [t](uint8_t x, uint8_t y) {
    return static_cast<uint8_t>(
        std::lround(static_cast<float>(x) + (static_cast<float>(y) - static_cast<float>(x)) * t));
  };
  return {channel(a.r, b.r), channel(a.g, b.g), channel(a.b, b.b), 255};
}

namespace {

Rgba from_hsv(float h, float s, float v) {
  const float c = v * s, hp = h * 6.0f, x = c * (1.0f - std::fabs(std::fmod(hp, 2.0f) - 1.0f)), m = v - c;
  float r = 0, g = 0, b = 0;
  if (hp < 1)
    r = c, g = x;
  else if (hp < 2)
    r = x, g = c;
  else if (hp < 3)
    g = c, b = x;
  else if (hp < 4)
    g = x, b = c;
  else if (hp < 5)
    r = x, b = c;
  else
    r = c, b = x;
  auto byte = [m](float value) { return static_cast<uint8_t>(std::lround((value + m) * 255.0f)); };
  return {byte(r), byte(g), byte(b), 255};
}

}  // namespace

Rgba category_colour(int64_t index) {
  // Tableau 10: distinct on a dark background, and distinguishable by most colour-blind readers.
  static constexpr std::array<Rgba, 10> kColours{{{78, 121, 167},
                                                  {242, 142, 43},
                                                  {225, 87, 89},
                                                  {118, 183, 178},
                                                  {89, 161, 79},
                                                  {237, 201, 72},
                                                  {176, 122, 161},
                                                  {255, 157, 167},
                                                  {156, 117, 95},
                                                  {186, 176, 172}}};
  if (index < 0) return palette::error_unknown;
  if (index < static_cast<int64_t>(kColours.size())) return kColours[static_cast<size_t>(index)];
  const float hue = std::fmod(0.11f + 0.618034f * static_cast<float>(index), 1.0f);
  return from_hsv(hue, 0.55f, 0.85f);
}

Rgba step_colour(int64_t step, int64_t steps) {
  static constexpr std::array<Rgba, 4> kStops{{{59, 82, 139}, {33, 145, 140}, {94, 201, 98}, {253, 231, 37}}};
  const float t = steps <= 1 ? 0.0f : std::clamp(static_cast<float>(step) / static_cast<float>(steps - 1), 0.0f, 1.0f);
  const float scaled = t * static_cast<float>(kStops.size() - 1);
  const size_t low = std::min(static_cast<size_t>(scaled), kStops.size() - 2);
  return mix(kStops[low], kStops[low + 1], scaled - static_cast<float>(low));
}

Rgba dimmed(Rgba colour, float keep) { return mix(palette::background, colour, keep); }

Rgba error_colour(double tolerance_used) {
  if (!std::isfinite(tolerance_used)) return palette::error_wrong;  // NaN or inf: as wrong as it gets
  if (tolerance_used <= 1.0) return palette::error_ok;
  // 1x .. 10^4 x the tolerance: dark red to full red.
  const float t = std::clamp(static_cast<float>(std::log10(tolerance_used) / 4.0), 0.0f, 1.0f);
  return mix({120, 30, 30, 255}, palette::error_wrong, t);
}

Rgba span_colour(SpanKind kind, int64_t block) {
  switch (kind) {
    case SpanKind::compute: return block >= 0 ? category_colour(block) : palette::compute_span;
    case SpanKind::send: return palette::send_span;
    case SpanKind::wait: return palette::wait_span;
    case SpanKind::collective: return palette::collective_span;
    case SpanKind::other: break;
  }
  return palette::text_dim;
}

Rgba text_on(Rgba fill) {
  // Relative luminance (Rec. 709 weights) of the fill, 0..255.
  const double luminance = 0.2126 * fill.r + 0.7152 * fill.g + 0.0722 * fill.b;
  return luminance >= 110 ? palette::background : Rgba{255, 255, 255, 255};
}

}  // namespace ringlab::viz
