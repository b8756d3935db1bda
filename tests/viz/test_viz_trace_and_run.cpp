// The model of a trace (the same grid and ring as the plan's, measured time), malformed traces
// (one clear line), and live runs: a correct schedule verifies clean; the reverse-dkv erratum
// shows every block right on its own, the misrouted blocks, the wrong key blocks and the step
// where the error enters; kv-offset-mask shows blocks wrong on their own.
#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>

#include "executors/sim/sim_executor.hpp"
#include "reference/error.hpp"
#include "reference/inputs.hpp"
#include "sim/pipeline/trace.hpp"
#include "sim/ranks/world_options.hpp"
#include "tests/plan/plan_cases.hpp"
#include "viz/model/live_run.hpp"
#include "viz/model/trace_model.hpp"
#include "viz_test_support.hpp"

using namespace ringlab;
using namespace ringlab::viz;
using ringlab::viz::test::spec_of;

namespace {

std::vector<TraceEvent> traced_run(const PlanSpec& spec) {
  const Plan plan = build_plan(spec);
  const AttentionInputs<float> inputs = make_inputs(spec.dims, 0, spec.backward);
  SimExecutor sim(make_world_options(static_cast<int>(spec.ranks), 10, {}, false), 1);
  ExecuteOptions traced;
  traced.trace = true;
  ExecutionResult result = sim.execute(plan, inputs, traced);
  REQUIRE(!result.failure);
  return std::move(result.trace);
}

}  // namespace

TEST_CASE("a trace's model has the plan's grid, held blocks and transfers, in measured time", "[viz][trace]") {
  const int64_t P = GENERATE(1, 3, 4);
  const LayoutKind layout = GENERATE(LayoutKind::contiguous, LayoutKind::zigzag);
  const PlanSpec spec = spec_of(Algorithm::ring, layout, P, true);
  const ScheduleModel plan = viz::test::model_of(spec);
  // Through the JSON text, as a file would be read.
  const std::vector<TraceEvent> events =
      parse_chrome_trace(chrome_trace_json(traced_run(spec), static_cast<int>(P)), "run.json");
  const ScheduleModel trace = model_from_trace(events, "run.json");
  CHECK(trace.source == SourceKind::trace);
  CHECK(trace.ranks == P);
  CHECK(trace.ring == P);
  CHECK(trace.timeline.measured);
  REQUIRE(trace.phases.size() >= 1);
  CHECK(trace.phases[0].name == "ring forward");
  CHECK(trace.phases[0].steps == P);
  const BlockGrid& a = plan.grids[0];
  const BlockGrid& b = trace.grids[0];
  for (int64_t q = 0; q < P; ++q)
    for (int64_t k = 0; k < P; ++k) {
      INFO("cell " << q << " x " << k);
      const GridCell& from_plan = a.at(q, k);
      const GridCell& from_trace = b.at(q, k);
      CHECK(from_trace.planned == from_plan.computed());  // skipped blocks make no event
      if (!from_plan.computed()) continue;
      CHECK(from_trace.step == from_plan.step);
      CHECK(from_trace.shape == from_plan.shape);
      CHECK(from_trace.ranks == from_plan.ranks);
      CHECK(from_trace.flops == Approx(from_plan.flops));
    }
  for (int64_t r = 0; r < P; ++r) {
    CHECK(trace.load.ranks[r].flops == Approx(plan.load.ranks[r].flops));
    CHECK(trace.load.ranks[r].busy > 0);
  }
  CHECK(trace.transfers.size() == static_cast<size_t>(P * (P - 1)));
  for (const Transfer& t : trace.transfers) {
    CHECK(t.to == (t.from + 1) % P);
    if (t.origin >= 0) CHECK(t.origin == ((t.from - t.step) % P + P) % P);
  }
}

TEST_CASE("a trace with the backward pass has both grids and knows dK/dV messages", "[viz][trace]") {
  const PlanSpec spec = spec_of(Algorithm::ring, LayoutKind::zigzag, 3, true, true);
  const ScheduleModel trace = model_from_trace(traced_run(spec), "bwd.json");
  REQUIRE(trace.grids.size() == 2);
  CHECK(trace.grids[1].pass == Pass::backward);
  int dkv = 0;
  for (const Transfer& t : trace.transfers) dkv += t.payload == Payload::dkv;
  CHECK(dkv == 3 * 3);  // R sends of dK/dV per rank: one extra hop home
}

TEST_CASE("malformed or unreadable traces give one clear line", "[viz][trace]") {
  auto message_of = [](auto&& load) -> std::string {
    try {
      load();
    } catch (const UsageError& error) {
      return error.what();
    }
    return "";
  };
  const std::string bad_json = message_of([] { parse_chrome_trace("{\"traceEvents\": [", "bad.json"); });
  CHECK(bad_json.find("bad.json") != std::string::npos);
  CHECK(bad_json.find('\n') == std::string::npos);
  const std::string missing = message_of([] { read_chrome_trace("/nonexistent/trace.json"); });
  CHECK(missing.find("cannot open") != std::string::npos);
  const std::string empty = message_of([] { model_from_trace({}, "empty.json"); });
  CHECK(empty.find("empty.json") != std::string::npos);
  TraceEvent no_step;
  no_step.name = "compute";
  no_step.lane = TraceLane::compute;
  const std::vector<TraceEvent> events{no_step};
  const std::string stepless = message_of([&] { model_from_trace(events, "nosteps.json"); });
  CHECK(stepless.find("no event has a \"step\"") != std::string::npos);
  TraceEvent huge = no_step;
  huge.step = 0;
  huge.q_block = 100000;
  huge.kv_block = 0;
  const std::vector<TraceEvent> too_big{huge};
  CHECK(message_of([&] { model_from_trace(too_big, "big.json"); }).find("big.json") != std::string::npos);
  TraceEvent far = no_step;
  far.step = 2000000000;  // a step count that would need gigabytes
  const std::vector<TraceEvent> too_long{far};
  CHECK(message_of([&] { model_from_trace(too_long, "long.json"); }).find("more than the viewer holds") !=
        std::string::npos);
}

TEST_CASE("small run specs keep the blocks, units and shapes of the plan on screen", "[viz][run]") {
  PlanSpec spec = spec_of(Algorithm::ring, LayoutKind::zigzag, 4, true);
  spec.dims = {8, 65536, 32, 8, 128};
  const PlanSpec small = small_run_spec(spec);
  CHECK(small.dims.seq <= 512);
  CHECK(small.dims.batch == 1);
  CHECK(small.dims.heads <= 16);
  const ScheduleModel big = viz::test::model_of(spec), run = viz::test::model_of(small);
  REQUIRE(big.grids[0].blocks == run.grids[0].blocks);
  for (size_t i = 0; i < big.grids[0].cells.size(); ++i)
    CHECK(big.grids[0].cells[i].shape == run.grids[0].cells[i].shape);
  PlanSpec striped = spec_of(Algorithm::ring, LayoutKind::striped, 4, true);
  striped.dims.seq = 1 << 20;
  CHECK_THROWS_AS(small_run_spec(striped), UsageError);
}

TEST_CASE("a live run of a correct schedule verifies clean", "[viz][run]") {
  const RunOutcome outcome = run_schedule(spec_of(Algorithm::ring, LayoutKind::zigzag, 4, true, true));
  INFO(outcome.error);
  REQUIRE(outcome.ok);
  const ScheduleModel& m = outcome.model;
  CHECK(m.source == SourceKind::run);
  CHECK(m.timeline.measured);
  CHECK(m.diagnosis.present);
  CHECK(m.diagnosis.verified);
  CHECK_FALSE(m.first_error.known());
  for (const BlockResult& b : m.diagnosis.blocks) {
    CHECK(b.query_ok);
    CHECK(b.key_ok);
  }
}

TEST_CASE("a live run of the reverse-dkv erratum shows the wrong blocks and where the error enters",
          "[viz][run][errata]") {
  const int64_t P = GENERATE(3, 4);
  const ScheduleModel m =
      run_schedule(spec_of(Algorithm::ring, LayoutKind::contiguous, P, true, true, Erratum::reverse_dkv)).model;
  REQUIRE(m.diagnosis.present);
  CHECK_FALSE(m.diagnosis.verified);
  CHECK(m.diagnosis.summary.find("WRONG") == 0);
  // Every block is right on its own: the error is in where dK/dV are added.
  int64_t measured = 0, misrouted = 0;
  for (const BlockGrid& grid : m.grids)
    for (const GridCell& cell : grid.cells) {
      measured += cell.measured;
      misrouted += cell.cause == ErrorCause::misrouted_gradient;
      CHECK(cell.cause != ErrorCause::wrong_result);
    }
  CHECK(measured > 0);
  CHECK(misrouted > 0);
  CHECK(m.diagnosis.wrong_cells == 0);
  REQUIRE(m.first_error.known());
  CHECK(m.first_error.cause == ErrorCause::misrouted_gradient);
  CHECK(m.first_error.step == m.phases[2].first_step + 1);
  int64_t wrong_keys = 0;
  for (const BlockResult& b : m.diagnosis.blocks) {
    CHECK(b.query_ok);  // out and dq are right
    wrong_keys += !b.key_ok;
  }
  CHECK(wrong_keys > 0);
  const std::vector<std::string> lines = m.describe_cell(m.grids[1], m.first_error.q_block, m.first_error.kv_block);
  bool says_where = false;
  for (const std::string& line : lines) says_where |= line.find("accumulator of block") != std::string::npos;
  CHECK(says_where);
}

TEST_CASE("a live run of the kv-offset-mask erratum shows blocks wrong on their own", "[viz][run][errata]") {
  const ScheduleModel m =
      run_schedule(spec_of(Algorithm::ring, LayoutKind::contiguous, 3, true, false, Erratum::kv_offset_mask)).model;
  REQUIRE(m.diagnosis.present);
  CHECK_FALSE(m.diagnosis.verified);
  CHECK(m.diagnosis.wrong_cells > 0);
  for (const GridCell& cell : m.grids[0].cells)
    if (cell.cause == ErrorCause::wrong_result) CHECK(cell.tolerance_used > 1);
  CHECK(m.first_error.known());
  CHECK_FALSE(m.diagnosis.blocks[1].query_ok);
}

TEST_CASE("LiveRun runs on a background thread and hands the outcome over once", "[viz][run]") {
  LiveRun live;
  REQUIRE(live.start(spec_of(Algorithm::ring, LayoutKind::contiguous, 3, false)));
  live.wait();
  CHECK_FALSE(live.running());
  std::optional<RunOutcome> outcome = live.take();
  REQUIRE(outcome.has_value());
  CHECK(outcome->ok);
  CHECK(live.progress() == Approx(1.0));
  CHECK_FALSE(live.take().has_value());
  PlanSpec bad = spec_of(Algorithm::ring, LayoutKind::zigzag, 4, true);
  bad.dims.seq = 100;
  REQUIRE(live.start(bad));
  live.wait();
  outcome = live.take();
  REQUIRE(outcome.has_value());
  CHECK_FALSE(outcome->ok);
  CHECK(outcome->error.find("100") != std::string::npos);
}

TEST_CASE("a trace carries its run's spec, every field, and refuses a malformed one", "[viz][trace]") {
  PlanSpec spec = ringlab::test::every_field_spec();
  spec.element_bytes = 2;
  const TraceRun about{"ringlab-gpu run", "gpu-streams, 8 virtual ranks", spec};
  TraceEvent event;
  event.name = "attention fwd";
  event.lane = TraceLane::compute;
  event.duration_us = 5;
  const std::vector<TraceEvent> events{event};
  const TraceFile file = parse_trace_file(chrome_trace_json(events, 1, &about), "t.json");
  REQUIRE(file.run);
  CHECK(file.run->tool == "ringlab-gpu run");
  CHECK(file.run->executor == "gpu-streams, 8 virtual ranks");
  CHECK(plan_spec_json(file.run->spec) == plan_spec_json(spec));
  CHECK(file.run->spec.describe() == spec.describe());
  CHECK(file.events == events);
  // The erratum (a ring's), tail padding (a layout that does not cut documents) and padded
  // documents (zig-zag per document, as ringlab run pads them) come back too.
  PlanSpec ring = spec;
  ring.algo = Algorithm::ring;
  ring.ulysses = 1;
  ring.erratum = Erratum::reverse_dkv;
  PlanSpec padded = spec;
  padded.layout = LayoutKind::contiguous;
  padded.dims.seq = 1008;
  padded.padding = 32;
  PlanSpec padded_documents = spec;
  padded_documents.layout = LayoutKind::zigzag;
  padded_documents.block = 0;
  padded_documents.dims.seq = 300;
  padded_documents.documents = {100, 200};
  pad_to_layout(padded_documents);
  REQUIRE(padded_documents.document_padding == std::vector<int64_t>{12, 8});
  for (const PlanSpec& other : {ring, padded, padded_documents}) {
    const PlanSpec back = plan_spec_from_json(plan_spec_json(other), "t.json");
    CHECK(plan_spec_json(back) == plan_spec_json(other));
    CHECK(back.describe() == other.describe());
  }
  CHECK(plan_spec_from_json(plan_spec_json(ring), "t.json").erratum == Erratum::reverse_dkv);
  CHECK(plan_spec_from_json(plan_spec_json(padded), "t.json").padding == 32);
  CHECK(plan_spec_from_json(plan_spec_json(padded_documents), "t.json").tokens() == 300);
  // A trace written before document padding was recorded: none.
  nlohmann::json older = plan_spec_json(spec);
  older.erase("document_padding");
  CHECK(plan_spec_json(plan_spec_from_json(older, "t.json")) == plan_spec_json(spec));
  // Without a run: none, and the events as before.
  const TraceFile bare = parse_trace_file(chrome_trace_json(events, 1), "t.json");
  CHECK_FALSE(bare.run);
  CHECK(bare.events == events);
  // A spec with a field of the wrong type or missing: one line naming the file and the field.
  nlohmann::json broken = nlohmann::json::parse(chrome_trace_json(events, 1, &about));
  broken["otherData"]["ringlab"]["spec"]["ranks"] = "eight";
  CHECK_THROWS_WITH(parse_trace_file(broken.dump(), "t.json"), Catch::Contains("t.json: the run's spec: \"ranks\""));
  broken["otherData"]["ringlab"]["spec"]["ranks"] = 0;
  CHECK_THROWS_WITH(parse_trace_file(broken.dump(), "t.json"), Catch::Contains("\"ranks\" is not an integer from 1"));
  broken["otherData"]["ringlab"]["spec"]["ranks"] = 8;
  broken["otherData"]["ringlab"]["spec"]["seq"] = int64_t{1} << 40;
  CHECK_THROWS_WITH(parse_trace_file(broken.dump(), "t.json"), Catch::Contains("\"seq\""));
  broken["otherData"]["ringlab"]["spec"]["seq"] = 976;
  broken["otherData"]["ringlab"]["spec"].erase("ranks");
  CHECK_THROWS_WITH(parse_trace_file(broken.dump(), "t.json"), Catch::Contains("no \"ranks\""));
  broken["otherData"]["ringlab"]["spec"]["ranks"] = 8;
  broken["otherData"]["ringlab"]["spec"]["layout"] = "spiral";
  CHECK_THROWS_WITH(parse_trace_file(broken.dump(), "t.json"), Catch::Contains("spiral"));
  broken["otherData"]["ringlab"]["spec"]["layout"] = "striped";
  broken["otherData"]["ringlab"]["spec"]["document_padding"] = nlohmann::json::array({4});
  CHECK_THROWS_WITH(parse_trace_file(broken.dump(), "t.json"), Catch::Contains("1 counts for 2 documents"));
  broken["otherData"]["ringlab"]["spec"]["document_padding"] = nlohmann::json::array({4, -1});
  CHECK_THROWS_WITH(parse_trace_file(broken.dump(), "t.json"), Catch::Contains("a document padding is not an integer"));
  broken["otherData"]["ringlab"]["spec"]["document_padding"] = nlohmann::json::array();
  CHECK_NOTHROW(parse_trace_file(broken.dump(), "t.json"));
}

TEST_CASE("a trace's spec that makes no plan is refused on loading, one line naming the field", "[viz][trace]") {
  // Each field in range, together no plan: the spec that made describe() corrupt the heap —
  // striped per document with 32 tail padding positions after the documents, which that layout
  // has no rank for — and, as found, with an erratum the hybrid does not have.
  nlohmann::json document = nlohmann::json::parse(chrome_trace_json({}, 1));
  nlohmann::json& spec = document["otherData"]["ringlab"]["spec"];
  spec = {{"algo", "hybrid"},
          {"layout", "striped"},
          {"block", 2},
          {"ranks", 8},
          {"ulysses", 2},
          {"batch", 3},
          {"seq", 1008},
          {"heads", 8},
          {"kv_heads", 8},
          {"dim", 128},
          {"causal", true},
          {"window", 77},
          {"documents", {480, 496}},
          {"padding", 32},
          {"padding_heads", 1},
          {"skip", false},
          {"full_ring", true},
          {"backward", true},
          {"erratum", "reverse-dkv"},
          {"element_bytes", 2}};
  CHECK_THROWS_WITH(parse_trace_file(document.dump(), "t.json"),
                    Catch::StartsWith("t.json: the run's spec does not describe a plan: --erratum reverse-dkv"));
  spec["erratum"] = "none";
  CHECK_THROWS_WITH(parse_trace_file(document.dump(), "t.json"),
                    Catch::Contains("t.json: the run's spec does not describe a plan: the documents span 976 "
                                    "positions, not S=1008"));
  spec["ulysses"] = 3;
  CHECK_THROWS_WITH(parse_trace_file(document.dump(), "t.json"), Catch::Contains("--ulysses 3 does not divide P=8"));
  spec["ulysses"] = 2;
  spec["padding"] = 1008;
  CHECK_THROWS_WITH(parse_trace_file(document.dump(), "t.json"), Catch::Contains("padding 1008 tokens of S=1008"));
  // The control: the documents filling S load, and say what they are.
  spec["padding"] = 0;
  spec["seq"] = 976;
  const TraceFile file = parse_trace_file(document.dump(), "t.json");
  REQUIRE(file.run);
  CHECK(file.run->spec.describe().find("striped per document(block=2)") != std::string::npos);
}

namespace {

// A trace as ringlab-gpu run writes one of `spec`'s plan (executors/gpu): the attention blocks
// and the elementwise work around them on the compute lane; each message one asynchronous copy
// with the plan's tag, seen as "send" from the sender and "recv" from the receiver, running past
// the compute of its step (the compute stream waits for it only at the plan's Wait: no event).
TraceFile gpu_trace(const PlanSpec& spec) {
  const ScheduleModel plan = viz::test::model_of(spec);
  auto label_of = [&](int64_t step) {
    return plan.phases[static_cast<size_t>(plan.steps[static_cast<size_t>(step)].phase)].name;
  };
  auto event_at = [&](const std::string& name, int64_t rank, TraceLane lane, int64_t step, double start,
                      double duration) {
    TraceEvent e;
    e.name = name;
    e.rank = static_cast<int>(rank);
    e.lane = lane;
    e.start_us = start;
    e.duration_us = duration;
    e.step = static_cast<int>(plan.steps[static_cast<size_t>(step)].phase_step);
    e.label = label_of(step);
    return e;
  };
  TraceFile file;
  for (const BlockGrid& grid : plan.grids)
    for (const GridCell& cell : grid.cells) {
      if (!cell.computed()) continue;
      for (int64_t rank : cell.ranks) {
        const double at = 10.0 * static_cast<double>(cell.step);
        file.events.push_back(event_at("load kv", rank, TraceLane::compute, cell.step, at, 1));
        TraceEvent e = event_at(grid.pass == Pass::forward ? "attention fwd" : "attention bwd", rank,
                                TraceLane::compute, cell.step, at + 1, 5);
        e.q_block = static_cast<int>(cell.q_block);
        e.kv_block = static_cast<int>(cell.kv_block);
        e.mask = block_shape_name(cell.shape);
        e.flops = cell.flops / static_cast<double>(cell.ranks.size());
        file.events.push_back(e);
        if (grid.pass == Pass::backward)
          file.events.push_back(event_at("accumulate dK/dV", rank, TraceLane::compute, cell.step, at + 6, 1));
      }
    }
  for (int64_t step = 0; step < plan.step_count(); ++step)
    if (label_of(step) == "finalize")
      for (int64_t r = 0; r < plan.ranks; ++r)
        file.events.push_back(event_at("finalize", r, TraceLane::compute, step, 10.0 * static_cast<double>(step), 2));
  for (const Transfer& t : plan.transfers) {
    REQUIRE(t.tag >= 0);
    TraceEvent e = event_at("recv", t.to, TraceLane::comm, t.step, 10.0 * static_cast<double>(t.step) + 5, 4);
    e.peer = static_cast<int>(t.from);
    e.tag = t.tag;
    e.bytes = t.bytes;
    file.events.push_back(e);
    e.name = "send";
    e.rank = static_cast<int>(t.from);
    e.peer = static_cast<int>(t.to);
    file.events.push_back(e);
  }
  file.run = TraceRun{"ringlab-gpu run", "gpu-streams, virtual ranks on one GPU", spec};
  return file;
}

}  // namespace

TEST_CASE("a GPU trace's copies are transfers in flight: the ring's hops, no waits, no exposed time", "[viz][trace]") {
  const int64_t P = GENERATE(3, 4);
  const PlanSpec spec = spec_of(Algorithm::ring, LayoutKind::zigzag, P, true, true);
  const ScheduleModel plan = viz::test::model_of(spec);
  const TraceFile file = gpu_trace(spec);
  const ScheduleModel m = model_from_trace_file(file, "gpu.json");
  CHECK(m.timeline.measured);
  // Every message of the plan, once (not once per end), with its bytes, payload and block.
  REQUIRE(m.transfers.size() == plan.transfers.size());
  for (const Transfer& want : plan.transfers) {
    INFO("rank " << want.from << " -> " << want.to << " at step " << want.step);
    const auto found = std::find_if(m.transfers.begin(), m.transfers.end(), [&](const Transfer& t) {
      return t.from == want.from && t.to == want.to && t.step == want.step && t.payload == want.payload;
    });
    REQUIRE(found != m.transfers.end());
    CHECK(found->bytes == want.bytes);
    if (want.payload == Payload::kv) CHECK(found->origin == want.origin);
  }
  // The ring header: every K/V hop of a ring phase made.
  const int64_t forward = m.phases.front().first_step;
  CHECK(ring_direction(m, forward, Payload::kv) == +1);
  CHECK(kv_hop_count(m, forward).made == P - 1);
  CHECK(kv_hop_text(m, forward).empty());
  // The copies are drawn as transfers, not waits; they block no one and expose nothing.
  bool legend_says_transfers = false;
  for (const LegendEntry& entry : timeline_legend(m))
    legend_says_transfers |= entry.label.find("transfer in flight") != std::string::npos;
  CHECK(legend_says_transfers);
  for (int64_t r = 0; r < P; ++r) {
    INFO("rank " << r);
    for (const Span& span : m.timeline.row(r, kCommLane).spans) {
      CHECK(span.kind == SpanKind::send);
      if (span.label.rfind("recv", 0) == 0) CHECK(span.label.find(" <- rank ") != std::string::npos);
    }
    CHECK(m.timeline.row(r, kExposedLane).spans.empty());
    CHECK(m.load.ranks[static_cast<size_t>(r)].blocked == 0);
    CHECK(m.load.ranks[static_cast<size_t>(r)].busy > 0);
  }
  // Read without its run (a trace from another writer), the same events keep the old reading.
  const ScheduleModel bare = model_from_trace(file.events, "gpu.json");
  CHECK(bare.transfers.empty());
}

TEST_CASE("a CPU run's trace reads the same with its run as without it", "[viz][trace]") {
  const PlanSpec spec = spec_of(Algorithm::ring, LayoutKind::zigzag, 4, true, true);
  TraceFile file;
  file.events = traced_run(spec);
  file.run = TraceRun{"ringlab run", "sim executor, 4 ranks (fp32)", spec};
  const ScheduleModel with = model_from_trace_file(file, "cpu.json");
  const ScheduleModel without = model_from_trace(file.events, "cpu.json");
  REQUIRE(with.transfers.size() == without.transfers.size());
  CHECK(with.transfers.size() == 4 * 3 + 4 * 3 + 4 * 4);  // K/V forward and backward; dK/dV R per rank
  for (size_t i = 0; i < with.transfers.size(); ++i) {
    CHECK(with.transfers[i].from == without.transfers[i].from);
    CHECK(with.transfers[i].bytes == without.transfers[i].bytes);
    CHECK(with.transfers[i].payload == without.transfers[i].payload);
  }
  REQUIRE(with.timeline.rows.size() == without.timeline.rows.size());
  for (size_t i = 0; i < with.timeline.rows.size(); ++i) {
    REQUIRE(with.timeline.rows[i].spans.size() == without.timeline.rows[i].spans.size());
    for (size_t j = 0; j < with.timeline.rows[i].spans.size(); ++j)
      CHECK(with.timeline.rows[i].spans[j].kind == without.timeline.rows[i].spans[j].kind);
  }
  for (size_t r = 0; r < 4; ++r) CHECK(with.load.ranks[r].blocked == without.load.ranks[r].blocked);
}

TEST_CASE("a trace's blocks computed are its attention blocks, and its skipped blocks unknown", "[viz][trace]") {
  const PlanSpec spec = spec_of(Algorithm::ring, LayoutKind::zigzag, 4, true, true);
  const ScheduleModel plan = viz::test::model_of(spec);
  // The GPU trace also times loading K/V, accumulating dK/dV and finalize on the compute lane.
  const ScheduleModel m = model_from_trace_file(gpu_trace(spec), "gpu.json");
  for (size_t r = 0; r < 4; ++r) {
    INFO("rank " << r);
    const RankLoad& want = plan.load.ranks[r];
    const RankLoad& got = m.load.ranks[r];
    CHECK(got.computed == want.computed);  // forward and backward: 2 x 4 on a zig-zag ring of 4
    CHECK(got.masked == want.masked);
    CHECK(got.flops == Approx(want.flops));
    // A skipped block makes no event: the trace cannot say how many.
    CHECK(got.skipped == kUnknownCount);
    CHECK(load_blocks_text(got).find("unknown") != std::string::npos);
    CHECK(load_blocks_text(got).find(" 0 skipped") == std::string::npos);
    CHECK(load_blocks_text(want) == "blocks: " + std::to_string(want.computed) + " computed, " +
                                        std::to_string(want.skipped) + " skipped, " + std::to_string(want.masked) +
                                        " masked");
  }
  CHECK(m.load.ranks[0].computed == 8);
}

TEST_CASE("a trace whose run's spec has fewer ranks than its events is refused, one line", "[viz][trace]") {
  // Refused rather than shown with P from the events: the spec sets the controls (P=2 here) and
  // what an edit re-plans, so a model of 4 ranks under controls of 2 would show two schedules as
  // one, and nothing says which half of the file is right (hand-edited, or two runs spliced).
  PlanSpec four = spec_of(Algorithm::ring, LayoutKind::zigzag, 4, true);
  TraceFile file;
  file.events = traced_run(four);
  PlanSpec two = four;
  two.ranks = 2;
  two.dims = spec_of(Algorithm::ring, LayoutKind::zigzag, 2, true).dims;
  file.run = TraceRun{"ringlab run", "sim executor, 2 ranks (fp32)", two};
  std::string message;
  try {
    model_from_trace_file(file, "mixed.json");
  } catch (const UsageError& error) {
    message = error.what();
  }
  INFO(message);
  CHECK(message.rfind("mixed.json: ", 0) == 0);
  CHECK(message.find("\"ranks\": 2") != std::string::npos);
  CHECK(message.find("4 ranks") != std::string::npos);
  CHECK(message.find('\n') == std::string::npos);
  // The control: the spec that ran loads, its P the events'.
  file.run->spec = four;
  CHECK(model_from_trace_file(file, "mixed.json").ranks == 4);
}

TEST_CASE("a directory given as a trace is refused as a directory, one line", "[viz][trace]") {
  const std::string dir = std::filesystem::temp_directory_path().string();
  std::string message;
  try {
    read_trace_file(dir);
  } catch (const UsageError& error) {
    message = error.what();
  }
  INFO(message);
  CHECK(message.rfind(dir + ": ", 0) == 0);
  CHECK(message.find("is a directory") != std::string::npos);
  CHECK(message.find("JSON") == std::string::npos);
  CHECK(message.find('\n') == std::string::npos);
  // A missing file still says it cannot be opened.
  CHECK_THROWS_WITH(read_trace_file("/nonexistent/trace.json"), Catch::Contains("cannot open"));
}
