// What keeps the viewer responsive and its schedule faithful, without a UI: the controls carry
// every schedule flag (--full-ring), re-plans stay cheap at any S (the load panel's layout
// balances, the model's token lists), the ring-position limit of the command line, a block grid
// that fits its canvas at any P, and the legend of the error colouring.
#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>

#include "reference/error.hpp"
#include "sim/pipeline/config.hpp"
#include "sim/plan/queries.hpp"
#include "viz/model/controls.hpp"
#include "viz/model/geometry.hpp"
#include "viz/model/plan_model.hpp"
#include "viz_test_support.hpp"

using namespace ringlab;
using namespace ringlab::viz;

namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// The balance of `spec`'s problem under `kind` as layout_balances computed it for every size
// before it was bounded: the layout's plan, expanded rank by rank.
double expanded_balance(PlanSpec spec, LayoutKind kind) {
  if (kind != spec.layout) spec.block = 0;
  spec.layout = kind;
  const Plan plan = build_plan(spec);
  std::vector<RankWork> work;
  for (int64_t r = 0; r < plan.ranks(); ++r) work.push_back(rank_work(plan, r, expand(plan, r)));
  return flops_balance(work).ratio;
}

}  // namespace

TEST_CASE("the controls carry --full-ring and padded heads: the viewer plans what ringlab plan shows",
          "[viz][controls]") {
  PlanSpec spec = test::spec_of(Algorithm::ring, LayoutKind::contiguous, 8, true);
  spec.dims.seq = 8192;
  spec.window = 1024;
  spec.full_ring = true;
  const ScheduleControls controls = ScheduleControls::from_spec(spec);
  CHECK(controls.full_ring);
  CHECK(controls.spec().full_ring);
  // A window of one block: the ring stops after 2 steps; the full ring makes all 8.
  CHECK(build_plan(controls.spec()).phases().front().steps == 8);
  PlanSpec stopping = spec;
  stopping.full_ring = false;
  CHECK(build_plan(ScheduleControls::from_spec(stopping).spec()).phases().front().steps == 2);
  CHECK_FALSE(ScheduleControls::from_spec(stopping) == controls);  // a change re-plans
  // Every other field of the spec a command line sets comes back as it went in.
  spec.skip = false;
  spec.backward = true;
  spec.block = 256;
  spec.documents = {4096, 4096};
  const PlanSpec back = ScheduleControls::from_spec(spec).spec();
  CHECK(back.full_ring);
  CHECK_FALSE(back.skip);
  CHECK(back.backward);
  CHECK(back.block == 256);
  CHECK(back.window == 1024);
  CHECK(back.documents == spec.documents);

  // Heads that do not divide over U: the controls show the user's H = 6 and plan ringlab plan's
  // H = 6 with 2 padding heads (H = 8 on the ranks), not a problem of 8 real heads.
  PlanSpec heads = test::spec_of(Algorithm::ulysses, LayoutKind::contiguous, 4, false);
  heads.dims.heads = heads.dims.kv_heads = 6;
  pad_heads(heads);
  REQUIRE(heads.padding_heads == 2);
  const ScheduleControls shown = ScheduleControls::from_spec(heads);
  CHECK(shown.heads == 6);
  CHECK(shown.kv_heads == 0);
  const PlanSpec planned = shown.spec();
  CHECK(planned.dims.heads == 8);
  CHECK(planned.dims.kv_heads == 8);
  CHECK(planned.padding_heads == 2);
  CHECK(planned.describe() == heads.describe());
}

TEST_CASE("layout balances: the same figures as every layout's expanded plan at ordinary sizes", "[viz][model]") {
  struct Case {
    Algorithm algo;
    LayoutKind layout;
    int64_t P, S, window;
  };
  // Up to the bound: striped at S = kMaxBalanceUnits is one token a unit, still weighed.
  for (const Case& c : {Case{Algorithm::ring, LayoutKind::contiguous, 4, 1024, 0},
                        Case{Algorithm::ring, LayoutKind::zigzag, 8, 8192, 1024},
                        Case{Algorithm::hybrid, LayoutKind::contiguous, 8, 4096, 0},
                        Case{Algorithm::ring, LayoutKind::contiguous, 4, kMaxBalanceUnits, 0}}) {
    PlanSpec spec =
        test::spec_of(c.algo, c.layout, c.P, true, false, Erratum::none, c.algo == Algorithm::hybrid ? 2 : 1);
    spec.dims.seq = c.S;
    spec.window = c.window;
    INFO("P=" << c.P << " S=" << c.S << " W=" << c.window);
    const std::vector<LayoutBalance> balances = layout_balances(spec);
    REQUIRE(balances.size() == 4);
    for (const LayoutBalance& b : balances) {
      INFO(b.layout << ": " << b.why);
      REQUIRE(b.applies);
      CHECK(b.imbalance == Approx(expanded_balance(spec, parse_layout(b.layout))).epsilon(1e-12));
    }
  }
  // The figures the load panel shows for the default causal problem (P = 4, S = 1024).
  PlanSpec spec = test::spec_of(Algorithm::ring, LayoutKind::contiguous, 4, true);
  spec.dims.seq = 1024;
  const std::vector<LayoutBalance> balances = layout_balances(spec);
  CHECK(balances[0].imbalance == Approx(1.75).epsilon(1e-3));
  CHECK(balances[1].imbalance == Approx(1.0).epsilon(1e-9));
}

TEST_CASE("layout balances at S = 10^8 and 2 x 10^9 are instant; a layout too fine to weigh says why", "[viz][model]") {
  for (const auto& [layout, S] : {std::pair{LayoutKind::contiguous, int64_t{100'000'000}},
                                  std::pair{LayoutKind::zigzag, int64_t{2'000'000'000}}}) {
    PlanSpec spec = test::spec_of(Algorithm::ring, layout, 4, true);
    spec.dims.seq = S;
    const auto start = std::chrono::steady_clock::now();
    const std::vector<LayoutBalance> balances = layout_balances(spec);
    CHECK(seconds_since(start) < 2.0);  // was 20 s and 1.4 GB at 10^8 (striped: S units of one token)
    REQUIRE(balances.size() == 4);
    CHECK(balances[0].applies);
    CHECK(balances[0].imbalance == Approx(1.75).epsilon(1e-3));
    CHECK(balances[1].applies);
    CHECK_FALSE(balances[2].applies);  // striped
    CHECK_THAT(balances[2].why,
               Catch::Contains("too many to weigh") && Catch::Contains("ringlab plan --layout striped"));
    CHECK(balances[3].applies);
  }
}

TEST_CASE("a plan's model at S = 2^23 lists no tokens but their ranges; ordinary sizes still do", "[viz][model]") {
  PlanSpec spec = test::spec_of(Algorithm::ring, LayoutKind::zigzag, 4, true);
  spec.dims.seq = int64_t{1} << 23;
  const ScheduleModel big = test::model_of(spec);
  CHECK(big.block_positions.empty());  // 2 M positions a block: past kMaxModelTokens
  REQUIRE(big.block_tokens.size() == 4);
  CHECK(big.block_tokens[0] == "0-1048575, 7340032-8388607");  // zig-zag: chunks 0 and 2P-1
  // Ordinary sizes keep them: a window's cells are drawn in their true shapes from them.
  PlanSpec window = test::spec_of(Algorithm::ring, LayoutKind::contiguous, 4, true);
  window.window = 8;
  const ScheduleModel small = test::model_of(window);
  REQUIRE(small.block_positions.size() == 4);
  CHECK(small.block_positions[1].front() == 16);
  CHECK(small.block_tokens[1] == "16-31");
  CHECK_FALSE(small.mask_tiles(1, 0).empty());
}

TEST_CASE("the viewer's limits: 512 ring positions, 4096 ranks, 2^21 layout units; one line with the fix",
          "[viz][model]") {
  CHECK_NOTHROW(check_viewer_limits(build_plan(test::spec_of(Algorithm::ring, LayoutKind::contiguous, 512, false))));
  CHECK_THROWS_WITH(check_viewer_limits(build_plan(test::spec_of(Algorithm::ring, LayoutKind::contiguous, 600, false))),
                    Catch::Contains("at most 512 ring positions") && Catch::Contains("this plan has 600"));
  // Striped S = 10^8: 10^8 units of one token, refused before its model is built; a larger block is drawn.
  PlanSpec striped = test::spec_of(Algorithm::ring, LayoutKind::striped, 4, true);
  striped.dims.seq = 100'000'000;
  CHECK_THROWS_WITH(check_viewer_limits(build_plan(striped)),
                    Catch::Contains("at most 2097152 layout units") && Catch::Contains("larger --block"));
  striped.block = 1000;
  CHECK_NOTHROW(check_viewer_limits(build_plan(striped)));
  // Hybrid: P = 1024 ranks on a ring of 512 positions is drawn.
  CHECK_NOTHROW(check_viewer_limits(
      build_plan(test::spec_of(Algorithm::hybrid, LayoutKind::contiguous, 1024, false, false, Erratum::none, 2))));
}

TEST_CASE("grid geometry: the matrix fits its canvas at any P, in whole pixels while cells have two",
          "[viz][geometry]") {
  const Rect canvas{600, 40, 1112, 600};  // the dashboard's grid canvas at 1600 x 1000
  for (const int64_t blocks : {4, 32, 230, 300, 512}) {
    INFO(blocks << " blocks");
    const GridGeometry g = grid_geometry(canvas, blocks);
    CHECK(g.matrix.x1 <= canvas.x1);
    CHECK(g.matrix.y1 <= canvas.y1);
    const Rect last = g.cell_rect(blocks - 1, blocks - 1);
    CHECK(last.x1 <= canvas.x1);
    CHECK(last.y1 <= canvas.y1);
    CHECK(g.cell > 0);
    if (g.cell >= 2) CHECK(g.cell == std::floor(g.cell));
    int64_t q = -1, k = -1;  // the last cell is still found under the mouse
    CHECK(g.hit(last.centre(), q, k));
    CHECK(q == blocks - 1);
    CHECK(k == blocks - 1);
  }
  CHECK(grid_geometry(canvas, 4).cell == 117);  // floor((512 - 34 - 8) / 4)  // ordinary sizes: unchanged
}

TEST_CASE("the error colouring's legend names every colour and mark the grid draws in it", "[viz][controls]") {
  const std::vector<LegendSwatch> legend = error_legend();
  auto named = [&](SwatchShape shape, Rgba colour) {
    for (const LegendSwatch& s : legend)
      if (s.shape == shape && s.colour == colour && std::string(s.label).size() > 2) return true;
    return false;
  };
  CHECK(named(SwatchShape::fill, palette::error_ok));
  CHECK(named(SwatchShape::fill, palette::error_unknown));
  CHECK(named(SwatchShape::fill, palette::error_misrouted));
  CHECK(named(SwatchShape::fill, palette::error_wrong));
  CHECK(named(SwatchShape::fill, error_colour(2.0)));  // the darkest red cell_colour gives a wrong result
  CHECK(named(SwatchShape::fill, dimmed(palette::error_misrouted)));
  CHECK(named(SwatchShape::fill, palette::skipped));
  CHECK(named(SwatchShape::corner, palette::error_wrong));
  CHECK(named(SwatchShape::outline, palette::highlight));  // yellow: an outline, not the orange fill
  CHECK(named(SwatchShape::outline, palette::error_wrong));
  CHECK(named(SwatchShape::strip, palette::error_ok));
  CHECK(named(SwatchShape::strip, palette::error_wrong));
}

TEST_CASE("the ring panel's help names the accumulators' shape as drawn: outlined diamonds", "[viz][controls]") {
  const std::string text = help_topic(Panel::ring).text;
  CHECK(text.find("outlined diamonds") != std::string::npos);  // panel_ring.cpp draws them so
  CHECK(text.find("squares") == std::string::npos);
}
