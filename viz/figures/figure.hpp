// A figure of the book: rectangles, triangles, lines and text on a white page, in SVG units
// (one unit is one pixel of the viewer's canvas; the PNG doubles them). Written as SVG by hand (no
// dependency) and, when built with stb_image_write (RINGLAB_HAVE_STB), rasterised to PNG, text
// included (in a built-in bitmap font: viz/figures/bitmap_font.hpp).
//
// Paint order: the page, then rects, triangles, lines and text, each in the order added. Rects and
// triangles may carry a class and data-* attributes, so tests and scripts read a figure back.
#pragma once

#include <array>
#include <string>
#include <utility>
#include <vector>

#include "viz/model/palette.hpp"

namespace ringlab::viz {

std::string hex(Rgba colour);  // "#4e79a7"; alpha is not written (figures draw opaque)

using DataAttributes = std::vector<std::pair<std::string, std::string>>;  // data-KEY="VALUE"

struct FigureRect {
  double x = 0, y = 0, width = 0, height = 0;
  Rgba fill;
  bool outline = false;   // a thin outline in palette::paper::text_dim (legend swatches)
  std::string css_class;  // "cell visible", "bar busy", "event compute", ...
  DataAttributes data;
  std::string tooltip;  // SVG <title>
};

struct FigureTriangle {
  std::array<double, 6> points{};  // x0 y0 x1 y1 x2 y2
  Rgba fill;
  std::string css_class;
  DataAttributes data;
};

struct FigureLine {
  double x1 = 0, y1 = 0, x2 = 0, y2 = 0;
  Rgba colour;
  double width = 1;
  std::string css_class;
};

struct FigureText {
  double x = 0, y = 0;
  std::string text;
  double size = 12;
  std::string anchor = "start";  // SVG text-anchor
  Rgba colour = palette::paper::text;
  double angle = 0;  // degrees, clockwise, about (x, y): -90 reads bottom to top
};

struct Figure {
  double width = 0, height = 0;
  std::string title;
  std::vector<FigureRect> rects;
  std::vector<FigureTriangle> triangles;
  std::vector<FigureLine> lines;
  std::vector<FigureText> texts;
};

std::string to_svg(const Figure& figure);
// PNG via stb_image_write: false (and `error` set) when this build has no stb_image_write. The
// file is written whole or not at all.
bool write_png(const Figure& figure, const std::string& path, std::string& error);
bool png_supported();

// ---- layout helpers shared by the figures ----------------------------------------------------

// A round tick spacing (1, 2 or 5 times a power of ten) giving about five ticks over `range`.
double nice_step(double range);
// A legend entry: a 14 x 14 outlined swatch at (x, y) and its label; returns the next entry's y.
double add_legend_item(Figure& figure, double x, double y, Rgba colour, const std::string& label);
// A thin horizontal or vertical rule (an axis' grid line) as a rect, so what is added after it
// (bars, spans) paints over it.
void add_rule(Figure& figure, double x0, double y0, double x1, double y1);
// Where a text may paint, in figure units, estimated conservatively for whatever sans-serif font
// a browser picks (the widest common one, DejaVu Sans, rounded up): per character 1.0 of the font
// size for m, w, M, W, %, @ and anything beyond ASCII, 0.8 for other capitals and 0.65 for the
// rest; 0.8 of the size above the baseline and 0.25 below. Rotated texts are boxed around their
// rotated corners. The PNG's bitmap font (0.6 of the size a character) fits inside.
struct TextBox {
  double x0 = 0, y0 = 0, x1 = 0, y1 = 0;
};
TextBox text_box(const FigureText& text);
// Grows the canvas (width and height) so every text's box fits with a margin of 6 units; a text
// that would start left of 0 or above 0 is a figure's own mistake (tests check that none does).
void fit_canvas_to_text(Figure& figure);

}  // namespace ringlab::viz
