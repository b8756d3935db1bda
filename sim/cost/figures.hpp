// Figures for the book, made by ringlab itself: a small drawing model (rectangles, lines, text)
// computed from a plan or a dry run, written as SVG by hand (no dependency) and, when built with
// stb_image_write (RINGLAB_HAVE_STB), rasterised to PNG — rectangles and lines only; text is left
// to the SVG.
//
// Kinds (`ringlab figure KIND`):
//   grid-step  the (query, key) block grid of one pass, each computed cell coloured by the step
//              that computes it; grid-rank: coloured by the rank (ring position) that computes it.
//              Cells are layout units in global token order when there are at most 64 of them,
//              else ring blocks. Marked: "diagonal" (cut by the causal mask: a diagonal line),
//              "masked" (computed although fully masked — --no-skip: pale, hatched), "skipped"
//              (not computed: grey with a cross; a fully masked unit inside a computed block
//              counts as skipped, as the kernel's tile skipping leaves it out at real sizes). Every cell rect carries class and data-q / data-k / data-step /
//              data-rank attributes, so tests and scripts can read the figure back.
//   load       per-rank stacked bars of the dry run: compute, other, exposed communication, idle.
//   timeline   Gantt chart of the dry run's simulated trace: per rank a compute and a comm lane
//              (compute by step; transfers light orange, exposed waits black, waits for a late peer grey,
//              collectives purple).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "sim/cost/dry_executor.hpp"

namespace ringlab {

struct Rgb {
  uint8_t r = 0, g = 0, b = 0;
  std::string hex() const;  // "#1f77b4"
  friend bool operator==(const Rgb&, const Rgb&) = default;
};

struct FigureRect {
  double x = 0, y = 0, width = 0, height = 0;
  Rgb fill;
  bool outline = false;     // a thin dark outline
  std::string css_class;    // "cell visible", "bar compute", ...
  std::vector<std::pair<std::string, std::string>> data;  // data-* attributes
  std::string tooltip;      // SVG <title>
};

struct FigureLine {
  double x1 = 0, y1 = 0, x2 = 0, y2 = 0;
  Rgb colour;
  double width = 1;
  std::string css_class;
};

struct FigureText {
  double x = 0, y = 0;
  std::string text;
  double size = 12;
  std::string anchor = "start";  // SVG text-anchor
};

struct Figure {
  double width = 0, height = 0;
  std::string title;
  std::vector<FigureRect> rects;
  std::vector<FigureLine> lines;
  std::vector<FigureText> texts;
};

enum class FigureKind : uint8_t { grid_step, grid_rank, load, timeline };
const char* figure_kind_name(FigureKind kind);
FigureKind parse_figure_kind(const std::string& name);  // throws UsageError listing the kinds

// Colours: a categorical palette (Tableau 10) for up to 10 items, else an evenly spaced hue ramp.
Rgb palette_colour(int64_t index, int64_t count);
inline constexpr Rgb kSkippedColour{224, 224, 224};  // not computed
inline constexpr Rgb kMarkerColour{40, 40, 40};      // diagonal lines, crosses, hatching
// A computed-but-fully-masked cell: its colour blended 65% towards white.
Rgb masked_colour(Rgb colour);

// The block grid of one pass. colour_by_rank: grid-rank, else grid-step. Throws UsageError when
// the plan has more than 64 ring positions (too many to draw).
Figure block_grid_figure(const Plan& plan, bool colour_by_rank, Pass pass);
// Per-rank stacked bars (P <= 256).
Figure load_figure(const Plan& plan, const DryResult& result);
// Gantt chart from a dry run made with DryOptions::trace (P <= 64).
Figure timeline_figure(const Plan& plan, const DryResult& result);

std::string to_svg(const Figure& figure);
// PNG via stb_image_write: false (and `error` set) when this build has no stb_image_write.
bool write_png(const Figure& figure, const std::string& path, std::string& error);
bool png_supported();

}  // namespace ringlab
