// The GPU executors of the executor contract (sim/pipeline/executor.hpp). Both interpret the expanded
// per-rank op lists of a plan (sim/plan/plan.hpp: expand) generically — no algorithm is
// special-cased — through the op interpreter (sim/pipeline/op_interpreter.hpp) on top of GpuRank
// (executors/gpu/gpu_rank.hpp) and its timed local ops (executors/gpu/local_ops.hpp), and report
// what the sim executor reports: the outputs in global token order, a RankSummary per rank, and a
// Chrome trace whose times are CUDA-event times (the run's time is device time).
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "gpu/dtype.hpp"
#include "sim/pipeline/executor.hpp"
#include "sim/plan/plan.hpp"

namespace ringlab::gpu {

struct GpuRunOptions {
  Dtype dtype = Dtype::bf16;
  int device = 0;         // gpu-streams: the device every virtual rank shares
  double timeout = 60.0;  // gpu-nccl: seconds without progress before aborting (exit 3)
  // Untimed runs of the whole plan before the timed one, so that first-launch costs (lazy module
  // loading, CUDA_MODULE_LOADING=LAZY being the default; first-use attribute setting; gpu-nccl's
  // lazily made connections and first collectives) stay out of the measured run and its trace.
  int warmup = 1;
  // gpu-streams: false times only the whole run (its start and end events), not each op. Two
  // timing events per op are instrumentation, and at short steps their host cost paces the run
  // (one host thread enqueues every rank's ops); an efficiency benchmark of the schedule leaves
  // them out. No trace (a traced run keeps them) and no per-rank compute seconds; FLOPs are
  // still counted.
  bool span_events = true;
  // gpu-streams: capture the walk's enqueueing once as a CUDA graph (gpu/device.hpp, Graph) and
  // time its launches. The one host thread then enqueues nothing per op, so the host cannot pace
  // short steps; the device work and its order are the walk's. Like span_events off: no trace,
  // no per-rank compute seconds; FLOPs and messages are counted once, at capture.
  bool graph = false;
};

// "timed after 1 warm-up run" | "no warm-up: first launches timed" (the executors' labels).
std::string warmup_text(int warmup);

// What both GPU executors need of the pipeline: the dtype's element size on the wire, the inputs
// rounded to it (the oracle then computes on exactly the numbers the kernels read), its
// tolerances; no diagnosis (the simulator's job). configure() refuses what only the simulator does
// (--dry-run, --inject), sizes the kernels do not support, and a machine without a device.
class GpuExecutor : public Executor {
 public:
  explicit GpuExecutor(GpuRunOptions options) : options_(options) {}

  void configure(const RunConfig& config) override;
  void check_sizes(const AttentionDims& dims) const override;  // kernel support for the dtype and D
  PipelineNeeds needs() const override;
  void prepare_inputs(AttentionInputs<double>& inputs) const override;
  const GpuRunOptions& options() const { return options_; }

 protected:
  GpuRunOptions options_;
};

// A CommError thrown by `run` (a deadlock, a communication fault) as the result's failure: the
// line "communication fault: <what>", exit status 3, the executor's label. Other errors pass.
ExecutionResult with_comm_faults(const std::string& label, const std::function<ExecutionResult()>& run);

// gpu-streams: P virtual ranks on one GPU. Each rank has a compute stream and a transfer stream;
// a link is a device-to-device copy on the receiver's transfer stream, ordered by events after
// the sender's data is ready and the receiver's slot is free, so transfers overlap compute
// exactly as the plan's Exchange / Wait placement allows. The host walks the P op lists
// round-robin and only enqueues (a Wait whose peer has not posted yet moves on to the next
// rank); a round in which no rank can move is a deadlock, reported as the result's failure.
class StreamsExecutor final : public GpuExecutor {
 public:
  using GpuExecutor::GpuExecutor;
  // "gpu-streams, 4 virtual ranks on NVIDIA H100 80GB HBM3 (bf16)"
  std::string label(const Plan& plan) const override;
  // Prepares a StreamsRun, runs it once and downloads the outputs.
  ExecutionResult execute(const Plan& plan, const AttentionInputs<float>& inputs,
                          const ExecuteOptions& options) override;
};

// The buffers of a gpu-streams run, allocated once and run as often as wanted (benchmarks).
class StreamsRun {
 public:
  // Allocates every rank's buffers on options.device and uploads its inputs (rounded to dtype).
  StreamsRun(const Plan& plan, const AttentionInputs<float>& inputs, const GpuRunOptions& options);
  ~StreamsRun();
  StreamsRun(const StreamsRun&) = delete;
  StreamsRun& operator=(const StreamsRun&) = delete;

  // Runs the whole plan once (resetting the accumulators first) and waits for the device. With
  // download, the result holds the outputs; without, only timings (benchmarks); with trace, one
  // trace event per op. A deadlock throws CommError. With GpuRunOptions::graph the first run
  // captures the graph (the walk, its deadlock check included) and every run launches it; a
  // trace is then a UsageError (a graph's launch times the run as a whole).
  ExecutionResult run(bool download = true, bool trace = false);
  // Runs the whole plan once with no timing events and measures nothing: every kernel the plan
  // uses is launched once (its module loaded, its attributes set) before a measured run.
  void warm_up();
  // GpuRunOptions::span_events for the runs that follow.
  void set_span_events(bool on);
  // GpuRunOptions::graph for the runs that follow (the first captures the graph).
  void set_graph(bool on);
  // The host's wall time enqueueing the last run, in milliseconds: from the run's start to its
  // last call before it waits for the device (the walk; with a graph, the launch and its two
  // events). Where it comes near the run's device time, the host sets the pace.
  double host_enqueue_ms() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// "gpu-streams, 4 virtual ranks on NVIDIA H100 80GB HBM3 (bf16)"
std::string streams_label(const Plan& plan, const GpuRunOptions& options);

}  // namespace ringlab::gpu
