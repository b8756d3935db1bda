// A plan's timeline is the cost model's prediction (sim/cost: run_dry_plan's simulated trace) for
// the chosen hardware, converted as a run's trace is: its spans are the dry executor's events, it
// ends at the dry executor's makespan, busy and blocked are its compute and exposed + idle time,
// and switching the preset (or a JSON machine file) changes it. The model's deadlock findings
// come from the shared plan walk.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "executors/dry/dry_executor.hpp"
#include "reference/error.hpp"
#include "sim/cost/hardware.hpp"
#include "viz/model/plan_model.hpp"
#include "viz_test_support.hpp"

using namespace ringlab;
using namespace ringlab::viz;
using ringlab::viz::test::spec_of;

namespace {

// What `ringlab run --dry-run --hw` runs: the plan at the machine's element size.
DryResult dry_run_of(const PlanSpec& given, const Hardware& hardware) {
  PlanSpec spec = given;
  spec.element_bytes = hardware.element_bytes;
  DryOptions options;
  options.trace = true;
  return run_dry_plan(build_plan(spec), hardware, options);
}

}  // namespace

TEST_CASE("a plan's timeline is the cost model's for the preset: its events, busy, blocked and makespan",
          "[viz][model][cost]") {
  const Algorithm algo = GENERATE(Algorithm::ring, Algorithm::allgather, Algorithm::hybrid);
  const int64_t P = GENERATE(1, 4, 8);
  const std::string preset = GENERATE("h100-nvlink", "h100-ib", "h100-pcie");
  const PlanSpec spec =
      spec_of(algo, LayoutKind::zigzag, P, true, true, Erratum::none, algo == Algorithm::hybrid ? 2 : 1);
  if (algo == Algorithm::hybrid && P == 1) return;
  INFO(spec.describe() << " on " << preset);
  const Hardware hardware = hardware_preset(preset, spec.dims.dim);
  const ScheduleModel m = model_from_plan(build_plan(spec), preset);
  const DryResult dry = dry_run_of(spec, hardware);
  CHECK_FALSE(m.timeline.measured);
  CHECK(m.timeline.hardware == hardware.name);
  CHECK(time_source(m.timeline) == "the cost model's prediction for " + hardware.name);
  CHECK(m.timeline.end == Approx(dry.makespan_s).epsilon(1e-12));
  REQUIRE(m.load.ranks.size() == dry.ranks.size());
  size_t compute_events = 0;
  for (const TraceEvent& e : dry.trace) compute_events += e.lane == TraceLane::compute;
  size_t compute_spans = 0, spans = 0;
  for (int64_t r = 0; r < P; ++r) {
    const DryRank& d = dry.ranks[static_cast<size_t>(r)];
    CHECK(m.load.ranks[static_cast<size_t>(r)].busy == Approx(d.compute_s).epsilon(1e-12));
    CHECK(m.load.ranks[static_cast<size_t>(r)].blocked ==
          Approx(d.exposed_comm_s + d.idle_s).epsilon(1e-12).margin(1e-15));
    for (int lane = 0; lane < 2; ++lane)
      for (const Span& span : m.timeline.row(r, lane).spans) {
        CHECK(span.end <= dry.makespan_s * (1 + 1e-12));
        CHECK(span.step >= 0);  // every event of the cost model names its phase and step
        ++spans;
        compute_spans += lane == 0;
      }
  }
  CHECK(spans == dry.trace.size());
  CHECK(compute_spans == compute_events);
  // Each compute span is the cost model's event for that block, at its time.
  for (const TraceEvent& e : dry.trace) {
    if (e.lane != TraceLane::compute) continue;
    bool found = false;
    for (const Span& span : m.timeline.row(e.rank, 0).spans)
      found |= span.block == e.kv_block && std::abs(span.start - e.start_us * 1e-6) < 1e-12 &&
               std::abs(span.end - (e.start_us + e.duration_us) * 1e-6) < 1e-12;
    CHECK(found);
  }
}

TEST_CASE("switching the hardware changes the plan's timeline; a JSON machine file works as --hw does",
          "[viz][model][cost]") {
  const PlanSpec spec = spec_of(Algorithm::ring, LayoutKind::zigzag, 8, true, true);
  const Plan plan = build_plan(spec);
  const ScheduleModel nvlink = model_from_plan(plan);  // the default: h100-nvlink
  const ScheduleModel pcie = model_from_plan(plan, "h100-pcie");
  CHECK(nvlink.timeline.hardware == "h100-nvlink");
  CHECK(pcie.timeline.hardware == "h100-pcie");
  CHECK(pcie.timeline.end > nvlink.timeline.end * 1.05);  // PCIe moves K/V more slowly
  CHECK(pcie.timeline.end ==
        Approx(dry_run_of(spec, hardware_preset("h100-pcie", spec.dims.dim)).makespan_s).epsilon(1e-12));
  // The schedule itself does not depend on the machine.
  REQUIRE(nvlink.grids.size() == pcie.grids.size());
  for (size_t i = 0; i < nvlink.grids[0].cells.size(); ++i)
    CHECK(nvlink.grids[0].cells[i].step == pcie.grids[0].cells[i].step);
  CHECK(nvlink.transfers.size() == pcie.transfers.size());

  // A machine described in JSON: a slower H100 link.
  Hardware slow = hardware_preset("h100-nvlink", spec.dims.dim);
  slow.name = "slow-link";
  slow.intra_node.bandwidth_Bps /= 20;
  const std::filesystem::path file =
      std::filesystem::temp_directory_path() / ("ringlab_viz_hw_" + std::to_string(getpid()) + ".json");
  std::ofstream(file) << to_json(slow).dump();
  const ScheduleModel custom = model_from_plan(plan, file.string());
  std::filesystem::remove(file);
  CHECK(custom.timeline.hardware == "slow-link");
  CHECK(custom.timeline.end == Approx(dry_run_of(spec, slow).makespan_s).epsilon(1e-12));
  CHECK(custom.timeline.end > nvlink.timeline.end);
  CHECK_THROWS_AS(model_from_plan(plan, "h100-nvlnk"), UsageError);
}

TEST_CASE("transfers and collectives carry the cost model's times", "[viz][model][cost]") {
  SECTION("ring: every transfer is the cost model's send of that tag") {
    const ScheduleModel m = test::model_of(spec_of(Algorithm::ring, LayoutKind::contiguous, 4, false, true));
    REQUIRE_FALSE(m.transfers.empty());
    for (const Transfer& t : m.transfers) {
      CHECK(t.tag >= 0);
      CHECK(t.end > t.start);
      // A transfer starts when its step does (up to rounding: the step's start is the previous
      // step's last end, summed in another order than the sender's clock).
      CHECK(t.start >= m.steps[static_cast<size_t>(t.step)].start - 1e-12 * m.timeline.end);
      CHECK(t.end <= m.timeline.end);
    }
  }
  SECTION("all-gather: the collective's time is its members' event") {
    const ScheduleModel m = test::model_of(spec_of(Algorithm::allgather, LayoutKind::contiguous, 4, false));
    REQUIRE(m.collectives.size() == 1);
    CHECK(m.collectives[0].end > m.collectives[0].start);
    bool drawn = false;
    for (const Span& span : m.timeline.row(0, 1).spans)
      drawn |=
          span.kind == SpanKind::collective && span.start == m.collectives[0].start && span.end == m.collectives[0].end;
    CHECK(drawn);
  }
}

TEST_CASE("a plan too large to draw keeps the cost model's totals and says why its rows are empty",
          "[viz][model][cost]") {
  const PlanSpec spec = spec_of(Algorithm::ring, LayoutKind::contiguous, 300, false);
  const ScheduleModel m = test::model_of(spec);
  CHECK_FALSE(m.timeline.note.empty());
  for (const TimelineRow& row : m.timeline.rows) CHECK(row.spans.empty());
  CHECK(m.timeline.end > 0);
  CHECK(m.load.ranks[0].busy > 0);
  CHECK(m.grids[0].at(3, 1).planned);  // the walk still fills the grid
}

TEST_CASE("a plan that deadlocks: the model names each blocked rank and is still drawn", "[viz][model]") {
  const PlanSpec spec = spec_of(Algorithm::ring, LayoutKind::zigzag, 4, true, true);
  std::vector<Phase> phases = build_plan(spec).phases();
  std::get<ExchangeT>(phases[0].body[1].op).sends = false;  // nobody sends K/V
  const ScheduleModel m = model_from_plan(Plan(spec, phases));
  int64_t deadlocked = 0;
  for (const PlanFinding& f : m.findings) {
    if (f.message.find("(deadlock)") == std::string::npos) continue;
    ++deadlocked;
    CHECK(f.rank >= 0);
    CHECK(f.message.find("never completes: it waits for rank " + std::to_string((f.rank + 3) % 4)) !=
          std::string::npos);
  }
  CHECK(deadlocked == 4);  // every rank waits for its left neighbour
  CHECK(m.step_count() > 0);
  CHECK(m.timeline.rows.size() == static_cast<size_t>(4 * kTimelineLanes));
}

TEST_CASE("the exposed lane is the cost model's exposed communication, rank by rank", "[viz][model][cost]") {
  const Algorithm algo = GENERATE(Algorithm::ring, Algorithm::allgather, Algorithm::hybrid);
  const std::string preset = GENERATE("h100-nvlink", "h100-ib", "h100-pcie");
  const PlanSpec spec =
      spec_of(algo, LayoutKind::zigzag, 4, true, true, Erratum::none, algo == Algorithm::hybrid ? 2 : 1);
  INFO(spec.describe() << " on " << preset);
  const Hardware hardware = hardware_preset(preset, spec.dims.dim);
  const ScheduleModel m = model_from_plan(build_plan(spec), preset);
  const DryResult dry = dry_run_of(spec, hardware);
  for (int64_t r = 0; r < 4; ++r) {
    double exposed = 0;
    const TimelineRow& row = m.timeline.row(r, kExposedLane);
    for (const Span& span : row.spans) {
      exposed += span.end - span.start;
      CHECK((span.kind == SpanKind::wait || span.kind == SpanKind::collective));
      for (const Span& busy : m.timeline.row(r, kComputeLane).spans)  // never while computing
        CHECK((span.end <= busy.start + 1e-15 || span.start >= busy.end - 1e-15));
    }
    CHECK(exposed == Approx(dry.ranks[static_cast<size_t>(r)].exposed_comm_s).epsilon(1e-9).margin(1e-15));
  }
  const std::vector<LegendEntry> legend = timeline_legend(m);
  REQUIRE_FALSE(legend.empty());
  CHECK(legend.front().kind == SpanKind::compute);
  CHECK(legend.back().label.rfind("exposed", 0) == 0);
}

TEST_CASE("exposed spans: waits and collectives less compute time, no wait for a late peer", "[viz][model]") {
  TimelineRow compute{0, kComputeLane, {}};
  compute.spans.push_back({0, 1, SpanKind::compute, 0, 0, -1, "attention"});
  compute.spans.push_back({2, 3, SpanKind::compute, 1, 1, -1, "attention"});
  TimelineRow comm{0, kCommLane, {}};
  comm.spans.push_back({0.5, 2.5, SpanKind::wait, 1, kNoBlock, 1, "wait"});
  comm.spans.push_back({3, 3.5, SpanKind::wait, 2, kNoBlock, 1, "wait (peer late)"});
  comm.spans.push_back({3, 4, SpanKind::send, 2, 0, 1, "send kv -> rank 1"});
  comm.spans.push_back({4, 5, SpanKind::collective, 3, kNoBlock, -1, "all_to_all"});
  const std::vector<Span> exposed = exposed_spans(compute, comm);
  REQUIRE(exposed.size() == 2);
  CHECK(exposed[0].start == 1);
  CHECK(exposed[0].end == 2);
  CHECK(exposed[0].kind == SpanKind::wait);
  CHECK(exposed[1].start == 4);
  CHECK(exposed[1].kind == SpanKind::collective);
}
