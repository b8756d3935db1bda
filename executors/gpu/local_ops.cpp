#include "executors/gpu/local_ops.hpp"

#include <stdexcept>
#include <variant>

#include "sim/pipeline/op_interpreter.hpp"

namespace ringlab::gpu {

std::vector<TraceEvent> Timeline::resolve(const Event& start, const std::function<RankSummary&(int rank)>& summary_of) {
  std::vector<TraceEvent> events;
  events.reserve(spans_.size());
  for (Span& span : spans_) {
    TraceEvent& e = span.event;
    e.start_us = 1000.0 * elapsed_ms(start, *span.start);
    e.duration_us = 1000.0 * elapsed_ms(*span.start, *span.end);
    if (e.lane == TraceLane::compute && e.flops >= 0) {
      RankSummary& summary = summary_of(e.rank);
      summary.counters.compute_seconds += e.duration_us * 1e-6;
      summary.counters.flops += e.flops;
    }
    events.push_back(std::move(e));
  }
  for (const auto& [rank, flops] : untimed_flops_) summary_of(rank).counters.flops += flops;
  spans_.clear();
  untimed_flops_.clear();
  return events;
}

void Timeline::clear() {
  spans_.clear();
  untimed_flops_.clear();
  events_.clear();
  passed_ = 0;
}

size_t Timeline::passed() {
  while (passed_ < events_.size()) {
    const cudaError_t status = cudaEventQuery(events_[passed_].get());
    if (status == cudaErrorNotReady) break;
    RINGLAB_CUDA_CHECK(status);
    ++passed_;
  }
  return passed_;
}

namespace {

// Enqueues one local op's device work on `stream`.
struct Enqueue {
  GpuRank& rank;
  cudaStream_t stream;
  void operator()(const LoadKvOp& op) const { rank.load_kv(op, stream); }
  void operator()(const ComputeOp& op) const { rank.compute(op, stream); }
  void operator()(const AccumulateOp& op) const { rank.accumulate(op, stream); }
  void operator()(const FinalizeOp&) const { rank.finalize(stream); }
  void operator()(const PrepareBackwardOp&) const { rank.prepare_backward(stream); }
  void operator()(const StoreGradsOp& op) const { rank.store_grads(op, stream); }
  template <class Communication>  // Exchange, Wait, Collective: each executor's own
  void operator()(const Communication&) const {
    throw std::logic_error("gpu rank: a communicating op is not a local op");
  }
};

}  // namespace

void run_local_op(GpuRank& rank, const OpBody& body, TraceEvent event, cudaStream_t stream, Timeline& timeline) {
  const Enqueue enqueue{rank, stream};
  if (!is_local_op(body)) throw std::logic_error("gpu rank: a communicating op is not a local op");
  if (const auto* compute = std::get_if<ComputeOp>(&body); compute && compute->kernels.empty()) {
    enqueue(*compute);  // a skipped block: no kernel, but a fresh gradient slot is zeroed
    return;
  }
  timeline.timed(
      stream, std::move(event), [&] { std::visit(enqueue, body); }, /*need_end=*/false);
}

}  // namespace ringlab::gpu
