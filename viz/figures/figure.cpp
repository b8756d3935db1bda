// Figures: the SVG writer and the layout helpers the figures share.
#include "viz/figures/figure.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

namespace ringlab::viz {

std::string hex(Rgba colour) {
  char text[8];
  std::snprintf(text, sizeof text, "#%02x%02x%02x", colour.r, colour.g, colour.b);
  return text;
}

double nice_step(double range) {
  if (!(range > 0)) return 1;
  const double raw = range / 5, power = std::pow(10.0, std::floor(std::log10(raw)));
  for (double f : {1.0, 2.0, 5.0, 10.0})
    if (f * power >= raw) return f * power;
  return 10 * power;
}

double add_legend_item(Figure& figure, double x, double y, Rgba colour, const std::string& label) {
  figure.rects.push_back({x, y, 14, 14, colour, true, "legend", {}, ""});
  figure.texts.push_back({x + 20, y + 11, label, 10, "start", palette::paper::text});
  return y + 18;
}

void add_rule(Figure& figure, double x0, double y0, double x1, double y1) {
  const double w = std::max(x1 - x0, 0.5), h = std::max(y1 - y0, 0.5);
  figure.rects.push_back({x0, y0, w, h, palette::paper::grid_line, false, "rule", {}, ""});
}

namespace {

// In font sizes. Never below 0.6, the PNG's bitmap font's advance; DejaVu Sans, the widest
// common default sans-serif, stays under these (its digits and lower case 0.28-0.64, m 0.97).
double glyph_width(char32_t c) {
  if (c > 126) return 1.0;
  if (c == 'm' || c == 'w' || c == 'M' || c == 'W' || c == '%' || c == '@') return 1.0;
  if (c >= 'A' && c <= 'Z') return 0.8;
  return 0.65;
}

}  // namespace

TextBox text_box(const FigureText& t) {
  double width = 0;
  for (size_t i = 0; i < t.text.size();) {  // per UTF-8 code point
    const auto byte = static_cast<unsigned char>(t.text[i]);
    const size_t length = byte < 0x80 ? 1 : (byte >> 5) == 0x6 ? 2 : (byte >> 4) == 0xE ? 3 : 4;
    width += glyph_width(length == 1 ? byte : 0x100);
    i += length;
  }
  width *= t.size;
  const double start = t.anchor == "middle" ? -width / 2 : t.anchor == "end" ? -width : 0;
  // The box in the text's own frame (u along the text, v down), then rotated about (x, y).
  const double u[2] = {start, start + width}, v[2] = {-0.8 * t.size, 0.25 * t.size};
  const double angle = t.angle * 3.14159265358979323846 / 180, cos_a = std::cos(angle), sin_a = std::sin(angle);
  TextBox box{1e300, 1e300, -1e300, -1e300};
  for (const double a : u)
    for (const double b : v) {
      const double x = t.x + a * cos_a - b * sin_a, y = t.y + a * sin_a + b * cos_a;
      box.x0 = std::min(box.x0, x), box.x1 = std::max(box.x1, x);
      box.y0 = std::min(box.y0, y), box.y1 = std::max(box.y1, y);
    }
  return box;
}

void fit_canvas_to_text(Figure& figure) {
  for (const FigureText& t : figure.texts) {
    const TextBox box = text_box(t);
    figure.width = std::max(figure.width, std::ceil(box.x1 + 6));
    figure.height = std::max(figure.height, std::ceil(box.y1 + 6));
  }
}

namespace {

std::string escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string number(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f", value);
  return text;
}

void write_attributes(std::ostringstream& svg, const std::string& css_class, const DataAttributes& data) {
  if (!css_class.empty()) svg << " class=\"" << escape(css_class) << "\"";
  for (const auto& [key, value] : data) svg << " data-" << key << "=\"" << escape(value) << "\"";
}

}  // namespace

std::string to_svg(const Figure& f) {
  std::ostringstream svg;
  svg << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << number(f.width) << "\" height=\"" << number(f.height)
      << "\" viewBox=\"0 0 " << number(f.width) << " " << number(f.height) << "\" font-family=\"sans-serif\">\n";
  svg << "<title>" << escape(f.title) << "</title>\n";
  svg << "<rect x=\"0\" y=\"0\" width=\"" << number(f.width) << "\" height=\"" << number(f.height) << "\" fill=\""
      << hex(palette::paper::background) << "\" class=\"background\"/>\n";
  for (const FigureRect& r : f.rects) {
    svg << "<rect x=\"" << number(r.x) << "\" y=\"" << number(r.y) << "\" width=\"" << number(r.width) << "\" height=\""
        << number(r.height) << "\" fill=\"" << hex(r.fill) << "\"";
    if (r.outline) svg << " stroke=\"" << hex(palette::paper::text_dim) << "\" stroke-width=\"0.5\"";
    write_attributes(svg, r.css_class, r.data);
    if (r.tooltip.empty()) {
      svg << "/>\n";
    } else {
      svg << "><title>" << escape(r.tooltip) << "</title></rect>\n";
    }
  }
  for (const FigureTriangle& t : f.triangles) {
    svg << "<polygon points=\"" << number(t.points[0]) << "," << number(t.points[1]) << " " << number(t.points[2])
        << "," << number(t.points[3]) << " " << number(t.points[4]) << "," << number(t.points[5]) << "\" fill=\""
        << hex(t.fill) << "\"";
    write_attributes(svg, t.css_class, t.data);
    svg << "/>\n";
  }
  for (const FigureLine& l : f.lines) {
    svg << "<line x1=\"" << number(l.x1) << "\" y1=\"" << number(l.y1) << "\" x2=\"" << number(l.x2) << "\" y2=\""
        << number(l.y2) << "\" stroke=\"" << hex(l.colour) << "\" stroke-width=\"" << number(l.width) << "\"";
    if (!l.css_class.empty()) svg << " class=\"" << escape(l.css_class) << "\"";
    svg << "/>\n";
  }
  for (const FigureText& t : f.texts) {
    svg << "<text x=\"" << number(t.x) << "\" y=\"" << number(t.y) << "\" font-size=\"" << number(t.size)
        << "\" text-anchor=\"" << t.anchor << "\" fill=\"" << hex(t.colour) << "\"";
    if (t.angle != 0)
      svg << " transform=\"rotate(" << number(t.angle) << " " << number(t.x) << " " << number(t.y) << ")\"";
    svg << ">" << escape(t.text) << "</text>\n";
  }
  svg << "</svg>\n";
  return svg.str();
}

}  // namespace ringlab::viz
