// The book's figures are checked by content: the SVG is parsed back and known cells must have the
// colour of their step or rank, cells cut by the causal mask must show their visible part,
// skipped and masked cells their own colours, bars and spans the cost model's time; every cell,
// bar and span must have the colour the viewer gives it (viz/model/palette, controls); the PNG
// (when built with stb) is decoded and known pixels checked.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <map>
#include <regex>
#include <sstream>

#include "executors/dry/dry_executor.hpp"
#include "reference/error.hpp"
#include "viz/figures/bitmap_font.hpp"
#include "viz/figures/book_figures.hpp"
#include "viz/model/plan_model.hpp"

#ifdef RINGLAB_HAVE_STB
#define STB_IMAGE_STATIC
#define STB_IMAGE_IMPLEMENTATION
#include <stb_image.h>
#endif

using namespace ringlab;
using namespace ringlab::viz;

namespace {

using Attributes = std::map<std::string, std::string>;

// Every element of a tag (<rect>, <polygon>, ...) of an SVG, with its attributes.
std::vector<Attributes> elements(const std::string& svg, const std::string& tag) {
  std::vector<Attributes> found;
  const std::regex element("<" + tag + " ([^>]*?)/?>");
  const std::regex attribute("([a-zA-Z][a-zA-Z0-9-]*)=\"([^\"]*)\"");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), element); it != std::sregex_iterator(); ++it) {
    Attributes a;
    const std::string body = (*it)[1];
    for (auto at = std::sregex_iterator(body.begin(), body.end(), attribute); at != std::sregex_iterator(); ++at) {
      a[(*at)[1]] = (*at)[2];
    }
    found.push_back(std::move(a));
  }
  return found;
}

std::vector<Attributes> with_class(const std::string& svg, const std::string& tag, const std::string& css_class) {
  std::vector<Attributes> found;
  for (Attributes& a : elements(svg, tag))
    if (a.count("class") && a.at("class") == css_class) found.push_back(std::move(a));
  return found;
}

Attributes cell(const std::string& svg, int q, int k) {
  for (const Attributes& a : elements(svg, "rect")) {
    const auto qa = a.find("data-q"), ka = a.find("data-k");
    if (qa != a.end() && ka != a.end() && qa->second == std::to_string(q) && ka->second == std::to_string(k)) return a;
  }
  FAIL("no cell q=" << q << " k=" << k);
  return {};
}

struct Box {
  double x0 = 0, y0 = 0, x1 = 0, y1 = 0;
  bool holds(double x, double y) const { return x > x0 && x < x1 && y > y0 && y < y1; }
};
Box box_of(const Attributes& rect) {
  const double x = std::stod(rect.at("x")), y = std::stod(rect.at("y"));
  return {x, y, x + std::stod(rect.at("width")), y + std::stod(rect.at("height"))};
}

// The parts (visible, hidden, diagonal) drawn inside a cell: rects and triangles whose centre lies in it.
std::vector<Attributes> parts_in(const std::string& svg, const Attributes& c) {
  const Box b = box_of(c);
  std::vector<Attributes> found;
  for (const Attributes& r : elements(svg, "rect")) {
    if (!r.count("class") || r.at("class").rfind("part ", 0) != 0) continue;
    const Box p = box_of(r);
    if (b.holds((p.x0 + p.x1) / 2, (p.y0 + p.y1) / 2)) found.push_back(r);
  }
  for (const Attributes& t : elements(svg, "polygon")) {
    double x = 0, y = 0, ax = 0, ay = 0;
    std::istringstream points(t.at("points"));
    char comma = 0;
    for (int i = 0; i < 3 && points >> ax >> comma >> ay; ++i) x += ax / 3, y += ay / 3;
    if (b.holds(x, y)) found.push_back(t);
  }
  return found;
}

const Hardware& nvlink() {
  static const Hardware hardware = hardware_preset("h100-nvlink", 8);
  return hardware;
}

Plan causal_ring(LayoutKind layout, int64_t P, bool skip = true) {
  PlanSpec spec;
  spec.layout = layout;
  spec.ranks = P;
  spec.dims = {1, 64, 2, 2, 8};
  spec.causal = true;
  spec.skip = skip;
  spec.element_bytes = nvlink().element_bytes;  // as model_from_plan costs it on that machine
  spec.backward = true;
  return build_plan(spec);
}

}  // namespace

TEST_CASE(
    "grid-step: a contiguous causal ring of 4, cells coloured by step, cut and skipped cells drawn as the viewer does",
    "[viz][figures]") {
  const std::string svg =
      to_svg(grid_figure(model_from_plan(causal_ring(LayoutKind::contiguous, 4)), GridColouring::step, Pass::forward));
  // Rank 3 computes key block 0 at step 3 (K/V move one hop per step), fully visible.
  const Attributes past = cell(svg, 3, 0);
  CHECK(past.at("fill") == hex(step_colour(3, 4)));
  CHECK(past.at("class") == "cell visible");
  CHECK(past.at("data-step") == "3");
  CHECK(past.at("data-rank") == "3");
  CHECK(parts_in(svg, past).empty());
  // The diagonal: computed at step 0 under the mask; its visible part is the triangle below the
  // diagonal, in the step's colour, over the masked-out colour.
  const Attributes diagonal = cell(svg, 2, 2);
  CHECK(diagonal.at("class") == "cell diagonal");
  CHECK(diagonal.at("fill") == hex(palette::masked_out));
  const std::vector<Attributes> parts = parts_in(svg, diagonal);
  REQUIRE(parts.size() == 1);
  CHECK(parts[0].at("class") == "part diagonal");
  CHECK(parts[0].at("fill") == hex(step_colour(0, 4)));
  CHECK(parts[0].at("data-q-unit") == "2");
  const Box b = box_of(diagonal);
  char expected[160];
  std::snprintf(expected, sizeof expected, "%.2f,%.2f %.2f,%.2f %.2f,%.2f", b.x0, b.y0, b.x0, b.y1, b.x1, b.y1);
  CHECK(parts[0].at("points") == expected);
  // The future: skipped, in the viewer's skipped colour, nothing drawn inside.
  const Attributes future = cell(svg, 0, 3);
  CHECK(future.at("class") == "cell skipped");
  CHECK(future.at("fill") == hex(palette::skipped));
  CHECK(parts_in(svg, future).empty());
}

TEST_CASE("grid-rank: colour by the rank that computes; zigzag half blocks show their masked units", "[viz][figures]") {
  // Zigzag over 2 ranks: rank 0 holds units 0 and 3, rank 1 holds units 1 and 2.
  const std::string svg =
      to_svg(grid_figure(model_from_plan(causal_ring(LayoutKind::zigzag, 2)), GridColouring::rank, Pass::forward));
  const Attributes half = cell(svg, 0, 1);  // rank 0's queries x rank 1's keys, at step 1
  CHECK(half.at("class") == "cell half");
  CHECK(half.at("data-step") == "1");
  CHECK(half.at("data-rank") == "0");
  std::map<std::pair<std::string, std::string>, Attributes> units;
  for (const Attributes& part : parts_in(svg, half)) units[{part.at("data-q-unit"), part.at("data-k-unit")}] = part;
  REQUIRE(units.size() == 4);
  // Rank 0's late unit 3 sees rank 1's units 1 and 2; its early unit 0 sees neither: the half
  // block leaves it out.
  CHECK(units.at({"3", "1"}).at("class") == "part visible");
  CHECK(units.at({"3", "1"}).at("fill") == hex(category_colour(0)));
  CHECK(units.at({"3", "2"}).at("class") == "part visible");
  CHECK(units.at({"0", "1"}).at("class") == "part hidden");
  CHECK(units.at({"0", "1"}).at("fill") == hex(palette::masked_out));
  // Computed by rank 1: its colour.
  const Attributes other = cell(svg, 1, 0);
  CHECK(other.at("data-rank") == "1");
  for (const Attributes& part : parts_in(svg, other))
    if (part.at("class") != "part hidden") CHECK(part.at("fill") == hex(category_colour(1)));
}

TEST_CASE("grid: --no-skip computes masked blocks, drawn in the viewer's masked colour", "[viz][figures]") {
  const std::string svg = to_svg(
      grid_figure(model_from_plan(causal_ring(LayoutKind::contiguous, 4, false)), GridColouring::step, Pass::backward));
  const Attributes future = cell(svg, 0, 3);
  CHECK(future.at("class") == "cell masked");
  CHECK(future.at("fill") == hex(palette::masked_computed));
  CHECK(future.at("data-step") == "1");  // rank 0 gets block 3 at backward step 1
  CHECK(parts_in(svg, future).empty());
}

TEST_CASE("every cell of a figure has the colour the viewer gives it", "[viz][figures]") {
  for (LayoutKind layout : {LayoutKind::contiguous, LayoutKind::zigzag, LayoutKind::striped}) {
    const ScheduleModel model = model_from_plan(causal_ring(layout, 4));
    for (GridColouring colouring : {GridColouring::step, GridColouring::rank}) {
      const std::string svg = to_svg(grid_figure(model, colouring, Pass::forward));
      const BlockGrid& grid = *model.grid_of(Pass::forward);
      for (const GridCell& c : grid.cells) {
        const Attributes drawn = cell(svg, static_cast<int>(c.q_block), static_cast<int>(c.kv_block));
        const std::string colour = hex(cell_colour(model, c, colouring, 1 << 30));
        const std::vector<Attributes> parts = parts_in(svg, drawn);
        if (parts.empty()) CHECK(drawn.at("fill") == colour);
        for (const Attributes& part : parts)
          CHECK(part.at("fill") == (part.at("class") == "part hidden" ? hex(palette::masked_out) : colour));
      }
    }
  }
}

TEST_CASE("load bars carry the cost model's busy and blocked time per rank", "[viz][figures]") {
  const Plan plan = causal_ring(LayoutKind::contiguous, 4);
  const ScheduleModel model = model_from_plan(plan, nvlink());
  const DryResult dry = run_dry_plan(plan, nvlink());
  const std::string svg = to_svg(load_figure(model));
  const std::vector<Attributes> busy = with_class(svg, "rect", "bar busy"),
                                blocked = with_class(svg, "rect", "bar blocked");
  REQUIRE(busy.size() == 4);
  REQUIRE(blocked.size() == 4);
  for (const Attributes& a : busy) {
    const size_t r = std::stoul(a.at("data-rank"));
    CHECK(a.at("fill") == hex(palette::busy_bar));
    CHECK(std::stod(a.at("data-ms")) == Approx(model.load.ranks[r].busy * 1e3).epsilon(1e-5));
    CHECK(std::stod(a.at("data-ms")) == Approx(dry.ranks[r].compute_s * 1e3).epsilon(1e-5));  // the dry run's compute
  }
  for (const Attributes& a : blocked) {
    const size_t r = std::stoul(a.at("data-rank"));
    CHECK(a.at("fill") == hex(palette::blocked_bar));
    CHECK(std::stod(a.at("data-ms")) ==
          Approx((dry.ranks[r].exposed_comm_s + dry.ranks[r].idle_s) * 1e3).epsilon(1e-5).margin(1e-9));
  }
  // Contiguous causal: rank 0 computes one block, rank 3 four, so rank 0 waits the longest.
  CHECK(std::stod(blocked[0].at("data-ms")) > std::stod(blocked[3].at("data-ms")));
}

TEST_CASE("the timeline draws every simulated event, in the viewer's span colours", "[viz][figures]") {
  const Plan plan = causal_ring(LayoutKind::zigzag, 4);
  DryOptions options;
  options.trace = true;
  const DryResult dry = run_dry_plan(plan, nvlink(), options);
  const ScheduleModel model = model_from_plan(plan, nvlink());
  const std::string svg = to_svg(timeline_figure(model));
  int events = 0, computes = 0, sends = 0;
  for (const Attributes& a : elements(svg, "rect")) {
    if (a.count("class") == 0 || a.at("class").rfind("event", 0) != 0) continue;
    ++events;
    const std::string kind = a.at("class").substr(6);
    computes += kind == "compute" ? 1 : 0;
    if (kind == "compute") CHECK(a.at("fill") == hex(category_colour(std::stoi(a.at("data-block")))));
    if (kind == "send") {  // a transfer in flight, not a wait: the viewer's send colour
      ++sends;
      CHECK(a.at("fill") == hex(palette::send_span));
    }
    if (kind == "wait") CHECK(a.at("fill") == hex(palette::wait_span));
  }
  CHECK(events == static_cast<int>(dry.trace.size()));
  // The exposed lane: one rect per exposed span of the model, and its lane labelled.
  size_t exposed = 0;
  for (int64_t r = 0; r < model.ranks; ++r) exposed += model.timeline.row(r, kExposedLane).spans.size();
  int exposed_rects = 0;
  for (const Attributes& a : elements(svg, "rect"))
    exposed_rects += a.count("class") && a.at("class").rfind("exposed ", 0) == 0;
  CHECK(exposed_rects == static_cast<int>(exposed));
  CHECK(svg.find(">exposed</text>") != std::string::npos);
  CHECK(svg.find("exposed: waiting on communication instead of computing") != std::string::npos);
  CHECK(computes == 2 * 4 * 4);  // zigzag: every block computed, both passes
  CHECK(sends > 0);
  ScheduleModel empty = model;
  for (TimelineRow& row : empty.timeline.rows) row.spans.clear();
  CHECK_THROWS_AS(timeline_figure(empty), std::logic_error);
}

TEST_CASE("figures refuse sizes they cannot draw", "[viz][figures]") {
  PlanSpec spec;
  spec.ranks = 128;
  spec.dims = {1, 1024, 2, 2, 8};
  CHECK_THROWS_WITH(grid_figure(model_from_plan(build_plan(spec)), GridColouring::step, Pass::forward),
                    Catch::Contains("at most 64"));
  CHECK_THROWS_WITH(check_figure_size(FigureKind::timeline, 8, 65), Catch::Contains("at most 64 --ranks"));
  CHECK_THROWS_WITH(check_figure_size(FigureKind::load, 8, 257), Catch::Contains("at most 256 --ranks"));
  CHECK_NOTHROW(check_figure_size(FigureKind::load, 256, 256));
  spec.ranks = 2;
  CHECK_THROWS_WITH(grid_figure(model_from_plan(build_plan(spec)), GridColouring::step, Pass::backward),
                    Catch::Contains("add --backward"));
  CHECK_THROWS_WITH(parse_figure_kind("pie"), Catch::Contains("grid-step"));
  CHECK(parse_figure_kind("timeline") == FigureKind::timeline);
}

TEST_CASE("PNG: the rasterised grid has the cell colours of the SVG", "[viz][figures][png]") {
  const Figure figure =
      grid_figure(model_from_plan(causal_ring(LayoutKind::contiguous, 4)), GridColouring::step, Pass::forward);
  const std::string path = "/tmp/ringlab_viz_figure_test_grid.png";
  std::string error;
  if (!png_supported()) {
    CHECK_FALSE(write_png(figure, path, error));
    CHECK(error.find("SVG only") != std::string::npos);
    return;
  }
  REQUIRE(write_png(figure, path, error));
#ifdef RINGLAB_HAVE_STB
  int width = 0, height = 0, channels = 0;
  unsigned char* pixels = stbi_load(path.c_str(), &width, &height, &channels, 3);
  REQUIRE(pixels != nullptr);
  CHECK(width == static_cast<int>(std::ceil(figure.width * 2)));
  auto cell_rect = [&](const std::string& q, const std::string& k) -> const FigureRect* {
    for (const FigureRect& r : figure.rects)
      if (r.css_class.rfind("cell ", 0) == 0 && r.data[0].second == q && r.data[1].second == k) return &r;
    return nullptr;
  };
  auto pixel = [&](double x, double y) {  // in SVG units
    const unsigned char* p =
        pixels + (static_cast<size_t>(y * 2) * static_cast<size_t>(width) + static_cast<size_t>(x * 2)) * 3;
    return Rgba{p[0], p[1], p[2], 255};
  };
  const FigureRect* past = cell_rect("3", "0");
  REQUIRE(past != nullptr);
  CHECK(pixel(past->x + past->width / 2, past->y + past->height / 2) == step_colour(3, 4));
  // The diagonal cell: the step's colour below the diagonal, the masked-out colour above it.
  const FigureRect* diagonal = cell_rect("2", "2");
  REQUIRE(diagonal != nullptr);
  CHECK(pixel(diagonal->x + diagonal->width * 0.25, diagonal->y + diagonal->height * 0.75) == step_colour(0, 4));
  CHECK(pixel(diagonal->x + diagonal->width * 0.75, diagonal->y + diagonal->height * 0.25) == palette::masked_out);
  stbi_image_free(pixels);
#endif
  std::remove(path.c_str());
}

TEST_CASE("no text of any figure kind runs past its canvas (conservative glyph widths)", "[viz][figures]") {
  // Plans with long titles and legends: hybrid, packed documents with a window, a backward pass.
  std::vector<Plan> plans;
  plans.push_back(causal_ring(LayoutKind::contiguous, 4));
  plans.push_back(causal_ring(LayoutKind::zigzag, 8));
  PlanSpec hybrid;
  hybrid.algo = Algorithm::hybrid;
  hybrid.layout = LayoutKind::zigzag;
  hybrid.ranks = 4, hybrid.ulysses = 2;
  hybrid.dims = {1, 256, 4, 2, 8};
  hybrid.causal = true;
  plans.push_back(build_plan(hybrid));
  PlanSpec documents;
  documents.ranks = 4;
  documents.dims = {1, 256, 2, 2, 8};
  documents.causal = true;
  documents.window = 40;
  documents.documents = {100, 60, 96};
  documents.backward = true;
  plans.push_back(build_plan(documents));
  for (const Plan& plan : plans) {
    const ScheduleModel model = model_from_plan(plan, nvlink());
    for (const FigureKind kind : {FigureKind::grid_step, FigureKind::grid_rank, FigureKind::load, FigureKind::timeline})
      for (const Pass pass : {Pass::forward, Pass::backward}) {
        if (pass == Pass::backward &&
            (!plan.spec().backward || kind == FigureKind::load || kind == FigureKind::timeline))
          continue;
        const Figure figure = draw_figure(kind, model, pass);
        REQUIRE_FALSE(figure.texts.empty());
        for (const FigureText& text : figure.texts) {
          const TextBox box = text_box(text);
          INFO(figure_kind_name(kind) << " of " << plan.spec().describe() << ": '" << text.text << "' spans x "
                                      << box.x0 << " .. " << box.x1 << ", y " << box.y0 << " .. " << box.y1
                                      << " on a canvas of " << figure.width << " x " << figure.height);
          CHECK(box.x0 >= 0);
          CHECK(box.y0 >= 0);
          CHECK(box.x1 <= figure.width);
          CHECK(box.y1 <= figure.height);
        }
      }
  }
  // The estimate is conservative: at least the PNG's bitmap font (0.6 of the size a character),
  // more for capitals and wide letters; a middle anchor centres it; a rotated text turns its box.
  const FigureText title{0, 20, "diagonal: cut by the causal mask", 10};
  CHECK(text_box(title).x1 >= BitmapFont::kAdvance * static_cast<double>(title.text.size()));
  const FigureText capitals{0, 20, "MWMW", 10};
  CHECK(text_box(capitals).x1 == Approx(40));
  const FigureText centred{100, 20, "ABCD", 10, "middle"};
  CHECK(text_box(centred).x0 == Approx(100 - 2 * 8));
  const FigureText rotated{20, 100, "busy", 10, "middle", palette::paper::text, -90};
  const TextBox up = text_box(rotated);
  CHECK(up.x1 - up.x0 == Approx(10.5));  // 0.8 above and 0.25 below the baseline, turned sideways
  CHECK(up.y1 - up.y0 == Approx(text_box({0, 0, "busy", 10}).x1));
}

TEST_CASE("PNG: text is drawn, glyph by glyph, where the SVG puts it", "[viz][figures][png]") {
  if (!png_supported()) return;
  Figure figure;
  figure.width = 60, figure.height = 40;
  figure.texts.push_back({10, 30, "E", 20});  // a font pixel is 2 units = 4 PNG pixels
  const std::string path = "/tmp/ringlab_viz_figure_test_text.png";
  std::string error;
  REQUIRE(write_png(figure, path, error));
#ifdef RINGLAB_HAVE_STB
  int width = 0, height = 0, channels = 0;
  unsigned char* pixels = stbi_load(path.c_str(), &width, &height, &channels, 3);
  REQUIRE(pixels != nullptr);
  auto pixel = [&](double x, double y) {  // in SVG units
    const unsigned char* p =
        pixels + (static_cast<size_t>(y * 2) * static_cast<size_t>(width) + static_cast<size_t>(x * 2)) * 3;
    return Rgba{p[0], p[1], p[2], 255};
  };
  // Font pixel (row, column) of the glyph is the square at x = 10 + 2 column, y = 30 - 14 + 2 row.
  auto lit = [&](int row, int column) { return pixel(10 + 2 * column + 1, 16 + 2 * row + 1) == palette::paper::text; };
  const BitmapFont::Glyph& e = bitmap_glyph('E');
  int lit_pixels = 0;
  for (int row = 0; row < BitmapFont::kRows; ++row)
    for (int column = 0; column < BitmapFont::kColumns; ++column) {
      INFO("row " << row << " column " << column);
      CHECK(lit(row, column) == static_cast<bool>(e[static_cast<size_t>(row)] & (0x10 >> column)));
      lit_pixels += lit(row, column);
    }
  CHECK(lit_pixels > 10);
  CHECK(pixel(40, 10) == palette::paper::background);
  stbi_image_free(pixels);
#endif
  std::remove(path.c_str());

  // A book figure's title is drawn: its box holds text-coloured pixels.
  const Figure grid =
      grid_figure(model_from_plan(causal_ring(LayoutKind::contiguous, 4)), GridColouring::step, Pass::forward);
  REQUIRE(write_png(grid, path, error));
#ifdef RINGLAB_HAVE_STB
  pixels = stbi_load(path.c_str(), &width, &height, &channels, 3);
  REQUIRE(pixels != nullptr);
  const TextBox title = text_box(grid.texts.front());
  int inked = 0;
  for (double y = title.y0; y < title.y1; y += 0.5)
    for (double x = title.x0; x < title.x1; x += 0.5) inked += pixel(x, y) == grid.texts.front().colour;
  CHECK(inked > 100);
  stbi_image_free(pixels);
#endif
  std::remove(path.c_str());
}

TEST_CASE("the precision figure keeps ratios below 1x on its chart and its legend shows each line's style",
          "[viz][figures]") {
  const std::vector<ErrorSeries> series = {
      {"out, accumulate fp32", palette::compute_span, false, 2, {{1, 1.0}, {2, 1.3}, {4, 1.2}}},
      {"out, accumulate storage", palette::compute_span, true, 2, {{1, 1.0}, {2, 1.4}, {4, 1.9}}},
      {"out, accumulate fused", palette::compute_span, false, 1, {{1, 1.0}, {2, 0.8}, {4, 0.6}}}};
  const Figure figure = precision_figure("error against P", series);
  // Every point between the chart's top and the P labels under it, in order of its ratio.
  double labels_top = 1e300;
  for (const FigureText& t : figure.texts)
    if (t.text == "1" || t.text == "2" || t.text == "4") labels_top = std::min(labels_top, text_box(t).y0);
  std::map<std::string, double> y_of_ratio;
  for (const FigureRect& r : figure.rects) {
    if (r.css_class != "point") continue;
    INFO(r.tooltip);
    CHECK(r.y >= 0);
    CHECK(r.y + r.height <= labels_top);
    y_of_ratio[r.tooltip.substr(r.tooltip.rfind(", ") + 2)] = r.y;
  }
  CHECK(y_of_ratio.at("0.6x") > y_of_ratio.at("0.8x"));
  CHECK(y_of_ratio.at("0.8x") > y_of_ratio.at("1x"));
  // The accumulations share the tensor's colour: the legend tells them apart by the line drawn,
  // dashed for the dashed series and thin for the thin one.
  int dashed = 0, thin = 0, solid = 0;
  for (const FigureLine& l : figure.lines) {
    if (l.css_class == "legend dashed") ++dashed;
    if (l.css_class == "legend") ++(l.width == 1 ? thin : solid);
  }
  CHECK(dashed == 3);
  CHECK(thin == 1);
  CHECK(solid == 1);
  for (const FigureText& text : figure.texts) {
    const TextBox box = text_box(text);
    CHECK(box.x1 <= figure.width);
    CHECK(box.y1 <= figure.height);
  }
}
