// PNG output of figures: rectangles and lines rasterised by hand onto an RGB canvas (twice the
// SVG's size), written with stb_image_write when this build has it (RINGLAB_HAVE_STB). Text is
// not drawn: the SVG carries it.
#include <algorithm>
#include <cmath>
#include <vector>

#include "sim/cost/figures.hpp"
#include "sim/run/output_files.hpp"

#ifdef RINGLAB_HAVE_STB
// Static functions only, so another part that also embeds stb_image_write cannot clash with us.
#define STB_IMAGE_WRITE_STATIC
#define STB_IMAGE_WRITE_IMPLEMENTATION
#include <stb_image_write.h>
#endif

namespace ringlab {

namespace {

constexpr double kScale = 2;  // pixels per SVG unit

struct Canvas {
  int width = 0, height = 0;
  std::vector<uint8_t> pixels;  // RGB rows

  Canvas(int w, int h) : width(w), height(h), pixels(static_cast<size_t>(w) * h * 3, 255) {}

  void put(int x, int y, Rgb c) {
    if (x < 0 || y < 0 || x >= width || y >= height) return;
    uint8_t* p = &pixels[(static_cast<size_t>(y) * width + x) * 3];
    p[0] = c.r, p[1] = c.g, p[2] = c.b;
  }
  void fill(double x, double y, double w, double h, Rgb c) {
    const int x0 = static_cast<int>(std::lround(x * kScale)), y0 = static_cast<int>(std::lround(y * kScale));
    const int x1 = static_cast<int>(std::lround((x + w) * kScale)), y1 = static_cast<int>(std::lround((y + h) * kScale));
    for (int py = std::max(0, y0); py < std::min(height, y1); ++py)
      for (int px = std::max(0, x0); px < std::min(width, x1); ++px) put(px, py, c);
  }
  // A line of the given width: stamps a square pen along the segment.
  void line(double x1, double y1, double x2, double y2, double pen, Rgb c) {
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
  Canvas canvas(static_cast<int>(std::ceil(figure.width * kScale)), static_cast<int>(std::ceil(figure.height * kScale)));
  for (const FigureRect& r : figure.rects) {
    canvas.fill(r.x, r.y, r.width, r.height, r.fill);
    if (r.outline) {  // the SVG's thin white outline
      const Rgb white{255, 255, 255};
      canvas.line(r.x, r.y, r.x + r.width, r.y, 0.5, white);
      canvas.line(r.x, r.y, r.x, r.y + r.height, 0.5, white);
    }
  }
  for (const FigureLine& l : figure.lines) canvas.line(l.x1, l.y1, l.x2, l.y2, l.width, l.colour);
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

}  // namespace ringlab
