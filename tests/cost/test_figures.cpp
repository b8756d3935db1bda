// Figures are checked by content: the SVG is parsed back and known cells must have the colour of
// their step or rank, skipped and masked cells must be marked, bars must carry the dry run's
// figures; the PNG (when built with stb) is decoded and a known cell's pixel checked.
#include <catch2/catch.hpp>

#include <cstdio>
#include <fstream>
#include <map>
#include <regex>

#include "sim/cost/figures.hpp"

#ifdef RINGLAB_HAVE_STB
#define STB_IMAGE_STATIC
#define STB_IMAGE_IMPLEMENTATION
#include <stb_image.h>
#endif

using namespace ringlab;

namespace {

using Attributes = std::map<std::string, std::string>;

// Every <rect> / <line> element of an SVG with its attributes.
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

Attributes cell(const std::string& svg, int q, int k) {
  for (const Attributes& a : elements(svg, "rect")) {
    const auto qa = a.find("data-q"), ka = a.find("data-k");
    if (qa != a.end() && ka != a.end() && qa->second == std::to_string(q) && ka->second == std::to_string(k)) return a;
  }
  FAIL("no cell q=" << q << " k=" << k);
  return {};
}

// Marker lines whose midpoint lies inside a cell's square.
int markers_in(const std::string& svg, const Attributes& c, const std::string& kind) {
  const double x = std::stod(c.at("x")), y = std::stod(c.at("y")), w = std::stod(c.at("width"));
  int count = 0;
  for (const Attributes& l : elements(svg, "line")) {
    if (l.count("class") == 0 || l.at("class") != "marker " + kind) continue;
    const double mx = (std::stod(l.at("x1")) + std::stod(l.at("x2"))) / 2;  // the line's midpoint
    const double my = (std::stod(l.at("y1")) + std::stod(l.at("y2"))) / 2;
    count += (mx > x && mx < x + w && my > y && my < y + w) ? 1 : 0;
  }
  return count;
}

Plan causal_ring(LayoutKind layout, int64_t P, bool skip = true) {
  PlanSpec spec;
  spec.layout = layout;
  spec.ranks = P;
  spec.dims = {1, 64, 2, 2, 8};
  spec.causal = true;
  spec.skip = skip;
  spec.backward = true;
  return build_plan(spec);
}

}  // namespace

TEST_CASE("grid-step: a contiguous causal ring of 4, cells coloured by step, skipped and diagonal marked", "[cost][figures]") {
  const std::string svg = to_svg(block_grid_figure(causal_ring(LayoutKind::contiguous, 4), false, Pass::forward));
  // Rank 3 computes key block 0 at step 3 (K/V move one hop per step), fully visible.
  const Attributes past = cell(svg, 3, 0);
  CHECK(past.at("fill") == palette_colour(3, 4).hex());
  CHECK(past.at("class") == "cell visible");
  CHECK(past.at("data-step") == "3");
  // The diagonal: computed at step 0 under the mask.
  const Attributes diagonal = cell(svg, 2, 2);
  CHECK(diagonal.at("fill") == palette_colour(0, 4).hex());
  CHECK(diagonal.at("class") == "cell diagonal");
  CHECK(markers_in(svg, diagonal, "diagonal") == 1);
  // The future: skipped, grey, crossed.
  const Attributes future = cell(svg, 0, 3);
  CHECK(future.at("class") == "cell skipped");
  CHECK(future.at("fill") == kSkippedColour.hex());
  CHECK(markers_in(svg, future, "skipped") == 2);
  CHECK(markers_in(svg, past, "skipped") == 0);
}

TEST_CASE("grid-rank: colour by the rank that computes; zigzag half blocks skip their masked units", "[cost][figures]") {
  // Zigzag over 2 ranks: rank 0 holds units 0 and 3, rank 1 holds units 1 and 2.
  const std::string svg = to_svg(block_grid_figure(causal_ring(LayoutKind::zigzag, 2), true, Pass::forward));
  const Attributes late = cell(svg, 3, 1);  // rank 0's late unit sees rank 1's unit 1
  CHECK(late.at("fill") == palette_colour(0, 2).hex());
  CHECK(late.at("class") == "cell visible");
  CHECK(late.at("data-step") == "1");
  const Attributes early = cell(svg, 0, 1);  // rank 0's early unit: the half block leaves it out
  CHECK(early.at("class") == "cell skipped");
  CHECK(cell(svg, 2, 1).at("fill") == palette_colour(1, 2).hex());  // computed by rank 1
  CHECK(cell(svg, 2, 1).at("data-rank") == "1");
}

TEST_CASE("grid: --no-skip computes masked blocks, drawn pale and hatched", "[cost][figures]") {
  const std::string svg = to_svg(block_grid_figure(causal_ring(LayoutKind::contiguous, 4, false), false, Pass::backward));
  const Attributes future = cell(svg, 0, 3);
  CHECK(future.at("class") == "cell masked");
  CHECK(future.at("fill") == masked_colour(palette_colour(1, 4)).hex());  // rank 0 gets block 3 at step 1
  CHECK(markers_in(svg, future, "masked") == 3);
}

TEST_CASE("load bars carry the dry run's per-rank figures", "[cost][figures]") {
  const Plan plan = causal_ring(LayoutKind::contiguous, 4);
  const DryResult result = run_dry_plan(plan, hardware_preset("h100-nvlink", 8));
  const std::string svg = to_svg(load_figure(plan, result));
  int bars = 0;
  for (const Attributes& a : elements(svg, "rect")) {
    if (a.count("class") == 0 || a.at("class") != "bar compute") continue;
    ++bars;
    const size_t r = std::stoul(a.at("data-rank"));
    CHECK(std::stod(a.at("data-ms")) == Approx(result.ranks[r].compute_s * 1e3).epsilon(1e-5));
  }
  CHECK(bars == 4);
}

TEST_CASE("the timeline draws every simulated event", "[cost][figures]") {
  const Plan plan = causal_ring(LayoutKind::zigzag, 4);
  DryOptions options;
  options.trace = true;
  const DryResult result = run_dry_plan(plan, hardware_preset("h100-nvlink", 8), options);
  const std::string svg = to_svg(timeline_figure(plan, result));
  int events = 0, computes = 0;
  for (const Attributes& a : elements(svg, "rect")) {
    if (a.count("class") == 0 || a.at("class").rfind("event", 0) != 0) continue;
    ++events;
    computes += a.at("class") == "event compute" ? 1 : 0;
  }
  CHECK(events == static_cast<int>(result.trace.size()));
  CHECK(computes == 2 * 4 * 4);  // zigzag: every block computed, both passes
  CHECK_THROWS(timeline_figure(plan, run_dry_plan(plan, hardware_preset("h100-nvlink", 8))));
}

TEST_CASE("figures refuse sizes they cannot draw", "[cost][figures]") {
  PlanSpec spec;
  spec.ranks = 128;
  spec.dims = {1, 1024, 2, 2, 8};
  CHECK_THROWS_WITH(block_grid_figure(build_plan(spec), false, Pass::forward), Catch::Contains("at most 64"));
  spec.ranks = 2;
  CHECK_THROWS_WITH(block_grid_figure(build_plan(spec), false, Pass::backward), Catch::Contains("add --backward"));
  CHECK_THROWS_WITH(parse_figure_kind("pie"), Catch::Contains("grid-step"));
}

TEST_CASE("PNG: the rasterised grid has the cell colours of the SVG", "[cost][figures][png]") {
  const Figure figure = block_grid_figure(causal_ring(LayoutKind::contiguous, 4), false, Pass::forward);
  const std::string path = "/tmp/ringlab_cost_test_grid.png";
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
  const FigureRect* target = nullptr;
  for (const FigureRect& r : figure.rects)
    if (r.css_class == "cell visible" && r.data[0].second == "3" && r.data[1].second == "0") target = &r;
  REQUIRE(target != nullptr);
  const int x = static_cast<int>((target->x + target->width / 2) * 2), y = static_cast<int>((target->y + target->height / 2) * 2);
  const unsigned char* p = pixels + (static_cast<size_t>(y) * width + x) * 3;
  CHECK(Rgb{p[0], p[1], p[2]} == palette_colour(3, 4));
  stbi_image_free(pixels);
#endif
  std::remove(path.c_str());
}
