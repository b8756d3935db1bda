// The GPU executors' common interface. Both interpret the expanded per-rank op lists of a plan
// (sim/plan/plan.hpp: expand) generically — no algorithm is special-cased — on top of GpuRank
// (gpu/executors/gpu_rank.hpp), and both report what the sim executor reports: the outputs in
// global token order, a RankSummary per rank, and a Chrome trace whose times are CUDA-event times.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "gpu/dtype.hpp"
#include "sim/plan/plan.hpp"
#include "sim/run/result.hpp"
#include "sim/run/trace.hpp"
#include "sim/run/verification.hpp"

namespace ringlab::gpu {

struct GpuRunOptions {
  Dtype dtype = Dtype::bf16;
  bool trace = false;      // keep one trace event per op (times from CUDA events)
  int device = 0;          // gpu-streams: the device every virtual rank shares
  double timeout = 60.0;   // gpu-nccl: seconds to wait for the device before aborting (exit 3)
};

struct GpuRunResult {
  std::string executor;             // "gpu-streams, 4 virtual ranks on one NVIDIA H100 ... (bf16)"
  RunOutputs outputs;               // global token order (empty when not downloaded)
  std::vector<RankSummary> ranks;   // [P]; counters: bytes and messages, busy = compute events
  std::vector<TraceEvent> trace;    // with GpuRunOptions::trace, by rank then start time
  double device_ms = 0;             // first to last event of the run, on the device
};

// gpu-streams: P virtual ranks on one GPU. Each rank has a compute stream and a transfer stream;
// a link is a device-to-device copy on the receiver's transfer stream, ordered by events after
// the sender's data is ready and the receiver's slot is free, so transfers overlap compute
// exactly as the plan's Exchange / Wait placement allows. The host walks the P op lists
// round-robin and only enqueues (a Wait whose peer has not posted yet moves on to the next
// rank); a round in which no rank can move is a deadlock, reported as a CommError (exit 3).
class StreamsExecutor {
 public:
  // Allocates every rank's buffers on options.device and uploads its inputs (rounded to dtype).
  StreamsExecutor(const Plan& plan, const AttentionInputs<float>& inputs, const GpuRunOptions& options);
  ~StreamsExecutor();
  StreamsExecutor(const StreamsExecutor&) = delete;
  StreamsExecutor& operator=(const StreamsExecutor&) = delete;

  // Runs the whole plan once (resetting the accumulators first) and waits for the device.
  // With download, result.outputs holds the outputs; without, only timings (benchmarks).
  GpuRunResult run(bool download = true);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

GpuRunResult run_gpu_streams(const Plan& plan, const AttentionInputs<float>& inputs, const GpuRunOptions& options);

// "gpu-streams, 4 virtual ranks on NVIDIA H100 80GB HBM3 (bf16)"
std::string streams_label(const Plan& plan, const GpuRunOptions& options);

}  // namespace ringlab::gpu
