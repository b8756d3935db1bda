// ringlab-viz --screenshot under Xvfb (Mesa llvmpipe renders): the PNG has the right pixels where
// the model's own geometry says cells, highlights, nodes and blocks in flight are — a skipped cell
// has the skipped colour, the current step's cells are outlined, a misrouted block is orange.
// The panels' canvases come from the --geometry file the same run writes.
//
// Its main (screenshot_main.cpp) exits 77 (ctest: skipped) when xvfb-run is not installed.
#include <stb_image.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "viz/model/controls.hpp"
#include "viz/model/geometry.hpp"
#include "viz/model/palette.hpp"
#include "viz/model/plan_model.hpp"
#include "viz/model/schedule_model.hpp"

using namespace ringlab;
using namespace ringlab::viz;
namespace fs = std::filesystem;

namespace {

struct Image {
  int width = 0, height = 0;
  std::vector<unsigned char> rgba;
  Rgba at(Vec2 p) const {
    const int x = static_cast<int>(p.x), y = static_cast<int>(p.y);
    REQUIRE(x >= 0);
    REQUIRE(y >= 0);
    REQUIRE(x < width);
    REQUIRE(y < height);
    const size_t i = (static_cast<size_t>(y) * static_cast<size_t>(width) + static_cast<size_t>(x)) * 4;
    return {rgba[i], rgba[i + 1], rgba[i + 2], rgba[i + 3]};
  }
};

struct Shot {
  Image image;
  nlohmann::json geometry;
  Rect canvas(const char* panel) const {
    const auto& c = geometry.at("panels").at(panel).at("canvas");
    return {c[0].get<float>(), c[1].get<float>(), c[2].get<float>(), c[3].get<float>()};
  }
};

// Runs ringlab-viz --screenshot under xvfb-run with `flags`, and reads back the PNG and geometry.
Shot shoot(const std::string& name, const std::string& flags) {
  const fs::path dir = fs::temp_directory_path();
  const std::string stem = "ringlab_viz_" + std::to_string(getpid()) + "_" + name;
  const fs::path png = dir / (stem + ".png"), json = dir / (stem + ".json");
  fs::remove(png);
  // In the sanitizer build, Mesa's dlopen'ed GL driver keeps a few allocations until exit, which
  // LeakSanitizer reports as leaks of an unknown module: not ringlab's (the headless frame-loop
  // tests leak-check the viewer's own code), so leak checking is off for this child only.
  const char* asan = std::getenv("ASAN_OPTIONS");
  const std::string environment = "ASAN_OPTIONS='" + std::string(asan ? asan : "") + ":detect_leaks=0' ";
  const std::string command = environment + "xvfb-run -a -s '-screen 0 1280x1024x24' " +
                              std::string(RINGLAB_VIZ_BINARY) + " --screenshot " + png.string() + " --geometry " +
                              json.string() + " " + flags;
  INFO(command);
  const int raw = std::system(command.c_str());
  REQUIRE(WIFEXITED(raw));
  REQUIRE(WEXITSTATUS(raw) == 0);
  Shot shot;
  int channels = 0;
  unsigned char* pixels = stbi_load(png.c_str(), &shot.image.width, &shot.image.height, &channels, 4);
  REQUIRE(pixels != nullptr);
  shot.image.rgba.assign(pixels,
                         pixels + static_cast<size_t>(shot.image.width) * static_cast<size_t>(shot.image.height) * 4);
  stbi_image_free(pixels);
  std::ifstream in(json);
  shot.geometry = nlohmann::json::parse(in);
  fs::remove(png);
  fs::remove(json);
  return shot;
}

std::string text(Rgba c) {
  return "(" + std::to_string(c.r) + ", " + std::to_string(c.g) + ", " + std::to_string(c.b) + ", " +
         std::to_string(c.a) + ")";
}

#define CHECK_COLOUR(image, point, expected)                                                                         \
  do {                                                                                                               \
    const Rgba found_ = (image).at(point);                                                                           \
    INFO("pixel (" << (point).x << ", " << (point).y << ") is " << text(found_) << ", expected " << text(expected)); \
    CHECK(found_ == (expected));                                                                                     \
  } while (false)

PlanSpec causal_ring(int64_t P) {
  PlanSpec spec;
  spec.ranks = P;
  spec.causal = true;
  return spec;
}

}  // namespace

TEST_CASE("grid screenshot: skipped cells, step colours, dimmed future cells, the current step outlined",
          "[viz][screenshot]") {
  const Shot shot = shoot("grid", "--panel grid --causal --ranks 4 --step 2 --size 800x600");
  REQUIRE(shot.image.width == 800);
  REQUIRE(shot.image.height == 600);
  REQUIRE(shot.geometry.at("grid_blocks") == 4);
  const GridGeometry g = grid_geometry(shot.canvas("grid"), 4);
  const ScheduleModel model = model_from_plan(build_plan(causal_ring(4)));
  const BlockGrid& grid = model.grids[0];
  auto expected = [&](int64_t q, int64_t k) { return cell_colour(model, grid.at(q, k), GridColouring::step, 2); };

  CHECK_COLOUR(shot.image, g.cell_rect(0, 3).centre(), palette::skipped);
  CHECK_COLOUR(shot.image, g.cell_rect(1, 2).centre(), palette::skipped);
  CHECK_COLOUR(shot.image, g.cell_rect(1, 0).centre(), step_colour(1, 4));          // computed at step 1
  CHECK_COLOUR(shot.image, g.cell_rect(3, 0).centre(), dimmed(step_colour(3, 4)));  // not yet: step 3
  CHECK_COLOUR(shot.image, g.cell_rect(2, 0).centre(), expected(2, 0));
  // The current step (2): cells (2,0), (3,1) and the skipped (0,2), (1,3) are outlined.
  for (auto [q, k] : {std::pair{2, 0}, std::pair{3, 1}, std::pair{0, 2}, std::pair{1, 3}}) {
    const Rect top = g.highlight_bands(q, k)[0];
    CHECK_COLOUR(shot.image, (Vec2{top.centre().x, top.y0 + 1}), palette::highlight);
    const Rect left = g.highlight_bands(q, k)[2];
    CHECK_COLOUR(shot.image, (Vec2{left.x0 + 1, left.centre().y}), palette::highlight);
  }
  // Cells of other steps have no outline.
  const Rect other = g.cell_rect(1, 0);
  CHECK_COLOUR(shot.image, (Vec2{other.centre().x, other.y0 + 1}), step_colour(1, 4));
}

TEST_CASE("ring screenshot: each rank's disc has its block's colour, blocks in flight move between ranks",
          "[viz][screenshot]") {
  const Shot shot = shoot("ring", "--panel ring --causal --ranks 4 --step 2.5 --size 700x600");
  const RingGeometry ring = ring_geometry(shot.canvas("ring"), 4);
  for (int64_t g = 0; g < 4; ++g) {
    INFO("rank " << g);
    CHECK_COLOUR(shot.image, ring.node(g, 4, 1), category_colour((g + 2) % 4));  // block g - 2
  }
  // Halfway through step 2, rank 0's block (2) is halfway to rank 1.
  const Vec2 flying = ring.to_canvas(ring_arc_point(0, 1, 0.5f, 4, 1, 0.16f));
  CHECK_COLOUR(shot.image, flying, category_colour(2));
}

TEST_CASE("error screenshot after a run of the reverse-dkv erratum: misrouted blocks in orange",
          "[viz][screenshot][errata]") {
  const Shot shot = shoot("errors",
                          "--panel grid --run --causal --backward --erratum reverse-dkv --ranks 3 --seq 96 "
                          "--colour error --step 6 --size 800x640");
  REQUIRE(shot.geometry.at("grid_blocks") == 3);
  const GridGeometry g = grid_geometry(shot.canvas("grid"), 3);
  // Backward step 1: rank 1 adds block 0's dK/dV into block 2's accumulator.
  CHECK_COLOUR(shot.image, g.cell_rect(1, 0).centre(), palette::error_misrouted);
  CHECK_COLOUR(shot.image, g.cell_rect(2, 1).centre(), palette::error_misrouted);
  // Diagonal blocks are right: measured, within tolerance (lower-left, inside the triangle).
  const Rect diagonal = g.cell_rect(1, 1);
  CHECK_COLOUR(shot.image, (Vec2{diagonal.x0 + 0.3f * diagonal.width(), diagonal.y0 + 0.6f * diagonal.height()}),
               palette::error_ok);
  // The queries' final results are right: the row strips are green.
  CHECK_COLOUR(shot.image, g.row_strip(0).centre(), palette::error_ok);
}

TEST_CASE("grid screenshot: step labels stand out on their cells, dimmed or not", "[viz][screenshot]") {
  const Shot shot = shoot("labels", "--panel grid --causal --ranks 4 --step 1 --size 800x600");
  const GridGeometry g = grid_geometry(shot.canvas("grid"), 4);
  REQUIRE(g.cell >= 40);  // labelled
  const ScheduleModel model = model_from_plan(build_plan(causal_ring(4)));
  const BlockGrid& grid = model.grids[0];
  // (3, 0) and (2, 0) are computed after step 1: dimmed, dark; (1, 0) at step 1, (0, 0) at step 0.
  for (auto [q, k] : {std::pair{3, 0}, std::pair{2, 0}, std::pair{1, 0}, std::pair{0, 0}}) {
    const Rect r = g.cell_rect(q, k);
    const Rgba fill = cell_colour(model, grid.at(q, k), GridColouring::step, 1);
    const Rgba label = text_on(fill);
    int pixels = 0;  // of the label "tN", drawn at (x0 + 4, y1 - 16) in ImGui's 13-pixel font
    for (float y = r.y1 - 16; y < r.y1 - 1; ++y)
      for (float x = r.x0 + 4; x < r.x0 + 20; ++x) pixels += shot.image.at({x, y}) == label ? 1 : 0;
    INFO("cell (" << q << ", " << k << ") filled " << text(fill) << ", label in " << text(label));
    CHECK(pixels >= 8);
  }
}
