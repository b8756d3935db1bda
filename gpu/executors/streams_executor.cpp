// gpu-streams: P virtual ranks on one GPU. Sections:
//   [bookkeeping]  messages, collectives
//   [scheduler]    the round-robin walk over the P op lists; deadlock report
//   [ops]          the op interpreter's handlers: local ops (local_ops.hpp), exchanges and waits,
//                  collectives as device copies
//   [results]      timings -> RankSummary and trace events, outputs
//   [contract]     the executor of sim/run/executor.hpp
#include <cuda_runtime_api.h>

#include <algorithm>
#include <deque>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include "gpu/device.hpp"
#include "gpu/executors/executor.hpp"
#include "gpu/executors/gpu_rank.hpp"
#include "gpu/executors/local_ops.hpp"
#include "gpu/kernels/attention_kernels.hpp"
#include "reference/error.hpp"
#include "sim/run/op_interpreter.hpp"

namespace ringlab::gpu {

// ---- [bookkeeping] -----------------------------------------------------------------------------

namespace {

struct Message {
  const void* from = nullptr;
  void* to = nullptr;
  int64_t send_bytes = -1, recv_bytes = -1;
  const Event* from_ready = nullptr;  // sender's compute stream at post
  const Event* to_ready = nullptr;    // receiver's compute stream at post
  const Event* done = nullptr;        // set once the copy is enqueued
  int phase = 0;
  int64_t step = 0;
  std::string label;
};

using MessageKey = std::tuple<int64_t, int64_t, int>;  // (source, destination, tag)

struct CollectiveRun {
  CollectiveOp op;  // as seen by the first member to arrive (members, kind)
  std::map<int64_t, const Event*> posted;  // member -> its compute stream at arrival
  std::vector<const Event*> done;          // per member, once enqueued
  bool enqueued = false;
};

using CollectiveKey = std::tuple<int, int64_t, int, int64_t>;  // (phase, step, kind, group)

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
  std::map<MessageKey, Message> messages;
  std::vector<std::map<std::tuple<int, int, int64_t>, std::vector<MessageKey>>> posted;  // [rank]
  std::map<CollectiveKey, CollectiveRun> collectives;
  std::vector<RankSummary> summaries;
  std::vector<OpInterpreter> interpreters;  // [rank], counting into summaries

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

  // ---- [scheduler] -----------------------------------------------------------------------------

  ExecutionResult run(bool download, bool trace) {
    RINGLAB_CUDA_CHECK(cudaSetDevice(options.device));
    timeline.clear(), messages.clear(), collectives.clear();
    posted.assign(static_cast<size_t>(P), {});
    summaries.assign(static_cast<size_t>(P), RankSummary{});
    interpreters.clear();
    for (int64_t r = 0; r < P; ++r) interpreters.emplace_back(plan, r, summaries[static_cast<size_t>(r)]);
    // One start event that every stream waits for, so that all times are measured from it.
    const Event* start = record(compute[0].get(), true);
    for (int64_t r = 0; r < P; ++r) {
      start->wait_on(compute_of(r));
      start->wait_on(comm_of(r));
      rank_of(r).reset(compute_of(r));  // the accumulator back to the merge's identity
    }

    std::vector<size_t> next(static_cast<size_t>(P), 0);
    for (;;) {
      bool all_done = true, moved = false;
      for (int64_t r = 0; r < P; ++r) {
        std::vector<Op>& list = ops[static_cast<size_t>(r)];
        size_t& pc = next[static_cast<size_t>(r)];
        while (pc < list.size() && execute(r, list[pc])) {
          ++pc;
          moved = true;
        }
        all_done = all_done && pc == list.size();
      }
      if (all_done) break;
      if (!moved) throw CommError(deadlock_report(next));
    }

    std::vector<const Event*> ends;
    for (int64_t r = 0; r < P; ++r) {
      ends.push_back(record(compute[static_cast<size_t>(r)].get(), true));
      ends.push_back(record(comm[static_cast<size_t>(r)].get(), true));
    }
    RINGLAB_CUDA_CHECK(cudaDeviceSynchronize());
    return results(*start, ends, download, trace);
  }

  std::string deadlock_report(const std::vector<size_t>& next) const {
    std::ostringstream text;
    text << "deadlock on gpu-streams: no rank can move;";
    for (int64_t r = 0; r < P; ++r) {
      const size_t pc = next[static_cast<size_t>(r)];
      const std::vector<Op>& list = ops[static_cast<size_t>(r)];
      if (pc >= list.size()) continue;
      const Op& op = list[pc];
      text << " rank " << r << " at step " << op.step << " (" << plan.phases()[static_cast<size_t>(op.phase)].name
           << ") waits for ";
      if (const auto* w = std::get_if<WaitOp>(&op.body)) {
        text << "exchange " << w->exchange_id << " of step " << w->exchange_step << ";";
      } else if (const auto* c = std::get_if<CollectiveOp>(&op.body)) {
        text << collective_name(c->collective) << " with " << group_text(c->members) << ";";
      } else {
        text << "an operation;";
      }
    }
    return text.str();
  }

  // ---- [ops] -----------------------------------------------------------------------------------

  // The op interpreter's handlers for rank r: the local ops as timed work on its compute stream,
  // the communication as device copies between ranks. false = wait for another rank to post.
  struct RankOps {
    Impl& impl;
    int64_t r;
    template <class Local>
    bool execute(const Op& op, const Local&, TraceEvent event) {
      run_local_op(impl.rank_of(r), op.body, std::move(event), impl.compute_of(r), impl.timeline);
      return true;
    }
    bool execute(const Op& op, const ExchangeOp& body, const TraceEvent&) { return impl.execute(r, op, body); }
    bool execute(const Op& op, const WaitOp& body, const TraceEvent&) { return impl.execute(r, op, body); }
    bool execute(const Op& op, const CollectiveOp& body, const TraceEvent&) { return impl.execute(r, op, body); }
  };

  // Enqueues one op of rank r; false when it must wait for another rank to post first.
  bool execute(int64_t r, const Op& op) {
    RankOps handler{*this, r};
    return interpreters[static_cast<size_t>(r)].run(op, handler);
  }

  cudaStream_t compute_of(int64_t r) { return compute[static_cast<size_t>(r)].get(); }
  cudaStream_t comm_of(int64_t r) { return comm[static_cast<size_t>(r)].get(); }
  GpuRank& rank_of(int64_t r) { return *ranks[static_cast<size_t>(r)]; }

  bool execute(int64_t r, const Op& op, const ExchangeOp& body) {
    const Event* ready = record(compute_of(r));  // the slot's data, and the receive slot, are ready here
    std::vector<MessageKey> keys;
    if (body.send_to >= 0) {
      const MessageKey key{r, body.send_to, body.tag};
      Message& m = messages[key];
      m.from = rank_of(r).slot_block(body.send_slot);
      m.send_bytes = rank_of(r).slot_block_bytes(body.send_slot);
      m.from_ready = ready;
      m.phase = op.phase, m.step = op.step, m.label = plan.phases()[static_cast<size_t>(op.phase)].name;
      summaries[static_cast<size_t>(r)].counters.messages_sent += 1;
      summaries[static_cast<size_t>(r)].counters.bytes_sent += m.send_bytes;
      try_enqueue(key, m);
      keys.push_back(key);
    }
    if (body.recv_from >= 0) {
      const MessageKey key{body.recv_from, r, body.tag};
      Message& m = messages[key];
      m.to = rank_of(r).slot_block(body.recv_slot);
      m.recv_bytes = rank_of(r).slot_block_bytes(body.recv_slot);
      m.to_ready = ready;
      summaries[static_cast<size_t>(r)].counters.messages_received += 1;
      summaries[static_cast<size_t>(r)].counters.bytes_received += m.recv_bytes;
      try_enqueue(key, m);
      keys.push_back(key);
    }
    posted[static_cast<size_t>(r)][{op.phase, body.id, op.step}] = std::move(keys);
    return true;
  }

  // The copy of a message, once both ends have posted: on the receiver's transfer stream.
  void try_enqueue(const MessageKey& key, Message& m) {
    if (m.done || !m.from_ready || !m.to_ready) return;
    const auto [source, destination, tag] = key;
    if (m.send_bytes != m.recv_bytes) {
      throw CommError("rank " + std::to_string(source) + " sends " + std::to_string(m.send_bytes) + " bytes to rank " +
                      std::to_string(destination) + " (tag " + std::to_string(tag) + ") which expects " +
                      std::to_string(m.recv_bytes));
    }
    cudaStream_t stream = comm_of(destination);
    m.from_ready->wait_on(stream);
    m.to_ready->wait_on(stream);
    TraceEvent e;
    e.name = "recv";
    e.rank = static_cast<int>(destination);
    e.lane = TraceLane::comm;
    e.step = static_cast<int>(m.step);
    e.label = m.label;
    e.peer = static_cast<int>(source);
    e.tag = tag;
    e.bytes = m.send_bytes;
    m.done = timeline.timed(stream, e, [&] {
      RINGLAB_CUDA_CHECK(
          cudaMemcpyAsync(m.to, m.from, static_cast<size_t>(m.send_bytes), cudaMemcpyDeviceToDevice, stream));
    });
    e.name = "send";  // the same copy, seen from the sender
    e.rank = static_cast<int>(source);
    e.peer = static_cast<int>(destination);
    timeline.also(std::move(e));
  }

  bool execute(int64_t r, const Op& op, const WaitOp& body) {
    auto& mine = posted[static_cast<size_t>(r)];
    const auto found = mine.find({op.phase, body.exchange_id, body.exchange_step});
    if (found == mine.end()) {
      throw CommError("rank " + std::to_string(r) + " waits for exchange " + std::to_string(body.exchange_id) +
                      " of step " + std::to_string(body.exchange_step) + ", which it never posted");
    }
    for (const MessageKey& key : found->second)
      if (!messages.at(key).done) return false;  // the peer has not posted its side yet
    for (const MessageKey& key : found->second) messages.at(key).done->wait_on(compute_of(r));
    mine.erase(found);
    return true;
  }

  bool execute(int64_t r, const Op& op, const CollectiveOp& body) {
    const CollectiveKey key{op.phase, op.step, static_cast<int>(body.collective), body.group};
    CollectiveRun& run = collectives[key];
    if (!run.posted.count(r)) {
      if (run.posted.empty()) run.op = body;
      if (body.collective == Collective::all_gather_kv) rank_of(r).pack_own_kv(compute_of(r));
      run.posted[r] = record(compute_of(r));
      RankSummary& s = summaries[static_cast<size_t>(r)];
      s.counters.collectives += 1;
      s.counters.bytes_sent += body.send_bytes;
      s.counters.bytes_received += body.recv_bytes;
      if (run.posted.size() == run.op.members.size()) enqueue_collective(run, op);
    }
    if (!run.enqueued) return false;
    for (const Event* done : run.done) done->wait_on(compute_of(r));
    return true;
  }

  // Every member's share of the collective, on that member's transfer stream, after every
  // member has posted; the member's done event covers what it receives.
  void enqueue_collective(CollectiveRun& run, const Op& op) {
    const std::vector<int64_t>& members = run.op.members;
    const Collective kind = run.op.collective;
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
              RINGLAB_CUDA_CHECK(cudaMemcpyAsync(rank_of(to).slot_block(Slot::gathered_kv, static_cast<int64_t>(fi)),
                                                 from.own_kv_block(),
                                                 static_cast<size_t>(from.slot_block_bytes(Slot::kv0)),
                                                 cudaMemcpyDeviceToDevice, stream));
            }
            break;
          case Collective::reduce_scatter_dkv: {
            // dkv0 = block ti of member 0's gathered dK/dV, + member 1's, ... (the sim's order)
            float* into = static_cast<float*>(rank_of(to).slot_block(Slot::dkv0));
            const int64_t bytes = rank_of(to).slot_block_bytes(Slot::dkv0);
            for (size_t fi = 0; fi < members.size(); ++fi) {
              const float* part =
                  static_cast<const float*>(rank_of(members[fi]).slot_block(Slot::gathered_dkv, static_cast<int64_t>(ti)));
              if (fi == 0) {
                RINGLAB_CUDA_CHECK(cudaMemcpyAsync(into, part, static_cast<size_t>(bytes), cudaMemcpyDeviceToDevice, stream));
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
                const RowCopy c = rank_of(to).a2a_copy(kind, source[t], static_cast<int64_t>(fi), dest[t],
                                                       static_cast<int64_t>(ti));
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
    run.enqueued = true;
  }

  // ---- [results] -------------------------------------------------------------------------------

  ExecutionResult results(const Event& start, const std::vector<const Event*>& ends, bool download, bool trace) {
    ExecutionResult result;
    result.executor = streams_label(plan, options);
    double device_ms = 0;
    for (const Event* end : ends) device_ms = std::max(device_ms, static_cast<double>(elapsed_ms(start, *end)));
    result.time = {TimeKind::device, device_ms * 1e-3};
    std::vector<TraceEvent> events =
        timeline.resolve(start, [&](int rank) -> RankSummary& { return summaries[static_cast<size_t>(rank)]; });
    result.ranks = summaries;
    if (trace) {
      result.trace = std::move(events);
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

std::string StreamsExecutor::label(const Plan& plan) const { return streams_label(plan, options_); }

ExecutionResult StreamsExecutor::execute(const Plan& plan, const AttentionInputs<float>& inputs,
                                         const ExecuteOptions& options) {
  return with_comm_faults(label(plan), [&] {
    StreamsRun run(plan, inputs, options_);
    return run.run(true, options.trace);
  });
}

std::string streams_label(const Plan& plan, const GpuRunOptions& options) {
  std::string device = "GPU " + std::to_string(options.device);
  try {
    device = device_description(options.device);
  } catch (const CudaError&) {
  }
  return "gpu-streams, " + std::to_string(plan.ranks()) + (plan.ranks() == 1 ? " virtual rank" : " virtual ranks") +
         " on " + device + " (" + dtype_name(options.dtype) + ")";
}

}  // namespace ringlab::gpu
