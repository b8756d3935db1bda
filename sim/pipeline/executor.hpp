// The executor contract: what every executor — the sim executor on virtual ranks, gpu-streams,
// gpu-nccl, the dry executor's cost model — gives the run pipeline (sim/pipeline/pipeline.hpp), and what
// it needs of it. An executor writes only its op semantics; the pipeline reads the inputs, builds
// and checks the plan, verifies, diagnoses, saves, traces and reports the same way for all.
//
// Why an abstract class and not a concept: the pipeline is one compiled function that takes an
// executor chosen at run time (--dry-run, --executor streams|nccl, mpirun) or a test's fake, and
// it calls the executor a handful of times per run — a virtual call there costs nothing, and a
// template would put the whole pipeline in a header.
//
// Sections: [result] [outputs] [contract]
#pragma once

#include <atomic>
#include <cstdint>
#include <iosfwd>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "reference/attention.hpp"
#include "sim/pipeline/result.hpp"
#include "sim/pipeline/trace.hpp"
#include "sim/pipeline/verification.hpp"
#include "sim/plan/plan.hpp"

namespace ringlab {

struct RunConfig;

// ---- [result] --------------------------------------------------------------------------------

// What the seconds of a run mean.
enum class TimeKind : uint8_t {
  wall_clock,  // the host's clock around the whole run (the sim executor's virtual ranks)
  device,      // first to last event on the device (CUDA events)
  predicted,   // the cost model's makespan (the dry executor)
};
struct RunTime {
  TimeKind kind = TimeKind::wall_clock;
  double seconds = 0;
};

// How a run that did not complete ended.
enum class FailureKind : uint8_t {
  deadlock,    // no rank can move (the watchdog's report, gpu-streams' round with no progress)
  comm_fault,  // a message lost, duplicated, corrupted or of the wrong size; a collective mismatch
  error,       // a rank threw something else
};
const char* failure_kind_name(FailureKind kind);  // "deadlock" | "communication fault" | "error"

struct RunFailure {
  FailureKind kind = FailureKind::error;
  std::string description;  // what the command prints after "<tool>: ", e.g. the deadlock report
  int exit_status = 3;      // 3 for a deadlock or communication fault; 2 a usage error; 70 internal
};

struct ExecutionResult {
  std::string executor;                  // "sim executor, 4 ranks (fp32)", "gpu-streams, 4 virtual ranks on ... (bf16)"
  RunOutputs outputs;                    // global token order; empty when the executor computes none or the run failed
  std::vector<RankSummary> ranks;        // [P]: blocks, pairs, FLOPs, traffic, busy and blocked seconds
  std::vector<TraceEvent> trace;         // when ExecuteOptions::trace: by rank, then start time
  RunTime time;                          // the run's time and what it means
  std::optional<RunFailure> failure;     // set when the run did not complete
  std::vector<BlockError> block_errors;  // a diagnosed run's every compute block, in (phase, step, rank) order
  std::vector<std::string> faults;       // --inject: each fault and what it did ("alter@1:0: negated ...")

  bool ok() const { return !failure.has_value(); }
};

// ---- [outputs] -------------------------------------------------------------------------------

// Zeroed global outputs of the plan's shapes: out (B,S,H,D), lse (B,H,S) and, with a backward
// pass, dq (B,S,H,D), dk, dv (B,S,HKV,D).
RunOutputs allocate_outputs(const Plan& plan);

// What a rank ends with, in its local layout (its layout tokens, ascending; all heads): out
// (B, S/P, H, D), lse (B, H, S/P) and, after a backward pass, dq (B, S/P, H, D), dk, dv
// (B, S/P, HKV, D).
struct LocalOutputs {
  Tensor<float> out, lse, dq, dk, dv;
};

// Copies a rank's local outputs into the global tensors at its layout positions (the rows of
// different ranks are disjoint). Its backward tensors only when it has them.
void scatter_local_outputs(const LocalOutputs& local, std::span<const int64_t> positions, RunOutputs& global);

// ---- [contract] ------------------------------------------------------------------------------

// What an executor needs of the pipeline, and what it can do besides executing.
struct PipelineNeeds {
  int64_t element_bytes = 4;                     // PlanSpec::element_bytes: q, k, v, out on the wire and in memory
  ToleranceFunction tolerance = fp32_tolerance;  // per output tensor, against the float64 oracle
  std::string dtype;                             // the input precision reported by --json ("bf16"); "" = not reported
  bool computes_outputs = true;                  // false: no inputs, plan check, verification or --save (cost model)
  bool diagnoses = false;                        // after a mismatch, executes again with every block checked on its own
  bool counts_progress = false;                  // increments ExecuteOptions::ops_done once per op (a progress bar)
  bool reports = true;                           // false on the processes of an mpirun run other than rank 0's
  // Low precision: the verification table also shows the same problem's errors on one rank (the
  // executor configured the same, run with --ranks 1), so that P's error is read against P=1's.
  bool single_rank_baseline = false;
};

// What executing a plan will take, known from its spec before anything is allocated (the plan
// included): threads, memory at the peak, and block computations (an upper bound: fully masked
// blocks may be skipped). `refusal` says why this machine cannot finish it ("" = it can).
struct ExecutionCost {
  int64_t threads = 0;
  double bytes = 0;
  double block_computations = 0;
  std::string refusal;
};

// What the pipeline asks of one execution.
struct ExecuteOptions {
  bool trace = false;                        // keep one trace event per operation
  std::atomic<int64_t>* ops_done = nullptr;  // progress, when PipelineNeeds::counts_progress
  // Diagnosis (PipelineNeeds::diagnoses): when set, every compute block's own result is compared
  // with the exact result of that block, into ExecutionResult::block_errors.
  const AttentionInputs<double>* diagnose_inputs = nullptr;
  const ReferenceOutputs* diagnose_reference = nullptr;
};

class Executor {
 public:
  virtual ~Executor() = default;

  // Reads what it needs from the (validated) flags and refuses, with a UsageError, what it cannot
  // run — before any file is read or written.
  virtual void configure(const RunConfig& config);
  // Refuses sizes it cannot run (memory, kernel support); called once the problem is resolved,
  // before inputs are generated.
  virtual void check_sizes(const AttentionDims& dims) const;
  virtual PipelineNeeds needs() const = 0;
  // What running a plan of `spec` will cost on this machine, and whether it can finish at all; the
  // pipeline refuses it (exit 2, pointing to --dry-run) before it builds the plan or allocates any
  // tensor. The default: nothing to refuse.
  virtual ExecutionCost cost(const PlanSpec& spec) const;
  // The inputs as this executor computes with them (bf16: rounded), so that the oracle is computed
  // on exactly those numbers. The default leaves them as they are.
  virtual void prepare_inputs(AttentionInputs<double>& inputs) const;

  // "sim executor, 4 ranks (fp32)": names the executor in the tables, JSON and the result.
  virtual std::string label(const Plan& plan) const = 0;
  // Runs the plan. A run that does not complete (deadlock, communication fault) comes back with
  // ExecutionResult::failure; bad input throws UsageError.
  virtual ExecutionResult execute(const Plan& plan, const AttentionInputs<float>& inputs,
                                  const ExecuteOptions& options) = 0;

  // An executor with a report of its own (the dry executor: timeline, memory, assumptions) prints
  // it here, as text or one JSON object, and returns true; the others leave the report to the
  // pipeline.
  virtual bool print_own_report(std::ostream& out, const Plan& plan, const ExecutionResult& result, bool json) const;
};

}  // namespace ringlab
