// The viewer's colours, as plain RGBA bytes with no UI types: the view converts them to ImGui's
// packed colours, and the screenshot test expects exactly these bytes at known pixels, so every
// colour a test checks is drawn opaque and named here once. The book's figures (viz/figures) draw
// cells, bars and spans with these same colours, on a white page (palette::paper).
#pragma once

#include <cstdint>

namespace ringlab::viz {

enum class SpanKind : uint8_t;  // viz/model/schedule_model.hpp

struct Rgba {
  uint8_t r = 0, g = 0, b = 0, a = 255;
  friend bool operator==(const Rgba&, const Rgba&) = default;
};

namespace palette {

inline constexpr Rgba background{24, 26, 31};  // canvas background behind every panel drawing
inline constexpr Rgba grid_line{70, 74, 84};
inline constexpr Rgba skipped{58, 62, 74};             // fully masked and skipped: no kernel call
inline constexpr Rgba masked_out{36, 38, 45};          // the invisible part of a computed block
inline constexpr Rgba masked_computed{128, 128, 128};  // fully masked but computed (--no-skip)
inline constexpr Rgba not_traced{48, 40, 56};          // a trace has no event for this block
inline constexpr Rgba highlight{255, 214, 10};         // the current step's cells and nodes
inline constexpr Rgba error_wrong{220, 50, 47};        // a block whose own result is wrong
inline constexpr Rgba error_ok{46, 160, 67};           // checked and right
inline constexpr Rgba error_misrouted{255, 140, 0};    // right on its own, accumulated into the wrong block
inline constexpr Rgba error_unknown{96, 104, 120};     // computed, no run to measure it
inline constexpr Rgba text{225, 228, 235};
inline constexpr Rgba text_dim{140, 146, 158};
inline constexpr Rgba compute_span{86, 156, 214};
inline constexpr Rgba send_span{120, 200, 160};
inline constexpr Rgba wait_span{200, 90, 80};
inline constexpr Rgba collective_span{170, 120, 220};
inline constexpr Rgba flops_bar{86, 156, 214};
inline constexpr Rgba busy_bar{120, 200, 160};
inline constexpr Rgba blocked_bar{200, 90, 80};
inline constexpr Rgba hover_line{255, 255, 255, 180};

// The page of the book's figures: white, printed. Only what surrounds the drawing (background,
// text, axes) differs from the viewer; what is drawn keeps the viewer's colours.
namespace paper {
inline constexpr Rgba background{255, 255, 255};
inline constexpr Rgba text{33, 37, 41};
inline constexpr Rgba text_dim{108, 117, 125};
inline constexpr Rgba grid_line{222, 226, 230};
}  // namespace paper

}  // namespace palette

// A categorical colour per K/V origin block (ring position) or rank: ten well separated hues,
// then golden-ratio hues beyond ten.
Rgba category_colour(int64_t index);
// A sequential ramp (dark blue -> teal -> yellow) for step t of `steps` steps.
Rgba step_colour(int64_t step, int64_t steps);
// a + (b - a) t per channel, opaque.
Rgba mix(Rgba a, Rgba b, float t);
// `colour` faded towards the background: for cells not computed yet at the current step.
Rgba dimmed(Rgba colour, float keep = 0.3f);
// Error colour of a measured block: green within tolerance, red beyond (brighter the larger).
Rgba error_colour(double tolerance_used);
// A timeline span: compute in the colour of its K/V block (category_colour; compute_span when the
// block is unknown), transfers, waits and collectives in their own colours.
Rgba span_colour(SpanKind kind, int64_t block);
// Text drawn over `fill`: the viewer's dark background colour on light fills, white on dark ones.
Rgba text_on(Rgba fill);

}  // namespace ringlab::viz
