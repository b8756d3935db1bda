// What both GPU executors share of running a rank's ops (besides the op interpreter of
// sim/pipeline/op_interpreter.hpp, which names, counts and labels them): device work bracketed by
// timing events, turned into trace events and compute time once the device is done (Timeline),
// and the local ops of a GpuRank run as timed work on the rank's compute stream
// (run_local_op). So gpu-streams and gpu-nccl differ only in how they communicate.
#pragma once

#include <cuda_runtime_api.h>

#include <deque>
#include <functional>
#include <utility>
#include <vector>

#include "executors/gpu/gpu_rank.hpp"
#include "gpu/device.hpp"
#include "sim/pipeline/result.hpp"
#include "sim/pipeline/trace.hpp"

namespace ringlab::gpu {

class Timeline {
 public:
  // An event recorded on `stream` now; `timing` ones can be measured.
  const Event* record(cudaStream_t stream, bool timing = false) {
    events_.emplace_back(timing && timing_);
    events_.back().record(stream);
    return &events_.back();
  }
  // Brackets what `enqueue` puts on `stream` with timing events; `event` says what it was.
  // Returns the end event. With spans off, only enqueues: the event's FLOPs are still counted,
  // and an untimed end event is recorded only when the caller waits on it (`need_end`: a copy's
  // end, which a later op depends on); nullptr otherwise.
  template <class F>
  const Event* timed(cudaStream_t stream, TraceEvent event, F&& enqueue, bool need_end = true) {
    if (!spans_on_) {
      std::forward<F>(enqueue)();
      if (event.lane == TraceLane::compute && event.flops >= 0) untimed_flops_.emplace_back(event.rank, event.flops);
      return need_end ? record(stream, false) : nullptr;
    }
    const Event* start = record(stream, true);
    std::forward<F>(enqueue)();
    const Event* end = record(stream, true);
    spans_.push_back({start, end, std::move(event)});
    return end;
  }
  // One more view of the last span (one copy is the receiver's "recv" and the sender's "send");
  // nothing with spans off.
  void also(TraceEvent event) {
    if (!spans_on_) return;
    Span view{spans_.back().start, spans_.back().end, std::move(event)};
    spans_.push_back(std::move(view));
  }

  // Once the device has passed every event: each span's start and duration in microseconds from
  // `start`, and each compute span with FLOPs added to its rank's compute seconds and FLOPs
  // (summary_of(world rank)). The events in the order they were recorded.
  std::vector<TraceEvent> resolve(const Event& start, const std::function<RankSummary&(int rank)>& summary_of);
  void clear();  // before a new run
  // Off: every event records without timing (a warm-up run, which measures nothing).
  void set_timing(bool on) { timing_ = on; }
  // Off: timed() brackets nothing (GpuRunOptions::span_events): no trace events, no compute
  // seconds, two fewer event records per op on the host (FLOPs are still counted).
  void set_spans(bool on) { spans_on_ = on; }
  // How many of the recorded events the device has passed, counted in recording order up to the
  // first it has not (a cursor: each call resumes where the last stopped). A watchdog's progress.
  size_t passed();

 private:
  struct Span {
    const Event* start = nullptr;
    const Event* end = nullptr;
    TraceEvent event;
  };
  std::deque<Event> events_;  // a deque: recorded events stay where they are
  bool timing_ = true;
  bool spans_on_ = true;
  std::vector<Span> spans_;
  std::vector<std::pair<int, double>> untimed_flops_;  // (rank, FLOPs) of the compute ops timed() did not bracket
  size_t passed_ = 0;
};

// Enqueues a local op (LoadKv, Compute, Accumulate, Finalize, PrepareBackward, StoreGrads) of
// `rank` on `stream` as timed work described by `event`. A skipped compute is enqueued untimed and
// untraced: it only zeroes its gradient slot (when it does not accumulate). Throws
// std::logic_error for an op that communicates.
void run_local_op(GpuRank& rank, const OpBody& body, TraceEvent event, cudaStream_t stream, Timeline& timeline);

}  // namespace ringlab::gpu
