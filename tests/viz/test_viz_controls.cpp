// The viewer's UI-free interaction state: playback, zoom and pan, the layout geometry that the
// view and the screenshot test share, the controls' round trip to a PlanSpec, cell colours, and
// the help topics.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstring>
#include <limits>

#include "reference/error.hpp"
#include "viz/model/controls.hpp"
#include "viz/model/geometry.hpp"
#include "viz_test_support.hpp"

using namespace ringlab;
using namespace ringlab::viz;

TEST_CASE("playback: play to the end and stop, step forward and back, scrub, restart", "[viz][controls]") {
  Playback p;
  p.set_steps(5);
  CHECK(p.last() == 4);
  p.toggle();
  CHECK(p.playing);
  p.speed = 2;
  p.advance(0.75);
  CHECK(p.position == Approx(1.5));
  CHECK(p.step() == 1);
  CHECK(p.fraction() == Approx(0.5f));
  p.advance(10);
  CHECK(p.position == 4);
  CHECK_FALSE(p.playing);
  p.toggle();  // from the end: starts over
  CHECK(p.playing);
  CHECK(p.position == 0);
  p.scrub(2.25);
  p.step_back();
  CHECK(p.position == 2);
  CHECK_FALSE(p.playing);
  p.step_back();
  CHECK(p.position == 1);
  p.step_forward();
  p.step_forward();
  p.step_forward();
  p.step_forward();
  CHECK(p.position == 4);
  p.scrub(-3);
  CHECK(p.position == 0);
  p.scrub(99);
  CHECK(p.position == 4);
  p.set_steps(3);  // a smaller schedule: the position is clamped
  CHECK(p.position == 2);
  p.reset();
  CHECK(p.position == 0);
  Playback single;
  single.set_steps(1);
  single.toggle();
  CHECK_FALSE(single.playing);  // nothing to play
}

TEST_CASE("time window: zoom keeps the time under the mouse, pan stays inside the run", "[viz][controls]") {
  const Rect area{100, 0, 600, 50};
  TimeWindow w;
  w.fit(10);
  CHECK(w.begin == 0);
  CHECK(w.end == 10);
  const double anchor = 7.0;
  const float before = w.to_x(anchor, area);
  w.zoom(anchor, 4, 10);
  CHECK(w.end - w.begin == Approx(2.5));
  CHECK(w.to_x(anchor, area) == Approx(before));
  CHECK(w.to_time(before, area) == Approx(anchor));
  w.pan(100, 10);
  CHECK(w.end == Approx(10));
  w.pan(-100, 10);
  CHECK(w.begin == Approx(0));
  w.zoom(5, 0.001, 10);  // zooming out stops at the whole run
  CHECK(w.begin == Approx(0));
  CHECK(w.end == Approx(10));
}

TEST_CASE("grid geometry: cells tile a square matrix, hit tests find them, highlights sit inside", "[viz][geometry]") {
  const int64_t R = GENERATE(1, 3, 4, 8);
  const Rect canvas{10, 20, 810, 620};
  const GridGeometry g = grid_geometry(canvas, R);
  CHECK(g.matrix.width() == g.matrix.height());
  CHECK(g.matrix.x0 >= canvas.x0 + GridGeometry::kMargin);
  CHECK(g.matrix.x1 <= canvas.x1);
  CHECK(g.matrix.y1 <= canvas.y1);
  for (int64_t q = 0; q < R; ++q)
    for (int64_t k = 0; k < R; ++k) {
      const Rect cell = g.cell_rect(q, k);
      int64_t hit_q = -1, hit_k = -1;
      REQUIRE(g.hit(cell.centre(), hit_q, hit_k));
      CHECK(hit_q == q);
      CHECK(hit_k == k);
      for (const Rect& band : g.highlight_bands(q, k)) {
        CHECK(band.x0 >= cell.x0);
        CHECK(band.x1 <= cell.x1);
        CHECK(band.y0 >= cell.y0);
        CHECK(band.y1 <= cell.y1);
        CHECK_FALSE(band.contains(cell.centre()));
      }
      CHECK(cell.x0 == static_cast<float>(static_cast<int>(cell.x0)));  // whole pixels
    }
  int64_t q = 0, k = 0;
  CHECK_FALSE(g.hit({canvas.x0 + 1, canvas.y0 + 1}, q, k));
}

TEST_CASE("ring geometry: clockwise from the top, arcs go the short way", "[viz][geometry]") {
  CHECK(ring_node(1, 4, 1).x == Approx(1));
  CHECK(ring_node(2, 4, 1).y == Approx(1));
  const Vec2 start = ring_arc_point(3, 0, 0, 4, 1, 0), end = ring_arc_point(3, 0, 1, 4, 1, 0);
  CHECK(start.x == Approx(-1));
  CHECK(end.y == Approx(-1));
  const Vec2 middle = ring_arc_point(3, 0, 0.5f, 4, 1, 0);  // through the upper left, not across
  CHECK(middle.x < 0);
  CHECK(middle.y < 0);
  const RingGeometry ring = ring_geometry({0, 0, 400, 300}, 4);
  CHECK(ring.radius > 0);
  CHECK(ring.node(0, 4, 1).y == Approx(ring.centre.y - ring.radius));
}

TEST_CASE("schedule controls round-trip through a PlanSpec", "[viz][controls]") {
  PlanSpec spec = test::spec_of(Algorithm::hybrid, LayoutKind::zigzag, 8, true, true, Erratum::none, 2);
  spec.dims.kv_heads = 4;
  spec.skip = false;
  const ScheduleControls controls = ScheduleControls::from_spec(spec);
  const PlanSpec back = controls.spec();
  CHECK(back.algo == spec.algo);
  CHECK(back.layout == spec.layout);
  CHECK(back.ranks == 8);
  CHECK(back.ulysses == 2);
  CHECK(back.dims.seq == spec.dims.seq);
  CHECK(back.dims.heads == spec.dims.heads);
  CHECK(back.dims.kv_heads == 4);
  CHECK(back.causal);
  CHECK_FALSE(back.skip);
  CHECK(back.backward);
  CHECK(ScheduleControls::from_spec(back) == controls);
  ScheduleControls errata;
  errata.erratum = 1;
  CHECK(errata.spec().erratum == Erratum::reverse_dkv);
}

TEST_CASE("cell colours: skipped keeps its colour, future cells are dimmed, errors by cause", "[viz][controls]") {
  const ScheduleModel m =
      test::model_of(test::spec_of(Algorithm::ring, LayoutKind::contiguous, 4, true, true, Erratum::reverse_dkv));
  const BlockGrid& forward = m.grids[0];
  CHECK(cell_colour(m, forward.at(0, 3), GridColouring::step, 0) == palette::skipped);
  CHECK(cell_colour(m, forward.at(0, 3), GridColouring::error, 9) == palette::skipped);
  const Rgba past = cell_colour(m, forward.at(1, 0), GridColouring::step, 1);
  CHECK(past == step_colour(1, 4));
  CHECK(cell_colour(m, forward.at(1, 0), GridColouring::step, 0) == dimmed(step_colour(1, 4)));
  CHECK(cell_colour(m, forward.at(3, 0), GridColouring::rank, 9) == category_colour(3));
  const BlockGrid& backward = m.grids[1];
  const GridCell& misrouted = backward.at(1, 0);  // rank 1 at backward step 1
  REQUIRE(misrouted.cause == ErrorCause::misrouted_gradient);
  CHECK(cell_colour(m, misrouted, GridColouring::error, 99) == palette::error_misrouted);
  CHECK(cell_colour(m, backward.at(0, 0), GridColouring::error, 99) == palette::error_unknown);
  CHECK(error_colour(0.5) == palette::error_ok);
  CHECK(error_colour(1e9) == palette::error_wrong);
  CHECK(error_colour(std::numeric_limits<double>::quiet_NaN()) == palette::error_wrong);
  CHECK_FALSE(category_colour(3) == category_colour(13));
}

TEST_CASE("every panel has a help marker pointing to a book chapter", "[viz][controls]") {
  const std::vector<std::string> chapters{"book/ring-attention.md", "book/causal-balance.md", "book/ulysses-hybrid.md",
                                          "book/backward.md", "book/cost-model.md"};
  for (int p = 0; p < static_cast<int>(Panel::count); ++p) {
    const HelpTopic topic = help_topic(static_cast<Panel>(p));
    INFO(panel_name(static_cast<Panel>(p)));
    CHECK(std::find(chapters.begin(), chapters.end(), topic.chapter) != chapters.end());
    CHECK(std::strlen(topic.text) > 40);
    CHECK(parse_panel(panel_name(static_cast<Panel>(p))) == static_cast<Panel>(p));
  }
  CHECK_THROWS_AS(parse_panel("gird"), UsageError);
  CHECK_THROWS_AS(parse_colouring("blue"), UsageError);
  CHECK(parse_colouring("error") == GridColouring::error);
}
