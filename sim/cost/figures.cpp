// Figures: the drawing model from plans and dry runs, and the SVG writer.
// Sections: [colours] [block grid] [load bars] [timeline] [svg]
#include "sim/cost/figures.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>

#include "reference/error.hpp"

namespace ringlab {

// ---- [colours] -------------------------------------------------------------------------------

std::string Rgb::hex() const {
  char text[8];
  std::snprintf(text, sizeof text, "#%02x%02x%02x", r, g, b);
  return text;
}

Rgb palette_colour(int64_t index, int64_t count) {
  static constexpr Rgb kTableau10[] = {{31, 119, 180}, {255, 127, 14}, {44, 160, 44},   {214, 39, 40},
                                       {148, 103, 189}, {140, 86, 75}, {227, 119, 194}, {127, 127, 127},
                                       {188, 189, 34},  {23, 190, 207}};
  if (count <= 10) return kTableau10[((index % 10) + 10) % 10];
  // Hue ramp at fixed saturation and value (HSV -> RGB).
  const double h = 300.0 * double(index) / double(std::max<int64_t>(1, count - 1)), s = 0.65, v = 0.85;
  const double c = v * s, x = c * (1 - std::fabs(std::fmod(h / 60.0, 2.0) - 1)), m = v - c;
  double r = 0, g = 0, b = 0;
  if (h < 60) r = c, g = x;
  else if (h < 120) r = x, g = c;
  else if (h < 180) g = c, b = x;
  else if (h < 240) g = x, b = c;
  else r = x, b = c;
  auto byte = [&](double value) { return static_cast<uint8_t>(std::lround((value + m) * 255)); };
  return {byte(r), byte(g), byte(b)};
}

Rgb masked_colour(Rgb colour) {
  auto towards_white = [](uint8_t value) { return static_cast<uint8_t>(std::lround(value + 0.65 * (255 - value))); };
  return {towards_white(colour.r), towards_white(colour.g), towards_white(colour.b)};
}

const char* figure_kind_name(FigureKind kind) {
  switch (kind) {
    case FigureKind::grid_step: return "grid-step";
    case FigureKind::grid_rank: return "grid-rank";
    case FigureKind::load: return "load";
    case FigureKind::timeline: return "timeline";
  }
  return "?";
}

FigureKind parse_figure_kind(const std::string& name) {
  for (FigureKind kind : {FigureKind::grid_step, FigureKind::grid_rank, FigureKind::load, FigureKind::timeline})
    if (name == figure_kind_name(kind)) return kind;
  throw UsageError("unknown figure '" + name + "'; use ringlab figure grid-step, grid-rank, load or timeline");
}

// ---- [block grid] ----------------------------------------------------------------------------

namespace {

constexpr double kMargin = 70;  // room for titles and axis labels
constexpr int64_t kMaxGridCells = 64;

// One axis entry of the grid: a layout unit (its ring position and local rows) or a whole block.
struct Segment {
  int64_t block = 0;      // ring position holding these tokens
  RowRange rows;          // local rows in that block
  int64_t first_unit = 0, last_unit = 0;  // layout units covered (global order)
};

// The compute of (q block, kv block) in one pass, from the plan's own ops.
struct GridCompute {
  int64_t step = -1;
  BlockShape shape = BlockShape::skipped;
  std::vector<KernelBlock> kernels;
};

bool overlaps(const RowRange& a, const RowRange& b) { return a.begin < b.end && b.begin < a.end; }

}  // namespace

Figure block_grid_figure(const Plan& plan, bool colour_by_rank, Pass pass) {
  const int64_t R = plan.ring();
  if (R > kMaxGridCells) {
    throw UsageError("a block grid of " + std::to_string(R) + " ring positions is too large to draw; use at most " +
                     std::to_string(kMaxGridCells) + " (--ranks / --ulysses)");
  }
  if (pass == Pass::backward && !plan.spec().backward) {
    throw UsageError("--pass backward needs a plan with a backward pass; add --backward");
  }
  // Computes by (q block, kv block): expanded from one rank of each ring position (its Ulysses
  // partners compute the same blocks for other heads).
  std::map<std::pair<int64_t, int64_t>, GridCompute> computes;
  int64_t steps = 1;
  for (int64_t g = 0; g < R; ++g) {
    for (const Op& op : expand(plan, plan.rank_at(g, 0))) {
      const auto* c = std::get_if<ComputeOp>(&op.body);
      if (!c || c->pass != pass) continue;
      computes[{c->q_block, c->kv_block}] = {op.step, c->shape, c->kernels};
      steps = std::max(steps, op.step + 1);
    }
  }
  // Axis: layout units in global order when few enough, else ring blocks.
  const Layout& layout = plan.layout();
  const int64_t block = layout.block();
  std::vector<Segment> axis;
  const bool by_unit = layout.units() <= kMaxGridCells;
  if (by_unit) {
    for (int64_t unit = 0; unit < layout.units(); ++unit) {
      const int64_t g = plan.ring_position(layout.rank_of_unit(unit));
      const std::vector<int64_t> positions = plan.block_positions(g);
      const int64_t row = std::lower_bound(positions.begin(), positions.end(), unit * block) - positions.begin();
      axis.push_back({g, {row, row + block}, unit, unit});
    }
  } else {
    for (int64_t g = 0; g < R; ++g) axis.push_back({g, {0, plan.block_tokens()}, -1, -1});
  }
  const int64_t N = static_cast<int64_t>(axis.size());
  const double cell = std::clamp(560.0 / double(N), 6.0, 40.0);
  Figure figure;
  figure.width = kMargin + N * cell + 190;
  figure.height = kMargin + N * cell + 40;
  figure.title = std::string(colour_by_rank ? "blocks by rank" : "blocks by step") + " (" +
                 (pass == Pass::forward ? "forward" : "backward") + "): " + plan.spec().describe();
  figure.texts.push_back({kMargin, 22, figure.title, 13, "start"});
  figure.texts.push_back({kMargin + N * cell / 2, kMargin - 26, by_unit ? "key unit (global order)" : "key block", 11, "middle"});
  figure.texts.push_back({14, kMargin + N * cell / 2, by_unit ? "query unit" : "query block", 11, "start"});
  const bool causal = plan.spec().causal;
  for (int64_t i = 0; i < N; ++i) {
    const Segment& q = axis[static_cast<size_t>(i)];
    if (N <= 32 || i % 4 == 0) {
      const std::string name = std::to_string(by_unit ? q.first_unit : q.block);
      figure.texts.push_back({kMargin - 6, kMargin + (i + 0.7) * cell, name, 9, "end"});
      figure.texts.push_back({kMargin + (i + 0.5) * cell, kMargin - 6, name, 9, "middle"});
    }
    for (int64_t j = 0; j < N; ++j) {
      const Segment& k = axis[static_cast<size_t>(j)];
      const auto found = computes.find({q.block, k.block});
      const GridCompute none;
      const GridCompute& c = found == computes.end() ? none : found->second;
      // Is this cell inside a kernel call of that compute, and would the kernel skip it when it
      // is fully masked (tile skipping, unless --no-skip)?
      bool computed = false, skips_masked = true;
      for (const KernelBlock& kb : c.kernels) {
        if (overlaps(kb.q_rows, q.rows) && overlaps(kb.kv_rows, k.rows)) computed = true, skips_masked = kb.skip_masked_tiles;
      }
      // Visibility under the mask: all, part (the diagonal cuts it) or none.
      std::string state;
      if (!by_unit) {
        switch (c.shape) {
          case BlockShape::full:
          case BlockShape::q_half:
          case BlockShape::kv_half: state = "visible"; break;
          case BlockShape::diagonal: state = "diagonal"; break;
          case BlockShape::masked: state = "masked"; break;
          case BlockShape::skipped: state = "skipped"; break;
          case BlockShape::erratum: state = "erratum"; break;
        }
      } else {
        const bool all = !causal || k.last_unit < q.first_unit, some = all || k.first_unit <= q.last_unit;
        if (!computed) state = some ? "missing" : "skipped";
        else if (c.shape == BlockShape::erratum) state = "erratum";
        else state = all ? "visible" : (some ? "diagonal" : (skips_masked ? "skipped" : "masked"));
      }
      const int64_t rank = plan.rank_at(q.block, 0);
      const Rgb base = colour_by_rank ? palette_colour(q.block, R) : palette_colour(std::max<int64_t>(0, c.step), steps);
      FigureRect rect;
      rect.x = kMargin + j * cell, rect.y = kMargin + i * cell, rect.width = cell, rect.height = cell;
      rect.outline = true;
      rect.css_class = "cell " + state;
      rect.fill = state == "skipped" ? kSkippedColour : state == "masked" ? masked_colour(base) : state == "missing" ? Rgb{255, 0, 0} : base;
      rect.data = {{"q", std::to_string(by_unit ? q.first_unit : q.block)},
                   {"k", std::to_string(by_unit ? k.first_unit : k.block)},
                   {"q-block", std::to_string(q.block)},
                   {"kv-block", std::to_string(k.block)},
                   {"step", std::to_string(c.step)},
                   {"rank", std::to_string(rank)}};
      rect.tooltip = "q " + rect.data[0].second + " x k " + rect.data[1].second + ": " + state +
                     (c.step >= 0 ? ", step " + std::to_string(c.step) : "") + ", ring position " + std::to_string(q.block);
      figure.rects.push_back(rect);
      const double x = rect.x, y = rect.y;
      if (state == "diagonal" || state == "erratum") {
        figure.lines.push_back({x, y, x + cell, y + cell, kMarkerColour, 1.2, "marker diagonal"});
      } else if (state == "skipped") {
        figure.lines.push_back({x + 0.25 * cell, y + 0.25 * cell, x + 0.75 * cell, y + 0.75 * cell, kMarkerColour, 0.8, "marker skipped"});
        figure.lines.push_back({x + 0.75 * cell, y + 0.25 * cell, x + 0.25 * cell, y + 0.75 * cell, kMarkerColour, 0.8, "marker skipped"});
      } else if (state == "masked") {
        for (double f : {0.33, 0.66}) figure.lines.push_back({x, y + f * cell, x + f * cell, y, kMarkerColour, 0.6, "marker masked"});
        figure.lines.push_back({x, y + cell, x + cell, y, kMarkerColour, 0.6, "marker masked"});
      }
    }
  }
  // Legend: the colours, then the marks.
  const double lx = kMargin + N * cell + 20;
  double ly = kMargin;
  const int64_t items = colour_by_rank ? R : steps;
  const int64_t shown = std::min<int64_t>(items, 16);
  figure.texts.push_back({lx, ly - 8, colour_by_rank ? "ring position" : "step", 11, "start"});
  for (int64_t i = 0; i < shown; ++i) {
    FigureRect swatch{lx, ly, 14, 14, palette_colour(i, items), true, "legend", {{"index", std::to_string(i)}}, ""};
    figure.rects.push_back(swatch);
    figure.texts.push_back({lx + 20, ly + 11, std::to_string(i), 10, "start"});
    ly += 18;
  }
  if (shown < items) figure.texts.push_back({lx, ly + 10, "... " + std::to_string(items - shown) + " more", 10, "start"}), ly += 18;
  ly += 10;
  for (const char* mark : {"diagonal: cut by the causal mask", "masked: computed, all masked", "skipped: not computed"}) {
    const bool skipped = mark[0] == 's' && mark[1] == 'k';
    const bool masked = mark[0] == 'm';
    figure.rects.push_back({lx, ly, 14, 14, skipped ? kSkippedColour : masked ? masked_colour(palette_colour(0, items)) : palette_colour(0, items),
                            true, "legend", {}, ""});
    if (skipped) {
      figure.lines.push_back({lx + 3, ly + 3, lx + 11, ly + 11, kMarkerColour, 0.8, "legend"});
      figure.lines.push_back({lx + 11, ly + 3, lx + 3, ly + 11, kMarkerColour, 0.8, "legend"});
    } else {
      figure.lines.push_back({lx, ly, lx + 14, ly + 14, kMarkerColour, 1, "legend"});
    }
    figure.texts.push_back({lx + 20, ly + 11, mark, 10, "start"});
    ly += 18;
  }
  figure.height = std::max(figure.height, ly + 20);
  return figure;
}

// ---- [load bars] -----------------------------------------------------------------------------

namespace {

struct BarPart {
  const char* name;
  Rgb colour;
  double DryRank::*seconds;
};

constexpr BarPart kBarParts[] = {{"compute", {31, 119, 180}, &DryRank::compute_s},
                                 {"other", {127, 127, 127}, &DryRank::other_s},
                                 {"exposed comm", {214, 39, 40}, &DryRank::exposed_comm_s},
                                 {"idle", {210, 210, 210}, &DryRank::idle_s}};

double nice_step(double range) {
  const double raw = range / 5, power = std::pow(10.0, std::floor(std::log10(raw)));
  for (double f : {1.0, 2.0, 5.0, 10.0})
    if (f * power >= raw) return f * power;
  return 10 * power;
}

}  // namespace

Figure load_figure(const Plan& plan, const DryResult& result) {
  const int64_t P = static_cast<int64_t>(result.ranks.size());
  if (P > 256) throw UsageError("a load figure of " + std::to_string(P) + " ranks is too wide; use at most 256 --ranks");
  const double plot_h = 320, bar = std::clamp(640.0 / double(P), 3.0, 40.0);
  Figure figure;
  figure.width = kMargin + P * bar + 200;
  figure.height = kMargin + plot_h + 60;
  figure.title = "per-rank time: " + plan.spec().describe();
  figure.texts.push_back({kMargin, 22, figure.title, 13, "start"});
  const double top = std::max(result.makespan_s, 1e-12);
  const double y0 = kMargin + plot_h;  // the axis
  // Time axis in ms with round ticks.
  const double step_ms = nice_step(top * 1e3);
  for (int tick = 0; double(tick) * step_ms <= top * 1e3 * 1.0001; ++tick) {
    const double t = double(tick) * step_ms;
    const double y = y0 - plot_h * (t / (top * 1e3));
    figure.lines.push_back({kMargin - 4, y, kMargin + P * bar, y, {230, 230, 230}, 0.5, "grid"});
    char label[32];
    std::snprintf(label, sizeof label, "%g", t);
    figure.texts.push_back({kMargin - 8, y + 4, label, 9, "end"});
  }
  figure.texts.push_back({14, kMargin - 10, "ms", 10, "start"});
  for (int64_t r = 0; r < P; ++r) {
    const DryRank& rank = result.ranks[static_cast<size_t>(r)];
    double y = y0;
    for (const BarPart& part : kBarParts) {
      const double seconds = rank.*part.seconds, h = plot_h * seconds / top;
      if (h <= 0) continue;
      y -= h;
      char ms[32];
      std::snprintf(ms, sizeof ms, "%.6g", seconds * 1e3);
      figure.rects.push_back({kMargin + r * bar + 0.1 * bar, y, 0.8 * bar, h, part.colour, false,
                              std::string("bar ") + (part.name[0] == 'e' ? "exposed" : part.name),
                              {{"rank", std::to_string(r)}, {"ms", ms}},
                              "rank " + std::to_string(r) + " " + part.name + " " + ms + " ms"});
    }
    if (P <= 32 || r % (P / 16) == 0) figure.texts.push_back({kMargin + (r + 0.5) * bar, y0 + 14, std::to_string(r), 9, "middle"});
  }
  figure.texts.push_back({kMargin + P * bar / 2, y0 + 32, "rank", 11, "middle"});
  double ly = kMargin;
  const double lx = kMargin + P * bar + 20;
  for (const BarPart& part : kBarParts) {
    figure.rects.push_back({lx, ly, 14, 14, part.colour, true, "legend", {}, ""});
    figure.texts.push_back({lx + 20, ly + 11, part.name, 10, "start"});
    ly += 18;
  }
  return figure;
}

// ---- [timeline] ------------------------------------------------------------------------------

Figure timeline_figure(const Plan& plan, const DryResult& result) {
  const int64_t P = static_cast<int64_t>(result.ranks.size());
  if (P > 64) throw UsageError("a timeline of " + std::to_string(P) + " ranks is too tall; use at most 64 --ranks");
  if (result.trace.empty()) throw std::logic_error("timeline_figure needs a dry run made with DryOptions::trace");
  const double lane = 12, row = 2 * lane + 8, plot_w = 900;
  Figure figure;
  figure.width = kMargin + plot_w + 40;
  figure.height = kMargin + P * row + 60;
  figure.title = "simulated timeline: " + plan.spec().describe();
  figure.texts.push_back({kMargin, 22, figure.title, 13, "start"});
  const double end_us = std::max(result.makespan_s * 1e6, 1e-6);
  int64_t steps = 1;
  for (const Phase& phase : plan.phases()) steps = std::max(steps, phase.steps);
  for (int64_t r = 0; r < P; ++r) {
    figure.texts.push_back({kMargin - 8, kMargin + r * row + lane + 4, "rank " + std::to_string(r), 9, "end"});
  }
  for (const TraceEvent& e : result.trace) {
    const double x = kMargin + plot_w * e.start_us / end_us, w = std::max(0.5, plot_w * e.duration_us / end_us);
    const double y = kMargin + e.rank * row + (e.lane == TraceLane::compute ? 0 : lane + 1);
    Rgb colour = e.lane == TraceLane::compute ? palette_colour(std::max(0, e.step), steps)
                 : e.name == "wait (peer late)" ? Rgb{200, 200, 200}
                 : e.name.starts_with("wait") ? Rgb{30, 30, 30}  // exposed: dark, apart from the step colours
                 : e.name.starts_with("all_") || e.name == "reduce_scatter" ? Rgb{148, 103, 189}
                                                                            : Rgb{255, 187, 120};
    char tip[200];
    std::snprintf(tip, sizeof tip, "rank %d %s step %d: %.3f-%.3f ms", e.rank, e.name.c_str(), e.step, e.start_us / 1e3,
                  (e.start_us + e.duration_us) / 1e3);
    figure.rects.push_back({x, y, w, lane - 1, colour, false,
                            std::string("event ") + (e.lane == TraceLane::compute ? "compute" : "comm"),
                            {{"rank", std::to_string(e.rank)}, {"step", std::to_string(e.step)}, {"name", e.name}}, tip});
  }
  const double step_ms = nice_step(end_us / 1e3);
  for (int tick = 0; double(tick) * step_ms <= end_us / 1e3 * 1.0001; ++tick) {
    const double t = double(tick) * step_ms;
    const double x = kMargin + plot_w * t * 1e3 / end_us;
    figure.lines.push_back({x, kMargin - 4, x, kMargin + P * row, {225, 225, 225}, 0.5, "grid"});
    char label[32];
    std::snprintf(label, sizeof label, "%g", t);
    figure.texts.push_back({x, kMargin + P * row + 14, label, 9, "middle"});
  }
  figure.texts.push_back({kMargin + plot_w / 2, kMargin + P * row + 32, "ms (compute lane above, communication below)", 11, "middle"});
  // Legend under the axis.
  double lx = kMargin;
  const double ly = kMargin + P * row + 44;
  const std::pair<const char*, Rgb> legend[] = {{"compute (colour = step)", palette_colour(0, steps)},
                                                {"transfer", {255, 187, 120}},
                                                {"exposed wait", {30, 30, 30}},
                                                {"waiting for a late peer", {200, 200, 200}},
                                                {"collective", {148, 103, 189}}};
  for (const auto& [name, colour] : legend) {
    figure.rects.push_back({lx, ly, 12, 12, colour, true, "legend", {}, ""});
    figure.texts.push_back({lx + 16, ly + 10, name, 10, "start"});
    lx += 170;
  }
  figure.height = ly + 30;
  return figure;
}

// ---- [svg] -----------------------------------------------------------------------------------

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

}  // namespace

std::string to_svg(const Figure& f) {
  std::ostringstream svg;
  svg << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << number(f.width) << "\" height=\"" << number(f.height)
      << "\" viewBox=\"0 0 " << number(f.width) << " " << number(f.height) << "\" font-family=\"sans-serif\">\n";
  svg << "<title>" << escape(f.title) << "</title>\n";
  svg << "<rect x=\"0\" y=\"0\" width=\"" << number(f.width) << "\" height=\"" << number(f.height)
      << "\" fill=\"#ffffff\" class=\"background\"/>\n";
  for (const FigureRect& r : f.rects) {
    svg << "<rect x=\"" << number(r.x) << "\" y=\"" << number(r.y) << "\" width=\"" << number(r.width) << "\" height=\""
        << number(r.height) << "\" fill=\"" << r.fill.hex() << "\"";
    if (r.outline) svg << " stroke=\"#ffffff\" stroke-width=\"0.5\"";
    if (!r.css_class.empty()) svg << " class=\"" << escape(r.css_class) << "\"";
    for (const auto& [key, value] : r.data) svg << " data-" << key << "=\"" << escape(value) << "\"";
    if (r.tooltip.empty()) {
      svg << "/>\n";
    } else {
      svg << "><title>" << escape(r.tooltip) << "</title></rect>\n";
    }
  }
  for (const FigureLine& l : f.lines) {
    svg << "<line x1=\"" << number(l.x1) << "\" y1=\"" << number(l.y1) << "\" x2=\"" << number(l.x2) << "\" y2=\""
        << number(l.y2) << "\" stroke=\"" << l.colour.hex() << "\" stroke-width=\"" << number(l.width) << "\"";
    if (!l.css_class.empty()) svg << " class=\"" << escape(l.css_class) << "\"";
    svg << "/>\n";
  }
  for (const FigureText& t : f.texts) {
    svg << "<text x=\"" << number(t.x) << "\" y=\"" << number(t.y) << "\" font-size=\"" << number(t.size)
        << "\" text-anchor=\"" << t.anchor << "\">" << escape(t.text) << "</text>\n";
  }
  svg << "</svg>\n";
  return svg.str();
}

}  // namespace ringlab
