// gpu-streams: P virtual ranks on one GPU. The host enqueues every rank's ops in the order of
// the plan walker (sim/plan/walk.hpp, with rendezvous sends: a Wait comes after both of its
// exchange's copies are enqueued), so it never has to wait for the device. Sections:
//   [bookkeeping]  the two halves of a message, collectives
//   [dispatch]     the walk: ops enqueued in walk order; the one deadlock description; or the
//                  walk captured once as a CUDA graph, launched per run
//   [ops]          the op interpreter's handlers: local ops (local_ops.hpp), exchanges and waits,
//                  collectives as device copies
//   [results]      timings -> RankSummary and trace events, outputs
//   [contract]     the executor of sim/pipeline/executor.hpp
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <tuple>

#include "executors/gpu/executor.hpp"
#include "executors/gpu/gpu_rank.hpp"
#include "executors/gpu/local_ops.hpp"
#include "gpu/device.hpp"
#include "gpu/kernels/attention_kernels.hpp"
#include "reference/error.hpp"
#include "sim/pipeline/op_interpreter.hpp"
#include "sim/plan/walk.hpp"

namespace ringlab::gpu {

// ---- [bookkeeping] -----------------------------------------------------------------------------

namespace {

// The halves of a message, posted by the sending and the receiving Exchange.
struct SendSide {
  const void* from = nullptr;
  int64_t bytes = -1;
  const Event* ready = nullptr;  // the sender's compute stream at post: the slot's data is ready
};
struct RecvSide {
  void* to = nullptr;
  int64_t bytes = -1;
  const Event* ready = nullptr;  // the receiver's compute stream at post: the slot is free
};

// A collective's device work: every member's stream at entry, and each member's copies done.
struct CollectiveRun {
  std::map<int64_t, const Event*> posted;  // member -> its compute stream at entry
  std::vector<const Event*> done;          // per member, once enqueued
  const Op* op = nullptr;                  // the first member's op (for its trace event)
};

std::string group_text(const std::vector<int64_t>& members) {
  std::string text = "group {";
  for (size_t i = 0; i < members.size(); ++i) text += (i ? "," : "") + std::to_string(members[i]);
  return text + "}";
}

}  // namespace

struct StreamsRun::Impl {
  const Plan& plan;
  GpuRunOptions options;
  int64_t P;
  std::vector<std::unique_ptr<GpuRank>> ranks;
  std::vector<Stream> compute, comm;
  std::vector<std::vector<Op>> ops;

  // Per run.
  Timeline timeline;
  std::vector<SendSide> sends;                               // [walk message id]
  std::map<std::pair<int64_t, int64_t>, RecvSide> receives;  // (rank, op index) of the receiving Exchange
  std::vector<const Event*> copied;                          // [walk message id]: the copy's end, once enqueued
  std::vector<CollectiveRun> collectives;                    // [walk gathering id]
  std::vector<RankSummary> summaries;
  std::vector<OpInterpreter> interpreters;  // [rank], counting into summaries

  // GpuRunOptions::graph: the walk captured once; what it counted; the launch's two timing events.
  Graph graph;
  std::vector<RankSummary> graph_summaries;
  Event graph_start{true}, graph_end{true}, graph_start_untimed, graph_end_untimed;
  double host_enqueue_ms = 0;  // the last run's (StreamsRun::host_enqueue_ms)

  static double ms_since(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  }

  Impl(const Plan& plan_, const AttentionInputs<float>& inputs, const GpuRunOptions& options_)
      : plan(plan_), options(options_), P(plan_.ranks()) {
    RINGLAB_CUDA_CHECK(cudaSetDevice(options.device));
    for (int64_t r = 0; r < P; ++r) {
      ranks.push_back(std::make_unique<GpuRank>(plan, r, options.dtype, inputs));
      compute.emplace_back();
      comm.emplace_back();
      ops.push_back(expand(plan, r));
    }
  }

  const Event* record(cudaStream_t stream, bool timing = false) { return timeline.record(stream, timing); }

  // ---- [dispatch] ------------------------------------------------------------------------------

  // measure = false: a warm-up, its events without timing, nothing read back.
  ExecutionResult run(bool download, bool trace, bool measure = true) {
    RINGLAB_CUDA_CHECK(cudaSetDevice(options.device));
    if (options.graph) return run_graph(download, trace, measure);
    const auto host_start = std::chrono::steady_clock::now();
    begin_walk(measure, options.span_events || trace);
    // One start event that every stream waits for, so that all times are measured from it.
    const Event* start = record(compute[0].get(), true);
    walk(*start);
    std::vector<const Event*> ends;
    for (int64_t r = 0; r < P; ++r) {
      ends.push_back(record(compute[static_cast<size_t>(r)].get(), true));
      ends.push_back(record(comm[static_cast<size_t>(r)].get(), true));
    }
    host_enqueue_ms = ms_since(host_start);
    RINGLAB_CUDA_CHECK(cudaDeviceSynchronize());
    if (!measure) return {};
    double device_ms = 0;
    for (const Event* end : ends) device_ms = std::max(device_ms, static_cast<double>(elapsed_ms(*start, *end)));
    std::vector<TraceEvent> events =
        timeline.resolve(*start, [&](int rank) -> RankSummary& { return summaries[static_cast<size_t>(rank)]; });
    return results(device_ms, summaries, trace ? std::move(events) : std::vector<TraceEvent>{}, download);
  }

  // A fresh walk's bookkeeping: no events, messages or counts from the last one.
  void begin_walk(bool timing, bool spans) {
    timeline.clear(), sends.clear(), receives.clear(), copied.clear(), collectives.clear();
    timeline.set_timing(timing);
    timeline.set_spans(spans);
    summaries.assign(static_cast<size_t>(P), RankSummary{});
    interpreters.clear();
    for (int64_t r = 0; r < P; ++r) interpreters.emplace_back(plan, r, summaries[static_cast<size_t>(r)]);
  }

  // Every stream waits for `start`; each rank's accumulator is reset; then every rank's ops are
  // enqueued in walk order.
  void walk(const Event& start) {
    for (int64_t r = 0; r < P; ++r) {
      start.wait_on(compute_of(r));
      start.wait_on(comm_of(r));
      rank_of(r).reset(compute_of(r));  // the accumulator back to the merge's identity
    }
    Dispatch dispatch{*this};
    WalkOptions walk_options;
    walk_options.sends_need_receiver = true;  // a copy is enqueued once both ends have posted
    const WalkResult result = walk_plan(plan, ops, dispatch, walk_options);
    if (!result.finished()) {
      throw CommError("deadlock on gpu-streams: no rank can move; " + one_line(describe_deadlock(plan, result)));
    }
  }

  // GpuRunOptions::graph. The first run walks the plan once as usual, untimed, so that every
  // kernel's module is loaded and its attributes set outside the capture. It then captures the
  // walk on compute stream 0: every other stream joins the capture by waiting on its first event,
  // and is joined back at the end (compute 0 waits on each stream's last event), so the graph
  // holds the walk's every dependency and nothing else. Each run launches the graph between two
  // events on compute stream 0.
  ExecutionResult run_graph(bool download, bool trace, bool measure) {
    if (trace) throw UsageError("a CUDA graph is timed as a whole: no trace; drop the graph or the trace");
    cudaStream_t origin = compute[0].get();
    if (graph.empty()) {
      begin_walk(false, false);
      walk(*record(origin));
      RINGLAB_CUDA_CHECK(cudaDeviceSynchronize());
      begin_walk(false, false);
      graph = Graph::capture(origin, [&] {
        walk(*record(origin));
        for (int64_t r = 0; r < P; ++r) {
          if (r > 0) record(compute_of(r))->wait_on(origin);
          record(comm_of(r))->wait_on(origin);
        }
      });
      graph_summaries = summaries;
      // The capture's spans are off: resolving adds its FLOPs and reads no event.
      timeline.resolve(graph_start,
                       [&](int rank) -> RankSummary& { return graph_summaries[static_cast<size_t>(rank)]; });
      timeline.clear();
    }
    const Event& start = measure ? graph_start : graph_start_untimed;
    const Event& end = measure ? graph_end : graph_end_untimed;
    const auto host_start = std::chrono::steady_clock::now();
    start.record(origin);
    graph.launch(origin);
    end.record(origin);
    host_enqueue_ms = ms_since(host_start);
    RINGLAB_CUDA_CHECK(cudaDeviceSynchronize());
    if (!measure) return {};
    return results(static_cast<double>(elapsed_ms(start, end)), graph_summaries, {}, download);
  }

  static std::string one_line(std::string text) {
    while (!text.empty() && text.back() == '\n') text.pop_back();
    for (size_t at = text.find('\n'); at != std::string::npos; at = text.find('\n', at)) text.replace(at, 1, "; ");
    return text;
  }

  // The walk's visitor: each visited op runs through the rank's op interpreter; a message's copy
  // is enqueued when it meets its receive, a collective when its last member enters.
  struct Dispatch final : WalkVisitor {
    Impl& impl;
    explicit Dispatch(Impl& owner) : impl(owner) {}
    void visit(const WalkVisit& visit) override {
      RankOps handler{impl, visit.at.rank, &visit};
      impl.interpreters[static_cast<size_t>(visit.at.rank)].run(*visit.op, handler);
    }
    void matched(const WalkMessage& message, const OpRef& receive) override { impl.enqueue_copy(message, receive); }
    void entered(const CollectiveEntry& entry) override { impl.enter(entry); }
    void completed(const CollectiveGathering& gathering) override { impl.enqueue_collective(gathering); }
  };

  // ---- [ops] -----------------------------------------------------------------------------------

  // The op interpreter's handlers for rank r: the local ops as timed work on its compute stream,
  // the communication as device copies between ranks, in walk order (`visit` says what the walk
  // matched).
  struct RankOps {
    Impl& impl;
    int64_t r;
    const WalkVisit* visit;
    template <class Local>
    void execute(const Op& op, const Local&, TraceEvent event) {
      run_local_op(impl.rank_of(r), op.body, std::move(event), impl.compute_of(r), impl.timeline);
    }
    void execute(const Op&, const ExchangeOp& body, const TraceEvent&) { impl.post(*visit, body); }
    void execute(const Op&, const WaitOp&, const TraceEvent&) { impl.wait(*visit); }
    void execute(const Op&, const CollectiveOp&, const TraceEvent&) { impl.leave(*visit); }
  };

  cudaStream_t compute_of(int64_t r) { return compute[static_cast<size_t>(r)].get(); }
  cudaStream_t comm_of(int64_t r) { return comm[static_cast<size_t>(r)].get(); }
  GpuRank& rank_of(int64_t r) { return *ranks[static_cast<size_t>(r)]; }

  // Posts the halves of an exchange: the data to send and the slot to receive into are ready
  // once the rank's compute stream reaches this point.
  void post(const WalkVisit& visit, const ExchangeOp& body) {
    const int64_t r = visit.at.rank;
    const Event* ready = record(compute_of(r));
    RankCounters& counters = summaries[static_cast<size_t>(r)].counters;
    if (visit.sent) {
      if (sends.size() <= static_cast<size_t>(visit.sent->id)) sends.resize(static_cast<size_t>(visit.sent->id) + 1);
      sends[static_cast<size_t>(visit.sent->id)] = {rank_of(r).slot_block(body.send_slot),
                                                    rank_of(r).slot_block_bytes(body.send_slot), ready};
      counters.messages_sent += 1;
      counters.bytes_sent += rank_of(r).slot_block_bytes(body.send_slot);
    }
    if (body.recv_from >= 0) {
      receives[{r, visit.at.index}] = {rank_of(r).slot_block(body.recv_slot),
                                       rank_of(r).slot_block_bytes(body.recv_slot), ready};
      counters.messages_received += 1;
      counters.bytes_received += rank_of(r).slot_block_bytes(body.recv_slot);
    }
  }

  // The copy of a message, once both ends have posted: on the receiver's transfer stream.
  void enqueue_copy(const WalkMessage& message, const OpRef& receive) {
    const SendSide& from = sends.at(static_cast<size_t>(message.id));
    const RecvSide& to = receives.at({receive.rank, receive.index});
    if (from.bytes != to.bytes) {
      throw CommError("rank " + std::to_string(message.from()) + " sends " + std::to_string(from.bytes) +
                      " bytes to rank " + std::to_string(message.to) + " (tag " + std::to_string(message.tag) +
                      ") which expects " + std::to_string(to.bytes));
    }
    cudaStream_t stream = comm_of(message.to);
    from.ready->wait_on(stream);
    to.ready->wait_on(stream);
    TraceEvent e;
    e.name = "recv";
    e.rank = static_cast<int>(message.to);
    e.lane = TraceLane::comm;
    e.step = static_cast<int>(message.step);
    e.label = plan.phases()[static_cast<size_t>(message.phase)].name;
    e.peer = static_cast<int>(message.from());
    e.tag = message.tag;
    e.bytes = from.bytes;
    if (copied.size() <= static_cast<size_t>(message.id)) copied.resize(static_cast<size_t>(message.id) + 1, nullptr);
    copied[static_cast<size_t>(message.id)] = timeline.timed(stream, e, [&] {
      RINGLAB_CUDA_CHECK(
          cudaMemcpyAsync(to.to, from.from, static_cast<size_t>(from.bytes), cudaMemcpyDeviceToDevice, stream));
    });
    e.name = "send";  // the same copy, seen from the sender
    e.rank = static_cast<int>(message.from());
    e.peer = static_cast<int>(message.to);
    timeline.also(std::move(e));
  }

  // A Wait: the rank's compute stream waits for its exchange's copies (both enqueued by now: the
  // walk visits a Wait after its receive and its send have met their other ends).
  void wait(const WalkVisit& visit) {
    const int64_t r = visit.at.rank;
    if (!visit.exchange) {
      const auto& w = std::get<WaitOp>(visit.op->body);
      throw CommError("rank " + std::to_string(r) + " waits for exchange " + std::to_string(w.exchange_id) +
                      " of step " + std::to_string(w.exchange_step) + ", which it never posted");
    }
    for (const WalkMessage* message : {visit.sent, visit.received})
      if (message) copied.at(static_cast<size_t>(message->id))->wait_on(compute_of(r));
  }

  // A rank enters a collective: its data is ready at this point of its compute stream.
  void enter(const CollectiveEntry& entry) {
    if (entry.kind_mismatch) {
      throw CommError("rank " + std::to_string(entry.at.rank) + " enters " +
                      collective_name(entry.collective->collective) + " while its group is in " +
                      collective_name(entry.gathering->kind()));
    }
    const int64_t r = entry.at.rank;
    if (collectives.size() <= static_cast<size_t>(entry.gathering->id)) {
      collectives.resize(static_cast<size_t>(entry.gathering->id) + 1);
    }
    CollectiveRun& run = collectives[static_cast<size_t>(entry.gathering->id)];
    if (!run.op) run.op = entry.op;
    if (entry.collective->collective == Collective::all_gather_kv) rank_of(r).pack_own_kv(compute_of(r));
    run.posted[r] = record(compute_of(r));
    RankCounters& counters = summaries[static_cast<size_t>(r)].counters;
    counters.collectives += 1;
    counters.bytes_sent += entry.collective->send_bytes;
    counters.bytes_received += entry.collective->recv_bytes;
  }

  // A member's Collective op, after the collective is enqueued: its compute stream waits for it.
  void leave(const WalkVisit& visit) {
    for (const Event* done : collectives.at(static_cast<size_t>(visit.gathering->id)).done) {
      done->wait_on(compute_of(visit.at.rank));
    }
  }

  // Every member's share of the collective, on that member's transfer stream, after every
  // member has posted; the member's done event covers what it receives.
  void enqueue_collective(const CollectiveGathering& gathering) {
    CollectiveRun& run = collectives.at(static_cast<size_t>(gathering.id));
    const Op& op = *run.op;
    const std::vector<int64_t>& members = gathering.op->members;
    const Collective kind = gathering.kind();
    for (size_t ti = 0; ti < members.size(); ++ti) {
      const int64_t to = members[ti];
      cudaStream_t stream = comm_of(to);
      for (const auto& [member, ready] : run.posted) ready->wait_on(stream);
      TraceEvent e = op_trace_event(plan, to, op);  // name, step, phase label, bytes received
      e.group = group_text(members);
      timeline.timed(stream, std::move(e), [&] {
        switch (kind) {
          case Collective::all_gather_kv:
            for (size_t fi = 0; fi < members.size(); ++fi) {
              GpuRank& from = rank_of(members[fi]);
              RINGLAB_CUDA_CHECK(cudaMemcpyAsync(
                  rank_of(to).slot_block(Slot::gathered_kv, static_cast<int64_t>(fi)), from.own_kv_block(),
                  static_cast<size_t>(from.slot_block_bytes(Slot::kv0)), cudaMemcpyDeviceToDevice, stream));
            }
            break;
          case Collective::reduce_scatter_dkv: {
            // dkv0 = block ti of member 0's gathered dK/dV, + member 1's, ... (the sim's order)
            float* into = static_cast<float*>(rank_of(to).slot_block(Slot::dkv0));
            const int64_t bytes = rank_of(to).slot_block_bytes(Slot::dkv0);
            for (size_t fi = 0; fi < members.size(); ++fi) {
              const float* part = static_cast<const float*>(
                  rank_of(members[fi]).slot_block(Slot::gathered_dkv, static_cast<int64_t>(ti)));
              if (fi == 0) {
                RINGLAB_CUDA_CHECK(
                    cudaMemcpyAsync(into, part, static_cast<size_t>(bytes), cudaMemcpyDeviceToDevice, stream));
              } else {
                add_into(into, part, bytes / 4, stream);
              }
            }
            break;
          }
          default: {  // the Ulysses all-to-alls: member fi's share for ti, read in place
            std::vector<GpuRank::A2aTensor> dest = rank_of(to).a2a_tensors(kind);
            for (size_t fi = 0; fi < members.size(); ++fi) {
              std::vector<GpuRank::A2aTensor> source = rank_of(members[fi]).a2a_tensors(kind);
              for (size_t t = 0; t < dest.size(); ++t) {
                const RowCopy c =
                    rank_of(to).a2a_copy(kind, source[t], static_cast<int64_t>(fi), dest[t], static_cast<int64_t>(ti));
                if (dest[t].lse) {
                  copy_lse_rows(c, stream);
                } else {
                  copy_token_rows(c, stream);
                }
              }
            }
          }
        }
      });
      run.done.push_back(record(stream));
    }
  }

  // ---- [results] -------------------------------------------------------------------------------

  // `trace`: the events to keep (none when not tracing).
  ExecutionResult results(double device_ms, const std::vector<RankSummary>& ranks_summary,
                          std::vector<TraceEvent> trace, bool download) {
    ExecutionResult result;
    result.executor = streams_label(plan, options);
    result.time = {TimeKind::device, device_ms * 1e-3};
    result.ranks = ranks_summary;
    if (!trace.empty()) {
      result.trace = std::move(trace);
      std::stable_sort(result.trace.begin(), result.trace.end(), [](const TraceEvent& a, const TraceEvent& b) {
        return std::tie(a.rank, a.start_us) < std::tie(b.rank, b.start_us);
      });
    }
    if (download) {
      result.outputs = allocate_outputs(plan);
      for (int64_t r = 0; r < P; ++r) {
        const GpuRank& rank = rank_of(r);
        scatter_local_outputs(rank.download_outputs(plan.spec().backward), rank.local_positions(), result.outputs);
      }
    }
    return result;
  }
};

// ---- [contract] --------------------------------------------------------------------------------

StreamsRun::StreamsRun(const Plan& plan, const AttentionInputs<float>& inputs, const GpuRunOptions& options)
    : impl_(std::make_unique<Impl>(plan, inputs, options)) {}

StreamsRun::~StreamsRun() = default;

ExecutionResult StreamsRun::run(bool download, bool trace) { return impl_->run(download, trace); }

void StreamsRun::warm_up() { impl_->run(false, false, false); }

void StreamsRun::set_span_events(bool on) { impl_->options.span_events = on; }

double StreamsRun::host_enqueue_ms() const { return impl_->host_enqueue_ms; }

void StreamsRun::set_graph(bool on) {
  impl_->options.graph = on;
  if (!on) impl_->graph = Graph();
}

std::string StreamsExecutor::label(const Plan& plan) const { return streams_label(plan, options_); }

ExecutionResult StreamsExecutor::execute(const Plan& plan, const AttentionInputs<float>& inputs,
                                         const ExecuteOptions& options) {
  return with_comm_faults(label(plan), [&] {
    StreamsRun run(plan, inputs, options_);
    for (int i = 0; i < options_.warmup; ++i) run.warm_up();
    return run.run(true, options.trace);
  });
}

namespace {
std::string graph_text(int warmup) {
  const std::string graph = "one CUDA graph, captured after an untimed plain run, ";
  if (warmup == 0) return graph + "its first launch timed";
  return graph + "timed after " + std::to_string(warmup) + (warmup == 1 ? " warm-up launch" : " warm-up launches");
}
}  // namespace

std::string streams_label(const Plan& plan, const GpuRunOptions& options) {
  std::string device = "GPU " + std::to_string(options.device);
  try {
    device = device_description(options.device);
  } catch (const CudaError&) {
  }
  // Two streams per rank (compute, transfers): where they outnumber the hardware queues, say so.
  const std::string sharing = queue_sharing(2 * plan.ranks());
  return "gpu-streams, " + std::to_string(plan.ranks()) + (plan.ranks() == 1 ? " virtual rank" : " virtual ranks") +
         " on " + device + " (" + dtype_name(options.dtype) + ", " +
         (options.graph ? graph_text(options.warmup) : warmup_text(options.warmup)) +
         (sharing.empty() ? "" : "; " + sharing) + ")";
}

}  // namespace ringlab::gpu
