// PNG output of figures: rectangles, triangles, lines and text rasterised by hand onto an RGB
// canvas (twice the SVG's size), written with stb_image_write when this build has it
// (RINGLAB_HAVE_STB). Text is drawn in the built-in bitmap font (viz/figures/bitmap_font.hpp): a
// font pixel is a tenth of the font size, so a character is 0.6 of the size wide, as text_box
// allows for, and capitals 0.7 of it tall.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "sim/pipeline/output_files.hpp"
#include "viz/figures/bitmap_font.hpp"
#include "viz/figures/figure.hpp"

#ifdef RINGLAB_HAVE_STB
// Static functions only, so another part that also embeds stb_image_write cannot clash with us.
#define STB_IMAGE_WRITE_STATIC
#define STB_IMAGE_WRITE_IMPLEMENTATION
#include <stb_image_write.h>
#endif

namespace ringlab::viz {

namespace {

[[maybe_unused]] constexpr double kScale = 2;  // pixels per SVG unit

struct Canvas {
  int width = 0, height = 0;
  std::vector<uint8_t> pixels;  // RGB rows

  Canvas(int w, int h, Rgba page) : width(w), height(h), pixels(static_cast<size_t>(w) * static_cast<size_t>(h) * 3) {
    for (size_t i = 0; i < pixels.size(); i += 3) pixels[i] = page.r, pixels[i + 1] = page.g, pixels[i + 2] = page.b;
  }

  void put(int x, int y, Rgba c) {
    if (x < 0 || y < 0 || x >= width || y >= height) return;
    uint8_t* p = &pixels[(static_cast<size_t>(y) * static_cast<size_t>(width) + static_cast<size_t>(x)) * 3];
    p[0] = c.r, p[1] = c.g, p[2] = c.b;
  }
  static int pixel(double units) { return static_cast<int>(std::lround(units * kScale)); }

  void fill(double x, double y, double w, double h, Rgba c) {
    const int x0 = pixel(x), y0 = pixel(y), x1 = pixel(x + w), y1 = pixel(y + h);
    for (int py = std::max(0, y0); py < std::min(height, y1); ++py)
      for (int px = std::max(0, x0); px < std::min(width, x1); ++px) put(px, py, c);
  }
  // Every pixel whose centre lies inside the triangle (either winding).
  void triangle(const std::array<double, 6>& p, Rgba c) {
    const double ax = p[0] * kScale, ay = p[1] * kScale, bx = p[2] * kScale, by = p[3] * kScale;
    const double cx = p[4] * kScale, cy = p[5] * kScale;
    auto edge = [](double x0, double y0, double x1, double y1, double x, double y) {
      return (x1 - x0) * (y - y0) - (y1 - y0) * (x - x0);
    };
    const double area = edge(ax, ay, bx, by, cx, cy);
    if (area == 0) return;
    const int left = std::max(0, static_cast<int>(std::floor(std::min({ax, bx, cx}))));
    const int right = std::min(width - 1, static_cast<int>(std::ceil(std::max({ax, bx, cx}))));
    const int top = std::max(0, static_cast<int>(std::floor(std::min({ay, by, cy}))));
    const int bottom = std::min(height - 1, static_cast<int>(std::ceil(std::max({ay, by, cy}))));
    for (int py = top; py <= bottom; ++py)
      for (int px = left; px <= right; ++px) {
        const double x = px + 0.5, y = py + 0.5;
        const double w0 = edge(bx, by, cx, cy, x, y), w1 = edge(cx, cy, ax, ay, x, y), w2 = edge(ax, ay, bx, by, x, y);
        const bool inside = area > 0 ? (w0 >= 0 && w1 >= 0 && w2 >= 0) : (w0 <= 0 && w1 <= 0 && w2 <= 0);
        if (inside) put(px, py, c);
      }
  }
  // A line of the given width: stamps a square pen along the segment.
  void line(double x1, double y1, double x2, double y2, double pen, Rgba c) {
    const double ax = x1 * kScale, ay = y1 * kScale, bx = x2 * kScale, by = y2 * kScale;
    const double length = std::hypot(bx - ax, by - ay);
    const int steps = std::max(1, static_cast<int>(std::ceil(length)));
    const int half = std::max(0, static_cast<int>(std::lround(pen * kScale / 2)) - 1);
    for (int i = 0; i <= steps; ++i) {
      const int px = static_cast<int>(std::lround(ax + (bx - ax) * i / steps));
      const int py = static_cast<int>(std::lround(ay + (by - ay) * i / steps));
      for (int dy = -half; dy <= half; ++dy)
        for (int dx = -half; dx <= half; ++dx) put(px + dx, py + dy, c);
    }
  }
  // A text in the bitmap font: each lit font pixel a square of size / 10 units, placed along the
  // text's direction from its anchor and baseline.
  void text(const FigureText& t) {
    const std::vector<char32_t> characters = bitmap_characters(t.text);
    if (characters.empty()) return;
    const double dot = t.size / 10;
    const double extent = dot * (BitmapFont::kAdvance * static_cast<double>(characters.size()) - 1);
    const double start = t.anchor == "middle" ? -extent / 2 : t.anchor == "end" ? -extent : 0;
    const double angle = t.angle * 3.14159265358979323846 / 180, cos_a = std::cos(angle), sin_a = std::sin(angle);
    for (size_t i = 0; i < characters.size(); ++i) {
      const BitmapFont::Glyph& glyph = bitmap_glyph(characters[i]);
      for (int row = 0; row < BitmapFont::kRows; ++row)
        for (int column = 0; column < BitmapFont::kColumns; ++column) {
          if (!(glyph[static_cast<size_t>(row)] & (0x10 >> column))) continue;
          // The pixel's centre in the text's frame (u along it, v down from the baseline).
          const double u = start + dot * (BitmapFont::kAdvance * static_cast<double>(i) + column + 0.5);
          const double v = dot * (row - BitmapFont::kAscent + 0.5);
          const double x = t.x + u * cos_a - v * sin_a, y = t.y + u * sin_a + v * cos_a;
          fill(x - dot / 2, y - dot / 2, dot, dot, t.colour);
        }
    }
  }
};

}  // namespace

bool png_supported() {
#ifdef RINGLAB_HAVE_STB
  return true;
#else
  return false;
#endif
}

bool write_png(const Figure& figure, const std::string& path, std::string& error) {
#ifdef RINGLAB_HAVE_STB
  Canvas canvas(static_cast<int>(std::ceil(figure.width * kScale)), static_cast<int>(std::ceil(figure.height * kScale)),
                palette::paper::background);
  for (const FigureRect& r : figure.rects) {
    canvas.fill(r.x, r.y, r.width, r.height, r.fill);
    if (r.outline) {  // the SVG's thin outline
      const Rgba ink = palette::paper::text_dim;
      canvas.line(r.x, r.y, r.x + r.width, r.y, 0.5, ink);
      canvas.line(r.x, r.y + r.height, r.x + r.width, r.y + r.height, 0.5, ink);
      canvas.line(r.x, r.y, r.x, r.y + r.height, 0.5, ink);
      canvas.line(r.x + r.width, r.y, r.x + r.width, r.y + r.height, 0.5, ink);
    }
  }
  for (const FigureTriangle& t : figure.triangles) canvas.triangle(t.points, t.fill);
  for (const FigureLine& l : figure.lines) canvas.line(l.x1, l.y1, l.x2, l.y2, l.width, l.colour);
  for (const FigureText& t : figure.texts) canvas.text(t);
  std::string png;
  const auto append = [](void* context, void* data, int size) {
    static_cast<std::string*>(context)->append(static_cast<const char*>(data), static_cast<size_t>(size));
  };
  if (!stbi_write_png_to_func(append, &png, canvas.width, canvas.height, 3, canvas.pixels.data(), canvas.width * 3)) {
    error = path + ": stb_image_write could not encode the PNG";
    return false;
  }
  write_file_atomically(path, png);  // never half a file
  return true;
#else
  (void)figure, (void)path;
  error = "this build has no stb_image_write (Debian libstb-dev), so figures are SVG only; drop --png";
  return false;
#endif
}

}  // namespace ringlab::viz
