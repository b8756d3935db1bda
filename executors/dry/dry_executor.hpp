// The dry executor: walks a plan with no tensors, timing every op with the cost model of
// sim/cost/hardware.hpp. It knows the op vocabulary of sim/plan/plan.hpp and nothing about algorithms;
// where something is ambiguous the sim executor (executors/sim/sim_executor.cpp) is the definition.
//
// Scale: it never expands a rank's ops. Each phase is evaluated step by step and, within a step,
// each template entry for all ranks at once (arrays over ranks). That is valid because every rank
// runs the same templates: a Wait refers to an Exchange posted earlier in program order, and the
// send matching a rank's receive was posted by the same template entry on its peer, already
// evaluated for all ranks. Per (rank, step, entry) the work is a few arithmetic operations; the
// compute's class comes from BlockClassifier (O(1), memoized). So time is O(P x steps x entries)
// and memory O(P): a ring of P = 1024, S = 1M fwd+bwd in ~0.05 s, P = 16384 in ~15 s on one core
// (bench/cost/bench_dry_run).
//
// Folding: a ring phase in which every rank's step costs the same — compute classes below and
// above the diagonal alike (non-causal, or zig-zag's halves), no collective, no trimmed ring, no
// window or document mask — keeps a state that is periodic along the ring with the node period
// T = G / gcd(G, U) ring positions (G = ranks_per_node; T = 1 on one node): ranks T U apart have
// the same links to their peers and the same clocks. Such a phase walks ring positions 0..T-1 only,
// a peer beyond them standing for its representative mod T, and every rank takes its
// representative's state at the phase's end: O(T x steps x entries), the full walk's result bit
// for bit (tests/executors/test_dry_folding.cpp compares both on every algorithm, layout and mask
// kind). Anything else — striped or contiguous causal rings, masks, a state that is not periodic,
// a partial last node, a trace — is walked rank by rank (DryPhase::walked_positions says which).
//
// Timing semantics, per rank (a clock = where the rank's program is):
//   Exchange  posts a send and a receive at the rank's clock. A transfer starts when both ends
//             have posted and the sender's send port and the receiver's receive port are free, and
//             lasts alpha + bytes/beta of the link class between them; the clock does not move
//             (asynchronous: the compute that follows overlaps it — double buffering).
//             host_copy links (the simulator's queues): the sender copies at post (its clock
//             moves by the copy time) and the receiver checks the checksum at its wait.
//   Wait      the clock moves to the later of the send's and the receive's completion. The part
//             of the stall before both ends had posted is "idle" (a peer is late: load imbalance);
//             the rest is "exposed communication" (the transfer itself, or queueing behind another
//             on a busy port). Of the incoming transfer's own duration, what did not stall the
//             rank is "hidden" (overlapped with its compute).
//   Compute   launch + tile areas x FLOPs per pair / the rank's rate for unmasked and masked tiles,
//             divided by the kernel's shape factor (DeviceModel::shape_factor). With
//             ranks_per_device > 1 the kernels a compute entry launches on one device run under
//             processor sharing (hardware.hpp), none starting before the device has finished the
//             kernels priced before it; such a phase is never folded.
//   Collective all members synchronise (waiting for the last is idle), then it costs the
//             all-to-all or ring formula of hardware.hpp (exposed communication).
//   Finalize, PrepareBackward, Accumulate, LoadKv: elementwise bytes at memory bandwidth ("other").
//   A phase's start, on a device with first_touch_Bps (the cpu preset): the fresh memory of a new
//   peak (memory model, inputs aside) written at that rate ("other").
// Per rank: compute + other + exposed + idle = finish time; the run's time is the latest finish.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sim/cost/hardware.hpp"
#include "sim/cost/memory_model.hpp"
#include "sim/pipeline/executor.hpp"
#include "sim/pipeline/trace.hpp"
#include "sim/plan/plan.hpp"

namespace ringlab {

struct DryOptions {
  bool trace = false;                    // record the simulated timeline (Chrome trace events)
  int64_t max_trace_events = 4'000'000;  // a traced run estimated above this throws UsageError
  // Walk one node period of ring positions in a phase where every rank is the same up to rotation
  // (exact; see "Folding" above). false: walk every rank, always (the reference the tests use).
  bool fold = true;
  // The most walking a run does: rank-steps (ranks walked x steps, summed over phases), 8 for each
  // where blocks are classified one by one (a mask); past it UsageError before the walk (or before
  // the phase that crosses it) rather than minutes of walking. 2^29: about 20 s, a contiguous
  // causal ring of P = 16384 or a padded zig-zag one of P = 4096.
  int64_t max_walk_work = int64_t{1} << 29;
  // The weights above are a plain block's cost; a block of many units (balanced, striped, zig-zag
  // per document) costs tens to hundreds of times more. So the walk is also timed: once it has run
  // judge_after_s, a walk whose rank-steps so far project past max_walk_s in all is refused
  // (UsageError, with the projection) rather than left running for minutes. 0: not timed.
  double max_walk_s = 120;
  double judge_after_s = 2;
};

// One rank's simulated run.
struct DryRank {
  double compute_s = 0;       // attention kernels
  double other_s = 0;         // elementwise work and local copies
  double exposed_comm_s = 0;  // stalled on communication (and host copies)
  double idle_s = 0;          // stalled on a late peer
  double comm_s = 0;          // transfer time of the rank's incoming data, hidden or not
  double hidden_comm_s = 0;   // the part of it that ran while the rank had other work (overlap)
  double finish_s = 0;        // its last op's end: compute + other + exposed + idle
  int64_t bytes_sent = 0, bytes_received = 0, messages_sent = 0, messages_received = 0;
  int64_t blocks_computed = 0, blocks_skipped = 0, blocks_masked = 0;  // as RankSummary counts them
  int64_t pairs = 0;                                                   // visible pairs per (batch, head)
  double flops = 0;                                                    // of the visible pairs
};

// One step of a phase that computes, over all ranks.
struct DryStep {
  int phase = 0;
  int64_t step = 0;
  double compute_min_s = 0, compute_mean_s = 0, compute_max_s = 0;  // attention kernel time per rank
  double end_s = 0;                                                 // the last rank's clock after the step
};

struct DryPhase {
  std::string name;
  int64_t steps = 0;
  double start_s = 0;            // the earliest rank's clock when the phase begins
  double end_s = 0;              // the latest rank's clock when it ends
  int64_t walked_positions = 0;  // ring positions walked one by one: the ring's R, or fewer when folded
};

struct DryResult {
  std::vector<DryRank> ranks;  // [P]
  std::vector<DryStep> steps;  // (phase, step) of every phase with a compute
  std::vector<DryPhase> phases;
  double makespan_s = 0;          // the latest finish
  MemoryReport memory;            // per rank, by phase
  std::vector<TraceEvent> trace;  // with DryOptions::trace: the simulated timeline
};

// Runs the cost model over a plan. Throws UsageError when a trace would be too large, and
// std::logic_error for a plan the executors cannot run (an exchange whose send and receive are
// not one template entry, a wait for an exchange never posted).
DryResult run_dry_plan(const Plan& plan, const Hardware& hardware, const DryOptions& options = {});

// Summaries over ranks.
struct DrySummary {
  double time_s = 0;  // makespan
  double compute_max_s = 0, compute_mean_s = 0;
  double exposed_max_s = 0, exposed_mean_s = 0;
  double idle_max_s = 0;
  double comm_mean_s = 0;      // transfer time per rank, hidden or not
  double hidden_fraction = 1;  // hidden / comm transfer time, over all ranks (1 when nothing is sent)
  int64_t bytes_sent_max = 0;
  double flops_total = 0;
  double flops_imbalance = 1;    // max / mean FLOPs per rank
  double compute_imbalance = 1;  // max / mean compute time per rank
};
DrySummary summarize(const DryResult& result);

// ---- the executor contract (sim/pipeline/executor.hpp) --------------------------------------------

// What the pipeline's tables show of a rank of a dry run: its blocks, pairs and FLOPs, its traffic
// (bytes and messages, both ways), busy = attention compute, blocked = exposed + idle.
RankSummary rank_summary(const DryRank& rank);

// The dry executor behind `ringlab run --dry-run`: an ExecutionResult with a RankSummary per rank,
// the predicted makespan as its time (TimeKind::predicted) and the simulated timeline as its
// trace; no outputs. The detailed cost breakdown (DryResult: phases, steps, memory) stays next to
// it, and its report is the dry report (executors/dry/dry_report.hpp).
class DryExecutor final : public Executor {
 public:
  DryExecutor() = default;  // the machine comes from --hw when the pipeline configures it
  explicit DryExecutor(Hardware hardware, DryOptions options = {});

  void configure(const RunConfig& config) override;    // --hw (a preset or a JSON file); refuses --inject
  PipelineNeeds needs() const override;                // the machine's element size; computes no outputs
  std::string label(const Plan& plan) const override;  // "dry executor, 4 ranks on h100-nvlink (cost model)"
  ExecutionResult execute(const Plan& plan, const AttentionInputs<float>& inputs,
                          const ExecuteOptions& options) override;
  bool print_own_report(std::ostream& out, const Plan& plan, const ExecutionResult& result, bool json) const override;

  const Hardware& hardware() const;  // throws std::logic_error before a machine is known
  // The last execute's cost breakdown; its trace has moved into the ExecutionResult.
  const DryResult& detail() const { return detail_; }

 private:
  std::optional<Hardware> hardware_;
  DryOptions options_;
  DryResult detail_;
};

}  // namespace ringlab
