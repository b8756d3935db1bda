// The viewer's model: everything ringlab-viz draws, computed from a plan, a Chrome trace file or a
// live run, with no UI code (like Tracy's server/, unit-tested on its own).
//
// Steps. A plan is phases of steps; the model numbers them globally ("step 5" = the 5th step of
// the whole schedule, across phases) and keeps each phase's own step number for labels. Every
// per-step table below is indexed by the global step.
//
// Time. A plan has no time of its own: its timeline is the cost model's prediction for a chosen
// machine (sim/cost: the dry executor's simulated trace on a hardware preset such as h100-nvlink,
// converted as a run's trace is), so the viewer and `ringlab run --dry-run --hw` agree. Traces
// and live runs carry measured time. Either way times are seconds from the start.
//
// Built by viz/model/plan_model.hpp (a plan) and viz/model/trace_model.hpp (a trace file, a run's
// or the cost model's trace); viz/model/live_run.hpp follows a run as it happens.
//
// Sections: [steps and ring] [block grid] [load and timeline] [diagnosis] [model] [stages every
// builder shares]
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "sim/cost/hardware.hpp"
#include "sim/pipeline/trace.hpp"
#include "sim/plan/check.hpp"
#include "sim/plan/plan.hpp"

namespace ringlab::viz {

struct ScheduleModel;

inline constexpr int64_t kNoBlock = -1;
inline constexpr int64_t kAllBlocks = -2;  // after an all-gather: every block's K/V

// ---- [steps and ring] ------------------------------------------------------------------------

struct PhaseView {
  std::string name;
  Pass pass = Pass::forward;
  Family family = Family::ring;
  int64_t steps = 1;
  int64_t first_step = 0;  // global step of its step 0
  bool has_compute = false;
  bool has_collective = false;
};

struct StepView {
  int phase = 0;
  int64_t phase_step = 0;
  double start = 0, end = 0;  // model time covered by the step's operations, over all ranks
};

// What one rank holds and does at one step.
struct RankStep {
  int64_t kv_block = kNoBlock;   // K/V block (ring position) it computes with, kAllBlocks when gathered
  int64_t computed = kNoBlock;   // the key block of its compute this step, if any
  int64_t dkv_block = kNoBlock;  // backward: the dK/dV accumulator it adds into this step
  BlockShape shape = BlockShape::full;
  double flops = 0;
};

// A point-to-point message of a ring exchange.
struct Transfer {
  int64_t from = 0, to = 0;  // world ranks
  Payload payload = Payload::kv;
  int64_t origin = kNoBlock;  // ring position whose K/V or dK/dV travels (kNoBlock: unknown)
  int64_t step = 0;           // global step that posts it; it travels during that step
  int64_t bytes = 0;
  double start = 0, end = 0;  // a plan: when the cost model moves it; a trace: as measured
  int tag = -1;               // a plan: the exchange's tag (ExchangeOp::tag); -1 from a trace
};

// One group's collective (all-to-all, all-gather, reduce-scatter).
struct CollectiveView {
  int64_t step = 0;
  Collective kind = Collective::all_gather_kv;
  std::string name;              // collective_name(kind), or the trace's event name
  std::vector<int64_t> members;  // world ranks
  int64_t bytes = 0;             // each member sends
  double start = 0, end = 0;
};

// ---- [block grid] ----------------------------------------------------------------------------

// Why a cell's contribution to the result is wrong.
enum class ErrorCause : uint8_t {
  none,
  wrong_result,        // the block's own result is wrong (a kernel or mask mistake), measured
  wrong_mask,          // the plan masks it wrongly (erratum kv-offset-mask), predicted from the plan
  misrouted_gradient,  // right on its own, but its dK/dV are added into another block's accumulator
};
const char* error_cause_name(ErrorCause cause);

// One (query block, key block) pair: rows are the query block's ring position, columns the key
// block's. In a hybrid schedule the U ranks of a ring group compute the same cell for their heads.
struct GridCell {
  int64_t q_block = 0, kv_block = 0;
  bool planned = false;  // some rank has a compute op for it (a trace: an event)
  BlockShape shape = BlockShape::skipped;
  int64_t step = -1;  // global step of its compute
  int64_t phase_step = -1;
  std::vector<int64_t> ranks;  // ranks that compute it
  double flops = 0;            // over those ranks
  int64_t pairs = 0;           // visible (query, key) pairs per (batch, head)
  // diagnosis
  ErrorCause cause = ErrorCause::none;
  int64_t misrouted_into = kNoBlock;  // the accumulator its dK/dV went into
  bool measured = false;              // a run measured this block's own result
  double max_abs_error = 0;
  double tolerance_used = 0;  // max error / tolerance: <= 1 passes
  bool computed() const { return planned && shape != BlockShape::skipped; }
  bool wrong() const { return cause != ErrorCause::none; }
};

struct BlockGrid {
  Pass pass = Pass::forward;
  int64_t blocks = 0;           // R
  std::vector<GridCell> cells;  // row-major: [q_block * blocks + kv_block]
  GridCell& at(int64_t q_block, int64_t kv_block) { return cells[static_cast<size_t>(q_block * blocks + kv_block)]; }
  const GridCell& at(int64_t q_block, int64_t kv_block) const {
    return cells[static_cast<size_t>(q_block * blocks + kv_block)];
  }
};

// An R x R grid of cells not computed yet.
BlockGrid empty_grid(Pass pass, int64_t blocks);

// Visibility of (query unit, key unit) pairs inside a cell, for drawing its sub-structure.
enum class UnitVisibility : uint8_t { none, diagonal, full };
struct UnitPattern {
  int64_t rows = 0, cols = 0;           // 0 when unknown (a trace) or too fine to draw
  std::vector<UnitVisibility> entries;  // row-major
  UnitVisibility at(int64_t i, int64_t j) const { return entries[static_cast<size_t>(i * cols + j)]; }
};

// ---- [load and timeline] ---------------------------------------------------------------------

inline constexpr int64_t kUnknownCount = -1;

struct RankLoad {
  double flops = 0;
  double busy = 0;       // seconds computing
  double blocked = 0;    // seconds waiting for messages and collectives
  int64_t computed = 0;  // attention blocks (kernel calls)
  int64_t skipped = 0;   // kUnknownCount from a trace: a skipped block makes no event
  int64_t masked = 0;
  std::vector<double> flops_until;  // [step]: FLOPs done by the end of that step
};
// "blocks: 16 computed, 2 skipped, 2 masked" (skipped "unknown" when the source cannot know).
std::string load_blocks_text(const RankLoad& load);

// The same problem's FLOP balance under another layout (the load panel lists every layout, so the
// chosen one is read against the others). `why` says why a layout does not apply (its divisibility).
struct LayoutBalance {
  std::string layout;   // "contiguous", "zigzag", ...
  bool chosen = false;  // the plan's own layout
  bool applies = false;
  double imbalance = 1;  // max/mean FLOPs over ranks
  std::string why;
};

struct LoadSummary {
  std::vector<RankLoad> ranks;
  std::vector<LayoutBalance> layouts;  // the viewer's plans: every layout (layout_balances), empty otherwise
  double flops_max = 0, flops_mean = 0, busy_max = 0, busy_mean = 0;
  double flops_imbalance() const { return flops_mean > 0 ? flops_max / flops_mean : 1; }
  double busy_imbalance() const { return busy_mean > 0 ? busy_max / busy_mean : 1; }
};

enum class SpanKind : uint8_t { compute, send, wait, collective, other };

struct Span {
  double start = 0, end = 0;
  SpanKind kind = SpanKind::other;
  int64_t step = -1;         // global step, -1 when unknown
  int64_t block = kNoBlock;  // compute: key block; send: origin
  int64_t peer = -1;
  std::string label;  // "attention fwd b2 (diag)", "send kv -> 3", "all-to-all q,k,v"...
};

// A rank's lanes on the timeline: what it computes; every communication event (transfers in flight,
// waits, collectives); and of those, the exposed communication: the time the rank waited for a
// transfer or a collective instead of computing (a wait for a peer that is late to post is idle
// time, not exposed communication, and is left out).
inline constexpr int kTimelineLanes = 3;
enum TimelineLane : int { kComputeLane = 0, kCommLane = 1, kExposedLane = 2 };
const char* timeline_lane_name(int lane);  // "compute", "comm", "exposed"

struct TimelineRow {
  int64_t rank = 0;
  int lane = 0;             // a TimelineLane
  std::vector<Span> spans;  // by start time
};

// The exposed spans of a rank: its communication row's waits and collectives (not a wait for a
// late peer), less any time its compute row covers, in time order.
std::vector<Span> exposed_spans(const TimelineRow& compute, const TimelineRow& communication);

// What the timeline's legend shows: a colour per kind of span, and what it means.
struct LegendEntry {
  std::string label;
  SpanKind kind = SpanKind::other;
  int64_t block = kNoBlock;  // compute entries: the K/V block whose colour it is
};
std::vector<LegendEntry> timeline_legend(const ScheduleModel& model);

struct Timeline {
  std::vector<TimelineRow> rows;  // rank-major: kTimelineLanes rows per rank, in TimelineLane order
  double end = 0;                 // the last span's end; a plan: the cost model's makespan
  bool measured = false;          // measured time (trace, run) or the cost model's prediction (plan)
  std::string hardware;           // a plan: the machine the prediction is for ("h100-nvlink")
  std::string note;               // why the rows are empty when they are (a plan too large to draw)
  const TimelineRow& row(int64_t rank, int lane) const {
    return rows[static_cast<size_t>(kTimelineLanes * rank + lane)];
  }
};

// What the timeline's times are, for legends: "measured", or "the cost model's prediction for
// h100-nvlink".
std::string time_source(const Timeline& timeline);

// The machine a plan's timeline is predicted for, unless told otherwise (a `--hw` preset).
inline constexpr const char* kDefaultHardware = "h100-nvlink";

// ---- [diagnosis] -----------------------------------------------------------------------------

// The final result of one ring position's tokens after a run, against exact attention.
struct BlockResult {
  double out_error = 0, dq_error = 0;  // its queries' rows (max abs error)
  double dk_error = 0, dv_error = 0;   // its keys' rows
  bool query_ok = true, key_ok = true;
};

// Where the result first goes wrong: the earliest step at which a wrong contribution enters.
struct ErrorEntry {
  int64_t step = -1;  // global step; -1 = none known
  int64_t rank = -1;
  Pass pass = Pass::forward;
  int64_t q_block = kNoBlock, kv_block = kNoBlock;
  ErrorCause cause = ErrorCause::none;
  std::string text;  // one line, e.g. "step 5 (ring backward, step 1), rank 0: ..."
  bool known() const { return step >= 0; }
};

struct RunDiagnosis {
  bool present = false;              // a run was attached
  bool verified = true;              // every output within tolerance
  std::string summary;               // "verified: 5 of 5 tensors within tolerance" or what failed
  std::vector<std::string> tensors;  // one line per output tensor
  std::vector<BlockResult> blocks;   // [R]
  int64_t wrong_cells = 0;           // cells whose own result was measured wrong
};

// ---- [model] ---------------------------------------------------------------------------------

enum class SourceKind : uint8_t { plan, trace, run };
const char* source_name(SourceKind kind);

struct ScheduleModel {
  SourceKind source = SourceKind::plan;
  std::string title;  // the spec's describe(), or the trace's path
  int64_t ranks = 1, ulysses = 1, ring = 1;
  bool causal = false;
  std::vector<PhaseView> phases;
  std::vector<StepView> steps;                        // global steps
  std::vector<std::vector<RankStep>> rank_steps;      // [rank][step]
  std::vector<Transfer> transfers;                    // by posting step
  std::vector<CollectiveView> collectives;            // by step
  std::vector<BlockGrid> grids;                       // forward, then backward when present
  std::vector<std::vector<int64_t>> block_units;      // [ring position]: layout units (empty from a trace)
  int64_t unit_tokens = 0;                            // tokens per layout unit
  std::vector<std::string> block_tokens;              // [ring position]: "0-255" or "0-127, 896-1023"
  std::vector<std::vector<int64_t>> block_positions;  // [ring position]: its tokens, ascending (empty from a trace)
  Mask mask;                                          // the plan's (documents, window, causal); none from a trace
  LoadSummary load;
  Timeline timeline;
  std::vector<PlanFinding> findings;  // the plan checker's, when it ran
  RunDiagnosis diagnosis;
  ErrorEntry first_error;

  int64_t step_count() const { return static_cast<int64_t>(steps.size()); }
  // The grid of the pass the step belongs to (the backward grid during backward phases).
  const BlockGrid* grid_at(int64_t step) const;
  // The grid of a pass; nullptr when the schedule has no such pass.
  const BlockGrid* grid_of(Pass pass) const;
  BlockGrid* grid_of(Pass pass);
  // "step 5 (last 9): ring backward, step 1"
  std::string step_label(int64_t step) const;
  // The cell's sub-structure in layout units (causal visibility), when it has few enough units.
  UnitPattern unit_pattern(int64_t q_block, int64_t kv_block, int64_t max_units = 8) const;
  // A cell's true mask shape: `tiles` x `tiles` sub-tiles over the two blocks' tokens (in
  // ascending position order, as far as the block has tokens), each with the fraction of its
  // (query, key) pairs the mask shows — documents, window band and causal edge alike. Empty when the
  // model has no positions (a trace).
  struct SubTile {
    int64_t row = 0, col = 0;
    double visible = 0;  // 0..1
  };
  std::vector<SubTile> mask_tiles(int64_t q_block, int64_t kv_block, int64_t tiles = 8) const;
  // The documents a block's tokens belong to, in ascending position order: runs of (document,
  // tokens). One run of document 0 without documents; empty from a trace.
  struct DocumentRun {
    int64_t document = 0, tokens = 0;
  };
  std::vector<DocumentRun> block_documents(int64_t block) const;
  // The lines of a cell's hover tooltip: ranks, step, query and key token ranges, FLOPs, error.
  std::vector<std::string> describe_cell(const BlockGrid& grid, int64_t q_block, int64_t kv_block) const;
  // Transfers travelling during a step.
  std::vector<const Transfer*> transfers_at(int64_t step) const;
  std::vector<const CollectiveView*> collectives_at(int64_t step) const;
};

// ---- [ring directions and hops] --------------------------------------------------------------

// Which way a payload moves around the ring during the phase of `step`: +1 from ring position g to
// g + 1 (clockwise on the ring panel), -1 from g to g - 1, 0 when none of it moves between
// neighbours in that phase (no transfer, or dK/dV sent home in one message). With R = 2 both
// ways are one neighbour: +1.
int ring_direction(const ScheduleModel& model, int64_t step, Payload payload);
// "K/V -> clockwise (g to g+1); dK/dV -> clockwise": the ring panel's legend line for the step.
std::string ring_direction_text(const ScheduleModel& model, int64_t step);

// A neighbour hop a full ring would make at `step` but this plan does not: at the steps 0 .. R-2
// of a ring phase that moves K/V, every rank sends its block to its neighbour in the K/V direction;
// a window or documents let the plan skip the hops whose block no later rank needs (and stop the
// ring early: its last step's hops are skipped ones).
struct Hop {
  int64_t from = 0, to = 0;  // world ranks
};
std::vector<Hop> skipped_hops(const ScheduleModel& model, int64_t step);
// K/V hops per rank in the phase of `step`: made (the most any rank makes) of R - 1. {0, 0} when
// K/V do not travel between ring neighbours in that phase (finalize, an all-gather, Ulysses'
// all-to-alls): it has no hops to make or skip.
struct HopCount {
  int64_t made = 0, full = 0;
};
HopCount kv_hop_count(const ScheduleModel& model, int64_t step);
// The ring panel's hop line for `step`: "K/V hops: 5 of 7 (skipped: dotted, crossed)" in a ring
// phase that skips some (the last part only at the steps whose skipped hops are drawn); empty
// where the phase makes every hop or has none.
std::string kv_hop_text(const ScheduleModel& model, int64_t step);

// ---- [stages every builder shares] ------------------------------------------------------------------------------

// Recomputes first_error from the grids' causes (earliest step, then query block).
void locate_first_error(ScheduleModel& model);

// Step times, cumulative FLOPs per step and the load's max/mean, from the timeline rows and the
// rank steps: the last stage of every builder.
void summarise(ScheduleModel& model);

}  // namespace ringlab::viz
