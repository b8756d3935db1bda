// The viewer's model from plans: ring positions and held blocks, transfers and collectives, the
// block grid's cells (who computes what, when, with which shape), load, the timeline (the cost
// model's prediction for a hardware preset, as ringlab run --dry-run --hw gives it),
// and where the reverse-dkv and kv-offset-mask errata put their errors — checked against the
// algorithms' definitions and the plan checker, over P in {1, 2, 3, 4, 8}.
#include <algorithm>
#include <catch2/catch.hpp>
#include <numeric>

#include "reference/error.hpp"
#include "sim/plan/check.hpp"
#include "viz/model/geometry.hpp"
#include "viz/model/plan_model.hpp"
#include "viz_test_support.hpp"

using namespace ringlab;
using namespace ringlab::viz;
using ringlab::viz::test::model_of;
using ringlab::viz::test::spec_of;

namespace {

int64_t mod(int64_t a, int64_t n) { return ((a % n) + n) % n; }

bool any_line_contains(const std::vector<std::string>& lines, const std::string& text) {
  for (const std::string& line : lines)
    if (line.find(text) != std::string::npos) return true;
  return false;
}

}  // namespace

TEST_CASE("ring grid: rank q computes key block k at step (q - k) mod P, causal shapes by position", "[viz][model]") {
  const int64_t P = GENERATE(1, 2, 3, 4, 8);
  const ScheduleModel m = model_of(spec_of(Algorithm::ring, LayoutKind::contiguous, P, true));
  REQUIRE(m.grids.size() == 1);
  const BlockGrid& grid = m.grids[0];
  REQUIRE(grid.blocks == P);
  REQUIRE(m.phases[0].name == "ring forward");
  for (int64_t q = 0; q < P; ++q)
    for (int64_t k = 0; k < P; ++k) {
      const GridCell& cell = grid.at(q, k);
      INFO("cell " << q << " x " << k);
      CHECK(cell.planned);
      CHECK(cell.step == mod(q - k, P));
      CHECK(cell.phase_step == mod(q - k, P));
      CHECK(cell.ranks == std::vector<int64_t>{q});
      CHECK(cell.shape == (k > q ? BlockShape::skipped : (k == q ? BlockShape::diagonal : BlockShape::full)));
      CHECK(cell.computed() == (k <= q));
      CHECK(cell.cause == ErrorCause::none);
    }
}

TEST_CASE("ring positions: each rank holds block g - t, K/V travel to g + 1 during step t", "[viz][model]") {
  const int64_t P = GENERATE(1, 2, 3, 4, 8);
  const ScheduleModel m = model_of(spec_of(Algorithm::ring, LayoutKind::contiguous, P, false));
  REQUIRE(m.step_count() == P + 1);  // the ring, then finalize
  for (int64_t t = 0; t < P; ++t) {
    for (int64_t g = 0; g < P; ++g) {
      const RankStep& held = m.rank_steps[g][t];
      CHECK(held.kv_block == mod(g - t, P));
      CHECK(held.computed == mod(g - t, P));
    }
    const std::vector<const Transfer*> moving = m.transfers_at(t);
    CHECK(static_cast<int64_t>(moving.size()) == (t < P - 1 ? P : 0));
    for (const Transfer* transfer : moving) {
      CHECK(transfer->to == mod(transfer->from + 1, P));
      CHECK(transfer->origin == mod(transfer->from - t, P));
      CHECK(transfer->payload == Payload::kv);
    }
  }
  CHECK(m.transfers_at(P).empty());  // finalize moves nothing
  const Vec2 top = ring_node(0, P, 1);
  CHECK(top.x == Approx(0).margin(1e-6));
  CHECK(top.y == Approx(-1));
}

TEST_CASE("zig-zag turns diagonal blocks into half blocks and balances causal work", "[viz][model]") {
  const int64_t P = GENERATE(2, 3, 4, 8);
  const ScheduleModel zigzag = model_of(spec_of(Algorithm::ring, LayoutKind::zigzag, P, true));
  const ScheduleModel contiguous = model_of(spec_of(Algorithm::ring, LayoutKind::contiguous, P, true));
  CHECK(zigzag.load.flops_imbalance() == Approx(1.0).epsilon(1e-9));
  CHECK(contiguous.load.flops_imbalance() > 1.2);
  int halves = 0;
  for (const GridCell& cell : zigzag.grids[0].cells) {
    halves += cell.shape == BlockShape::q_half || cell.shape == BlockShape::kv_half;
    CHECK(cell.computed());  // every pair of zig-zag blocks has visible work
  }
  CHECK(halves == P * (P - 1));

  // Units: block g holds units g and 2P-1-g, so queries of block 0 see block 1's keys only from
  // their late unit: the lower row of the cell.
  const UnitPattern pattern = zigzag.unit_pattern(0, 1);
  REQUIRE(pattern.rows == 2);
  REQUIRE(pattern.cols == 2);
  CHECK(pattern.at(0, 0) == UnitVisibility::none);
  CHECK(pattern.at(0, 1) == UnitVisibility::none);
  CHECK(pattern.at(1, 0) == UnitVisibility::full);
  CHECK(pattern.at(1, 1) == UnitVisibility::full);
  CHECK(zigzag.grids[0].at(0, 1).shape == BlockShape::q_half);
  const UnitPattern diagonal = zigzag.unit_pattern(0, 0);
  CHECK(diagonal.at(0, 0) == UnitVisibility::diagonal);
  CHECK(diagonal.at(1, 0) == UnitVisibility::full);
  CHECK(diagonal.at(0, 1) == UnitVisibility::none);
}

TEST_CASE("all-gather and Ulysses phases are drawn as their collectives", "[viz][model]") {
  SECTION("all-gather: one group of every rank, then each rank holds all blocks") {
    const ScheduleModel m = model_of(spec_of(Algorithm::allgather, LayoutKind::contiguous, 4, false));
    const std::vector<const CollectiveView*> at0 = m.collectives_at(0);
    REQUIRE(at0.size() == 1);
    CHECK(at0[0]->kind == Collective::all_gather_kv);
    CHECK(at0[0]->members == std::vector<int64_t>{0, 1, 2, 3});
    CHECK(m.phases[0].has_collective);
    for (int64_t g = 0; g < 4; ++g) {
      CHECK(m.rank_steps[g][1].kv_block == kAllBlocks);
      CHECK(m.rank_steps[g][1].computed == g);
    }
    CHECK(m.transfers.empty());
  }
  SECTION("Ulysses: an all-to-all over the group, one block computed by every rank for its heads") {
    const ScheduleModel m = model_of(spec_of(Algorithm::ulysses, LayoutKind::contiguous, 4, true));
    REQUIRE(m.ring == 1);
    REQUIRE(m.ulysses == 4);
    const std::vector<const CollectiveView*> at0 = m.collectives_at(0);
    REQUIRE(at0.size() == 1);
    CHECK(at0[0]->kind == Collective::all_to_all_qkv);
    CHECK(at0[0]->members.size() == 4);
    CHECK(m.grids[0].at(0, 0).ranks == std::vector<int64_t>{0, 1, 2, 3});
    CHECK(m.collectives_at(m.step_count() - 1).front()->kind == Collective::all_to_all_out);
  }
  SECTION("hybrid U=2 on 4 ranks: two Ulysses groups, a ring of two; cells shared by a group") {
    const ScheduleModel m = model_of(spec_of(Algorithm::hybrid, LayoutKind::zigzag, 4, true, false, Erratum::none, 2));
    REQUIRE(m.ring == 2);
    CHECK(m.collectives_at(0).size() == 2);
    CHECK(m.grids[0].at(1, 0).ranks == std::vector<int64_t>{2, 3});
    // Ranks of a Ulysses group sit side by side; ring position 1 is opposite position 0.
    CHECK(ring_node(2, 2, 2).y > 0);
    CHECK(ring_node(0, 2, 2).y < 0);
  }
}

TEST_CASE("reverse-dkv erratum: dK/dV of block g-t go into block g+t's accumulator from backward step 1",
          "[viz][model][errata]") {
  const int64_t P = GENERATE(2, 3, 4, 5, 8);
  const ScheduleModel m =
      model_of(spec_of(Algorithm::ring, LayoutKind::contiguous, P, false, true, Erratum::reverse_dkv));
  REQUIRE(m.grids.size() == 2);
  const BlockGrid& backward = m.grids[1];
  REQUIRE(backward.pass == Pass::backward);
  const int64_t first = m.phases[2].first_step;
  int64_t misrouted = 0;
  for (int64_t g = 0; g < P; ++g)
    for (int64_t t = 0; t < P; ++t) {
      const GridCell& cell = backward.at(g, mod(g - t, P));
      INFO("rank " << g << ", backward step " << t);
      CHECK(cell.step == first + t);
      const bool wrong = mod(2 * t, P) != 0;  // the accumulator of g + t is not block g - t's
      CHECK((cell.cause == ErrorCause::misrouted_gradient) == wrong);
      if (wrong) CHECK(cell.misrouted_into == mod(g + t, P));
      misrouted += wrong;
    }
  for (const GridCell& cell : m.grids[0].cells) CHECK(cell.cause == ErrorCause::none);  // forward is right
  if (P == 2) {
    CHECK_FALSE(m.first_error.known());  // invisible at P = 2 (the book's erratum 1)
  } else {
    REQUIRE(m.first_error.known());
    CHECK(m.first_error.step == first + 1);
    CHECK(m.first_error.cause == ErrorCause::misrouted_gradient);
    CHECK(m.first_error.pass == Pass::backward);
    CHECK(m.first_error.text.find("accumulator of block") != std::string::npos);
  }
  // The plan checker finds the same additions, one finding per (rank, step).
  const PlanCheck check =
      check_plan(build_plan(spec_of(Algorithm::ring, LayoutKind::contiguous, P, false, true, Erratum::reverse_dkv)));
  int64_t adds = 0;
  for (const PlanFinding& f : check.findings) adds += f.message.find("adds dK/dV of block") != std::string::npos;
  if (misrouted < 32) CHECK(adds == misrouted);
}

TEST_CASE("kv-offset-mask erratum: block 0 unmasked on rank 0, blocks 1..r hidden on rank r", "[viz][model][errata]") {
  const int64_t P = GENERATE(2, 3, 4);
  const ScheduleModel m =
      model_of(spec_of(Algorithm::ring, LayoutKind::contiguous, P, true, false, Erratum::kv_offset_mask));
  for (const GridCell& cell : m.grids[0].cells) {
    INFO("cell " << cell.q_block << " x " << cell.kv_block);
    CHECK(cell.shape == BlockShape::erratum);
    const bool wrong =
        (cell.q_block == 0 && cell.kv_block == 0) || (cell.kv_block > 0 && cell.kv_block <= cell.q_block);
    CHECK((cell.cause == ErrorCause::wrong_mask) == wrong);
  }
  REQUIRE(m.first_error.known());
  CHECK(m.first_error.step == 0);
  CHECK(m.first_error.q_block == 0);
}

TEST_CASE("load: FLOPs per rank add up to the grid's, cumulative by step, and causal contiguous is unbalanced",
          "[viz][model]") {
  const int64_t P = GENERATE(1, 3, 4, 8);
  const ScheduleModel m = model_of(spec_of(Algorithm::ring, LayoutKind::contiguous, P, true, true));
  double from_ranks = 0, from_cells = 0;
  for (const RankLoad& r : m.load.ranks) {
    from_ranks += r.flops;
    REQUIRE(r.flops_until.size() == static_cast<size_t>(m.step_count()));
    CHECK(r.flops_until.back() == Approx(r.flops));
    CHECK(std::is_sorted(r.flops_until.begin(), r.flops_until.end()));
  }
  for (const BlockGrid& grid : m.grids)
    for (const GridCell& cell : grid.cells) from_cells += cell.flops;
  CHECK(from_ranks == Approx(from_cells));
  for (int64_t g = 0; g < P; ++g) {
    CHECK(m.load.ranks[g].computed == 2 * (g + 1));  // forward and backward
    CHECK(m.load.ranks[g].skipped == 2 * (P - 1 - g));
  }
  CHECK(m.load.flops_max == Approx(m.load.ranks.back().flops));
}

TEST_CASE("plan timeline: three lanes per rank, spans in time order, steps in order", "[viz][model]") {
  const int64_t P = GENERATE(1, 3, 4);
  const ScheduleModel m = model_of(spec_of(Algorithm::ring, LayoutKind::zigzag, P, true, true));
  REQUIRE(m.timeline.rows.size() == static_cast<size_t>(kTimelineLanes * P));
  for (int64_t r = 0; r < P; ++r)
    for (int lane = 0; lane < kTimelineLanes; ++lane) CHECK(m.timeline.row(r, lane).lane == lane);
  CHECK_FALSE(m.timeline.measured);
  CHECK(m.timeline.hardware == kDefaultHardware);
  CHECK(m.timeline.note.empty());
  CHECK(m.timeline.end > 0);
  for (int64_t r = 0; r < P; ++r) {
    const TimelineRow& compute = m.timeline.row(r, 0);
    CHECK(compute.rank == r);
    CHECK(static_cast<int64_t>(compute.spans.size()) == m.load.ranks[r].computed);
    for (size_t i = 1; i < compute.spans.size(); ++i) CHECK(compute.spans[i].start >= compute.spans[i - 1].end);
    CHECK(m.load.ranks[r].busy > 0);
  }
  for (int64_t t = 1; t < m.step_count(); ++t) CHECK(m.steps[t].start >= m.steps[t - 1].start);
  CHECK(m.timeline.end >= m.steps.back().end);
}

TEST_CASE("a cell's tooltip names its rank, step, token ranges, work and error state", "[viz][model]") {
  PlanSpec spec = spec_of(Algorithm::ring, LayoutKind::contiguous, 4, true);
  spec.dims.seq = 64;
  const ScheduleModel m = model_of(spec);
  const std::vector<std::string> lines = m.describe_cell(m.grids[0], 2, 1);
  INFO(lines.size());
  CHECK(any_line_contains(lines, "queries of block 2 (tokens 32-47)"));
  CHECK(any_line_contains(lines, "keys of block 1 (tokens 16-31)"));
  CHECK(any_line_contains(lines, "rank 2"));
  CHECK(any_line_contains(lines, "step 1 (last 4): ring forward, step 1"));
  CHECK(any_line_contains(lines, "FLOP"));
  CHECK(any_line_contains(lines, "no run attached"));
  CHECK(any_line_contains(m.describe_cell(m.grids[0], 0, 3), "skipped"));
  CHECK(m.describe_cell(m.grids[0], 4, 0).empty());
}

TEST_CASE("the model of a plan that does not divide is never built: build_plan refuses it", "[viz][model]") {
  PlanSpec spec = spec_of(Algorithm::ring, LayoutKind::zigzag, 4, true);
  spec.dims.seq = 100;
  CHECK_THROWS_AS(build_plan(spec), UsageError);
}

namespace {

// The direction each payload's neighbour sends take in the plan's own exchange ops (rank 0's
// first send of that payload): +1 to ring position 1, -1 to R - 1.
int plan_direction(const Plan& plan, Payload payload) {
  for (const Op& op : expand(plan, 0))
    if (const auto* exchange = std::get_if<ExchangeOp>(&op.body))
      if (exchange->payload == payload && exchange->send_to >= 0) {
        const int64_t R = plan.ring(), to = plan.ring_position(exchange->send_to);
        return to == 1 ? +1 : to == R - 1 ? -1 : 0;
      }
  return 0;
}

}  // namespace

TEST_CASE("ring panel model: K/V and dK/dV send directions, from the plan's exchanges", "[viz][model]") {
  const Erratum erratum = GENERATE(Erratum::none, Erratum::reverse_dkv);
  const int64_t P = GENERATE(3, 4);
  const Plan plan = build_plan(spec_of(Algorithm::ring, LayoutKind::zigzag, P, true, true, erratum));
  const ScheduleModel m = model_from_plan(plan);
  const int kv = plan_direction(plan, Payload::kv), dkv = plan_direction(plan, Payload::dkv);
  REQUIRE(kv != 0);
  REQUIRE(dkv != 0);
  CHECK((erratum == Erratum::reverse_dkv) == (dkv != kv));  // erratum 1: dK/dV against the K/V direction
  bool saw_backward = false;
  for (int64_t step = 0; step < m.step_count(); ++step) {
    const PhaseView& phase = m.phases[static_cast<size_t>(m.steps[static_cast<size_t>(step)].phase)];
    if (phase.family != Family::ring || !phase.has_compute) continue;
    INFO(m.step_label(step));
    CHECK(ring_direction(m, step, Payload::kv) == kv);
    if (phase.pass == Pass::backward) {
      saw_backward = true;
      CHECK(ring_direction(m, step, Payload::dkv) == dkv);
      const std::string text = ring_direction_text(m, step);
      CHECK(text.find(std::string("dK/dV travel ") + (dkv > 0 ? "clockwise" : "counter-clockwise")) !=
            std::string::npos);
    } else {
      CHECK(ring_direction(m, step, Payload::dkv) == 0);
    }
  }
  CHECK(saw_backward);
}

TEST_CASE("ring panel model: the hops a window lets the ring skip", "[viz][model]") {
  const int64_t P = 4, S = 256, W = GENERATE(40, 100);
  PlanSpec spec = spec_of(Algorithm::ring, LayoutKind::contiguous, P, true);
  spec.dims.seq = S;
  spec.window = W;
  const ScheduleModel m = model_from_plan(build_plan(spec));
  // Under the contiguous layout a rank needs ceil((W - 1) / n) + 1 blocks: that many - 1 hops.
  const int64_t n = S / P, hops = (W - 1 + n - 1) / n;
  INFO("W = " << W << ": " << hops << " hops of " << P - 1);
  const int64_t first = m.phases.front().first_step;
  const HopCount count = kv_hop_count(m, first);
  CHECK(count.full == P - 1);
  CHECK(count.made == hops);
  for (int64_t s = 0; s < m.phases.front().steps; ++s) {
    const std::vector<Hop> skipped = skipped_hops(m, first + s);
    // At step s rank r holds block b = r - s, which goes on while some later rank needs it: to
    // b + hops at most, and never past rank P - 1 (rank 0's queries all come before it).
    std::vector<int64_t> expected;
    for (int64_t r = 0; r < P; ++r) {
      const int64_t b = ((r - s) % P + P) % P;
      if (s + 1 > std::min(hops, P - 1 - b)) expected.push_back(r);
    }
    std::vector<int64_t> got;
    for (const Hop& hop : skipped) {
      CHECK(hop.to == (hop.from + 1) % P);  // the hop a full ring would make
      got.push_back(hop.from);
    }
    CHECK(got == expected);
    if (s == hops) CHECK(skipped.size() == static_cast<size_t>(P));  // the last step: no hop at all
  }
  // A full causal ring skips none.
  const ScheduleModel full = model_from_plan(build_plan(spec_of(Algorithm::ring, LayoutKind::contiguous, P, true)));
  for (int64_t step = 0; step < full.step_count(); ++step) CHECK(skipped_hops(full, step).empty());
  CHECK(kv_hop_count(full, 0).made == P - 1);
}

TEST_CASE("grid model: each block's true mask shape under documents and a window, tokens by document", "[viz][model]") {
  PlanSpec spec = spec_of(Algorithm::ring, LayoutKind::contiguous, 4, true);
  spec.dims.seq = 256;
  spec.window = 100;
  spec.documents = {100, 60, 96};
  const ScheduleModel m = model_from_plan(build_plan(spec));
  const BlockGrid& grid = m.grids.front();
  const int64_t n = 256 / 4, tile = n / 8;  // 8 x 8 sub-tiles of 8 x 8 tokens
  int64_t shaded = 0;
  for (const GridCell& cell : grid.cells) {
    if (!cell.computed()) continue;
    INFO("cell " << cell.q_block << ", " << cell.kv_block);
    const std::vector<ScheduleModel::SubTile> tiles = m.mask_tiles(cell.q_block, cell.kv_block);
    REQUIRE(tiles.size() == 64);
    double seen = 0;
    for (const ScheduleModel::SubTile& t : tiles) seen += t.visible * static_cast<double>(tile * tile);
    CHECK(seen == Approx(static_cast<double>(cell.pairs)));  // the tiles hold exactly the cell's visible pairs
    for (const CellPart& part : cell_parts(m, cell)) {
      shaded += part.kind == CellPartKind::shaded;
      if (part.kind == CellPartKind::hidden) CHECK(part_colour(part, palette::highlight) == palette::masked_out);
      if (part.kind == CellPartKind::visible) CHECK(part_colour(part, palette::highlight) == palette::highlight);
    }
  }
  CHECK(shaded > 0);  // document boundaries and the window's edge cut sub-tiles
  // Tokens by document: block b's runs follow the document boundaries 100 and 160.
  const std::vector<int64_t> starts{0, 100, 160, 256};
  for (int64_t b = 0; b < 4; ++b) {
    std::vector<ScheduleModel::DocumentRun> expected;
    for (int64_t d = 0; d < 3; ++d) {
      const int64_t tokens = std::max<int64_t>(0, std::min(starts[d + 1], (b + 1) * n) - std::max(starts[d], b * n));
      if (tokens > 0) expected.push_back({d, tokens});
    }
    const std::vector<ScheduleModel::DocumentRun> runs = m.block_documents(b);
    REQUIRE(runs.size() == expected.size());
    for (size_t i = 0; i < runs.size(); ++i) {
      CHECK(runs[i].document == expected[i].document);
      CHECK(runs[i].tokens == expected[i].tokens);
    }
  }
  const GridGeometry g = grid_geometry({0, 0, 400, 400}, 4);
  const std::vector<DocumentStrip> strips = document_strips(m, g);
  size_t pieces = 0;
  for (int64_t b = 0; b < 4; ++b) pieces += 2 * m.block_documents(b).size();
  REQUIRE(strips.size() == pieces);
  for (const DocumentStrip& s : strips) CHECK(s.colour == category_colour(s.document));
  // Block 1's row strip: 36 tokens of document 0, then 28 of document 1.
  const Rect row = g.row_strip(1);
  const auto first = std::find_if(strips.begin(), strips.end(),
                                  [&](const DocumentStrip& s) { return s.rect.x0 == row.x0 && s.rect.y0 == row.y0; });
  REQUIRE(first != strips.end());
  CHECK(first->document == 0);
  CHECK(first->rect.height() == Approx(row.height() * 36 / 64));
  // Without documents there are no strips; a causal-only plan keeps its per-unit parts.
  const ScheduleModel causal = model_from_plan(build_plan(spec_of(Algorithm::ring, LayoutKind::zigzag, 4, true)));
  CHECK(document_strips(causal, g).empty());
  CHECK(causal.block_documents(0).size() == 1);
}

TEST_CASE("the load panel's layouts: every layout's FLOP balance, the plan's own marked and equal to its load",
          "[viz][model]") {
  const int64_t P = GENERATE(3, 4, 8);
  for (const LayoutKind chosen : {LayoutKind::contiguous, LayoutKind::zigzag}) {
    const PlanSpec spec = spec_of(Algorithm::ring, chosen, P, true);
    const ScheduleModel m = model_of(spec);
    const std::vector<LayoutBalance> layouts = layout_balances(spec);
    REQUIRE(layouts.size() == 4);
    int marked = 0;
    for (const LayoutBalance& b : layouts) {
      INFO(b.layout << " " << b.why);
      CHECK(b.applies);
      if (!b.chosen) continue;
      ++marked;
      CHECK(b.layout == layout_name(chosen));
      // Counted from the expanded ops; the panel's headline from the model's steps: the same figure.
      CHECK(b.imbalance == Approx(m.load.flops_imbalance()).epsilon(1e-9));
    }
    CHECK(marked == 1);
    CHECK(layouts[0].imbalance > 1.2);                         // contiguous under causal
    CHECK(layouts[1].imbalance == Approx(1.0).epsilon(1e-9));  // zig-zag
    CHECK(layouts[3].imbalance < layouts[0].imbalance);        // balanced
  }
  // A layout that cannot split the sequence says why instead of a number: 33 tokens over 3 ranks
  // are 11 each, but zig-zag needs 2P = 6 chunks.
  PlanSpec odd = spec_of(Algorithm::ring, LayoutKind::contiguous, 3, true);
  odd.dims.seq = 33;
  const std::vector<LayoutBalance> balances = layout_balances(odd);
  CHECK(balances[0].applies);
  CHECK_FALSE(balances[1].applies);
  CHECK_THAT(balances[1].why, Catch::Contains("zigzag"));
}

TEST_CASE("ring panel model: a hop line only at the steps of a ring that moves K/V, true of what is drawn",
          "[viz][model]") {
  const int64_t P = 4;
  SECTION("a full ring: no line, and finalize has no hops to count") {
    PlanSpec spec = spec_of(Algorithm::ring, LayoutKind::contiguous, P, false);
    spec.dims.seq = 256;
    const ScheduleModel m = model_of(spec);
    for (int64_t step = 0; step < m.step_count(); ++step) {
      INFO(m.step_label(step));
      CHECK(kv_hop_text(m, step).empty());
      if (m.phases[static_cast<size_t>(m.steps[static_cast<size_t>(step)].phase)].name == "finalize")
        CHECK(kv_hop_count(m, step).full == 0);
    }
    REQUIRE(m.step_count() == P + 1);  // ringlab-viz --ranks 4 --seq 256 --step 4: finalize
  }
  SECTION("all-gather, causal, with the backward pass: no phase moves K/V between neighbours") {
    const ScheduleModel m = model_of(spec_of(Algorithm::allgather, LayoutKind::contiguous, P, true, true));
    for (int64_t step = 0; step < m.step_count(); ++step) {
      INFO(m.step_label(step));
      CHECK(kv_hop_count(m, step).full == 0);
      CHECK(kv_hop_text(m, step).empty());
    }
  }
  SECTION("a window: the ring's steps say how many hops it makes; dotted ones named where drawn") {
    PlanSpec spec = spec_of(Algorithm::ring, LayoutKind::contiguous, P, true);
    spec.dims.seq = 256;
    spec.window = 40;  // one hop of three
    const ScheduleModel m = model_of(spec);
    const PhaseView& ring = m.phases.front();
    for (int64_t s = 0; s < ring.steps; ++s) {
      const int64_t step = ring.first_step + s;
      INFO(m.step_label(step));
      const std::string text = kv_hop_text(m, step);
      CHECK(text.rfind("K/V hops: 1 of 3", 0) == 0);
      CHECK((text.find("(skipped: dotted, crossed)") != std::string::npos) == !skipped_hops(m, step).empty());
    }
    for (int64_t step = ring.first_step + ring.steps; step < m.step_count(); ++step) {
      INFO(m.step_label(step));
      CHECK(kv_hop_text(m, step).empty());
    }
  }
}
