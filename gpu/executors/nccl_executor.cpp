// gpu-nccl. Sections: [errors and support] [one rank] [ops] [single process] [merging]
#include "gpu/executors/nccl_executor.hpp"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <deque>
#include <exception>
#include <map>
#include <thread>
#include <tuple>

#include "gpu/device.hpp"
#include "gpu/kernels/attention_kernels.hpp"
#include "reference/error.hpp"
#include "sim/plan/queries.hpp"

namespace ringlab::gpu {

// ---- [errors and support] ----------------------------------------------------------------------

void throw_nccl_error(ncclResult_t result, const char* call, const char* file, int line) {
  const std::string message = std::string(call) + " failed at " + file + ":" + std::to_string(line) + ": " +
                              ncclGetErrorString(result);
  if (result == ncclInvalidUsage || result == ncclInvalidArgument) throw UsageError(message);
  throw CommError(message);
}

std::string nccl_version_text() {
  int code = 0;
  if (ncclGetVersion(&code) != ncclSuccess) return "NCCL (version unknown)";
  const int major = code >= 10000 ? code / 10000 : code / 1000;
  const int minor = code >= 10000 ? code / 100 % 100 : code / 100 % 10;
  const int patch = code % 100;
  return "NCCL " + std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
}

int64_t nccl_max_single_process_ranks(int devices) {
  int code = 0;
  (void)ncclGetVersion(&code);
  const char* multi = std::getenv("NCCL_MULTI_RANK_GPU_ENABLE");
  // NCCL 2.30's experimental switch: about two ranks per GPU (see gpu/README.md).
  if (code >= 23000 && multi && std::string(multi) == "1") return 2 * static_cast<int64_t>(devices);
  return devices;
}

std::string nccl_single_process_support(int64_t ranks) {
  std::string why;
  const int devices = device_count(&why);
  if (devices == 0) return "no CUDA device visible (" + why + ")";
  if (ranks <= nccl_max_single_process_ranks(devices)) return "";
  return "gpu-nccl needs one GPU per rank: --ranks " + std::to_string(ranks) + " but " + std::to_string(devices) +
         (devices == 1 ? " device is" : " devices are") + " visible, and " + nccl_version_text() +
         " refuses two ranks on one GPU (\"Duplicate GPU detected\", since 2.5.6; NCCL >= 2.30 has the experimental "
         "NCCL_MULTI_RANK_GPU_ENABLE=1); use --executor streams for virtual ranks on one GPU, fewer --ranks, or "
         "mpirun across machines";
}

std::string nccl_label(const Plan& plan, const GpuRunOptions& options, bool multi_process) {
  const int64_t P = plan.ranks();
  return "gpu-nccl, " + std::to_string(P) + (P == 1 ? " rank, " : " ranks, ") +
         (multi_process ? "one process per rank (mpirun)" : "single process") + ", " + nccl_version_text() + " (" +
         dtype_name(options.dtype) + ")";
}

// ---- [one rank] --------------------------------------------------------------------------------

namespace {

struct Timed {
  const Event* start = nullptr;
  const Event* end = nullptr;
  TraceEvent event;
};

class NcclRank {
 public:
  NcclRank(const Plan& plan, int64_t rank, ncclComm_t world, const AttentionInputs<float>& inputs,
           const GpuRunOptions& options)
      : plan_(plan), rank_(rank), world_(world), options_(options), state_(plan, rank, options.dtype, inputs) {
    // The ring family's communicator: the world when there is no Ulysses dimension.
    ring_ = world_;
    if (plan_uses(plan, Family::ring) && plan.ulysses() > 1) {
      RINGLAB_NCCL_CHECK(ncclCommSplit(world_, static_cast<int>(plan.ulysses_index(rank)),
                                       static_cast<int>(plan.ring_position(rank)), &split_, nullptr));
      ring_ = split_;
    }
  }
  NcclRank(const NcclRank&) = delete;
  NcclRank& operator=(const NcclRank&) = delete;
  ~NcclRank() {
    if (split_) ncclCommDestroy(split_);
  }

  NcclRankResult run() {
    const Event* start = record(compute(), true);
    start->wait_on(comm());
    state_.reset(compute());
    for (const Op& op : expand(plan_, rank_)) std::visit([&](const auto& body) { execute(op, body); }, op.body);
    const Event* end_compute = record(compute(), true);
    const Event* end_comm = record(comm(), true);
    wait_for_device({end_compute, end_comm});

    NcclRankResult result;
    result.device_ms = std::max(elapsed_ms(*start, *end_compute), elapsed_ms(*start, *end_comm));
    for (Timed& t : timed_) {
      t.event.start_us = 1000.0 * elapsed_ms(*start, *t.start);
      t.event.duration_us = 1000.0 * elapsed_ms(*t.start, *t.end);
      if (t.event.lane == TraceLane::compute && t.event.flops >= 0) {
        summary_.counters.compute_seconds += t.event.duration_us * 1e-6;
        summary_.counters.flops += t.event.flops;
      }
      if (options_.trace) result.trace.push_back(std::move(t.event));
    }
    result.summary = summary_;
    result.outputs = state_.download_outputs(plan_.spec().backward);
    result.positions = state_.local_positions();
    return result;
  }

 private:
  cudaStream_t compute() const { return compute_.get(); }
  cudaStream_t comm() const { return comm_.get(); }

  const Event* record(cudaStream_t stream, bool timing = false) {
    events_.emplace_back(timing);
    events_.back().record(stream);
    return &events_.back();
  }
  template <class F>
  const Event* timed_work(cudaStream_t stream, TraceEvent event, F&& enqueue) {
    const Event* start = record(stream, true);
    enqueue();
    const Event* end = record(stream, true);
    timed_.push_back({start, end, std::move(event)});
    return end;
  }
  TraceEvent trace_event(const char* name, TraceLane lane, const Op& op) const {
    TraceEvent e;
    e.name = name;
    e.rank = static_cast<int>(rank_);
    e.lane = lane;
    e.step = static_cast<int>(op.step);
    e.label = plan_.phases()[static_cast<size_t>(op.phase)].name;
    return e;
  }

  // Polls until the device has passed every event, aborting the communicator when it takes
  // longer than the timeout or NCCL reports an asynchronous error — never a silent hang.
  void wait_for_device(const std::vector<const Event*>& ends) {
    const auto begin = std::chrono::steady_clock::now();
    for (;;) {
      bool done = true;
      for (const Event* e : ends) {
        const cudaError_t status = cudaEventQuery(e->get());
        if (status == cudaErrorNotReady) {
          done = false;
        } else {
          RINGLAB_CUDA_CHECK(status);
        }
      }
      if (done) return;
      ncclResult_t async = ncclSuccess;
      RINGLAB_NCCL_CHECK(ncclCommGetAsyncError(world_, &async));
      if (async != ncclSuccess && async != ncclInProgress) {
        ncclCommAbort(world_);
        throw CommError("gpu-nccl rank " + std::to_string(rank_) + ": " + ncclGetErrorString(async));
      }
      const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
      if (waited > options_.timeout) {
        ncclCommAbort(world_);
        throw CommError("gpu-nccl rank " + std::to_string(rank_) + ": the device did not finish within " +
                        std::to_string(options_.timeout) +
                        " s (a peer is missing, or a send has no matching receive); communicator aborted");
      }
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }

  // ---- [ops] -----------------------------------------------------------------------------------

  void execute(const Op& op, const LoadKvOp& body) {
    timed_work(compute(), trace_event("load kv", TraceLane::compute, op), [&] { state_.load_kv(body, compute()); });
  }

  void execute(const Op& op, const ComputeOp& body) {
    if (body.kernels.empty()) {
      ++summary_.blocks_skipped;
      state_.compute(body, compute());
      return;
    }
    ++summary_.blocks_computed;
    if (body.shape == BlockShape::diagonal || body.shape == BlockShape::masked || body.shape == BlockShape::erratum) {
      ++summary_.blocks_masked;
    }
    summary_.pairs += body.pairs;
    summary_.flops += body.flops;
    TraceEvent e = trace_event(body.pass == Pass::forward ? "attention fwd" : "attention bwd", TraceLane::compute, op);
    e.flops = body.flops;
    e.q_block = static_cast<int>(body.q_block);
    e.kv_block = static_cast<int>(body.kv_block);
    e.mask = block_shape_name(body.shape);
    timed_work(compute(), std::move(e), [&] { state_.compute(body, compute()); });
  }

  void execute(const Op& op, const AccumulateOp& body) {
    timed_work(compute(), trace_event("accumulate dK/dV", TraceLane::compute, op),
               [&] { state_.accumulate(body, compute()); });
  }
  void execute(const Op& op, const FinalizeOp&) {
    timed_work(compute(), trace_event("finalize", TraceLane::compute, op), [&] { state_.finalize(compute()); });
  }
  void execute(const Op& op, const PrepareBackwardOp&) {
    timed_work(compute(), trace_event("prepare backward", TraceLane::compute, op),
               [&] { state_.prepare_backward(compute()); });
  }
  void execute(const Op& op, const StoreGradsOp& body) {
    timed_work(compute(), trace_event("store grads", TraceLane::compute, op),
               [&] { state_.store_grads(body, compute()); });
  }

  void execute(const Op& op, const ExchangeOp& body) {
    record(compute())->wait_on(comm());  // data and receive slot ready
    TraceEvent e = trace_event(body.send_to >= 0 ? "send" : "recv", TraceLane::comm, op);
    e.peer = static_cast<int>(body.send_to >= 0 ? body.send_to : body.recv_from);
    e.tag = body.tag;
    e.bytes = body.send_to >= 0 ? state_.slot_block_bytes(body.send_slot) : state_.slot_block_bytes(body.recv_slot);
    const Event* done = timed_work(comm(), e, [&] {
      RINGLAB_NCCL_CHECK(ncclGroupStart());
      if (body.send_to >= 0) {
        RINGLAB_NCCL_CHECK(ncclSend(state_.slot_block(body.send_slot),
                                    static_cast<size_t>(state_.slot_block_bytes(body.send_slot)), ncclUint8,
                                    static_cast<int>(body.send_to), world_, comm()));
      }
      if (body.recv_from >= 0) {
        RINGLAB_NCCL_CHECK(ncclRecv(state_.slot_block(body.recv_slot),
                                    static_cast<size_t>(state_.slot_block_bytes(body.recv_slot)), ncclUint8,
                                    static_cast<int>(body.recv_from), world_, comm()));
      }
      RINGLAB_NCCL_CHECK(ncclGroupEnd());
    });
    if (body.send_to >= 0 && body.recv_from >= 0) {  // the receive half, on the same span
      Timed copy = timed_.back();
      copy.event.name = "recv";
      copy.event.peer = static_cast<int>(body.recv_from);
      copy.event.bytes = state_.slot_block_bytes(body.recv_slot);
      timed_.push_back(std::move(copy));
    }
    if (body.send_to >= 0) {
      summary_.counters.messages_sent += 1;
      summary_.counters.bytes_sent += state_.slot_block_bytes(body.send_slot);
    }
    if (body.recv_from >= 0) {
      summary_.counters.messages_received += 1;
      summary_.counters.bytes_received += state_.slot_block_bytes(body.recv_slot);
    }
    posted_[{op.phase, body.id, op.step}] = done;
  }

  void execute(const Op& op, const WaitOp& body) {
    const auto found = posted_.find({op.phase, body.exchange_id, body.exchange_step});
    if (found == posted_.end()) {
      throw CommError("rank " + std::to_string(rank_) + " waits for exchange " + std::to_string(body.exchange_id) +
                      " of step " + std::to_string(body.exchange_step) + ", which it never posted");
    }
    found->second->wait_on(compute());
    posted_.erase(found);
  }

  void execute(const Op& op, const CollectiveOp& body) {
    record(compute())->wait_on(comm());
    summary_.counters.collectives += 1;
    summary_.counters.bytes_sent += body.send_bytes;
    summary_.counters.bytes_received += body.recv_bytes;
    TraceEvent e = trace_event(body.collective == Collective::all_gather_kv        ? "all_gather"
                               : body.collective == Collective::reduce_scatter_dkv ? "reduce_scatter"
                                                                                   : "all_to_all",
                               TraceLane::comm, op);
    e.bytes = body.recv_bytes;
    const Event* done = timed_work(comm(), std::move(e), [&] {
      switch (body.collective) {
        case Collective::all_gather_kv: {
          state_.pack_own_kv(comm());
          const size_t bytes = static_cast<size_t>(state_.slot_block_bytes(Slot::kv0));
          RINGLAB_NCCL_CHECK(ncclAllGather(state_.own_kv_block(), state_.slot_block(Slot::gathered_kv, 0), bytes,
                                           ncclUint8, ring_, comm()));
          break;
        }
        case Collective::reduce_scatter_dkv: {
          const size_t count = static_cast<size_t>(state_.slot_block_bytes(Slot::dkv0) / 4);
          RINGLAB_NCCL_CHECK(ncclReduceScatter(state_.slot_block(Slot::gathered_dkv, 0), state_.slot_block(Slot::dkv0),
                                               count, ncclFloat32, ncclSum, ring_, comm()));
          break;
        }
        default:
          all_to_all(body);
      }
    });
    done->wait_on(compute());
  }

  // Pack every member's share into staging, exchange with every member (itself included) in one
  // group, unpack.
  void all_to_all(const CollectiveOp& body) {
    const std::vector<int64_t>& members = body.members;
    const int64_t me = std::find(members.begin(), members.end(), rank_) - members.begin();
    std::vector<GpuRank::A2aTensor> tensors = state_.a2a_tensors(body.collective);
    // One member's chunk: every tensor's (B, S/P, heads/U, D) share, back to back.
    std::vector<size_t> offsets;
    size_t chunk = 0;
    for (const GpuRank::A2aTensor& t : tensors) {
      offsets.push_back(chunk);
      const RowCopy c = state_.a2a_copy(body.collective, t, 0, t, 0);
      chunk += static_cast<size_t>(c.batch) * c.count * c.head_count * (t.lse ? 1 : c.dim) * c.element_bytes;
      chunk = (chunk + 255) / 256 * 256;
    }
    const size_t total = chunk * members.size();
    if (staging_send_.bytes() < total) {
      staging_send_ = DeviceBuffer(total);
      staging_recv_ = DeviceBuffer(total);
    }
    char* send = static_cast<char*>(staging_send_.get());
    char* recv = static_cast<char*>(staging_recv_.get());
    for (size_t to = 0; to < members.size(); ++to) {
      for (size_t t = 0; t < tensors.size(); ++t) {
        RowCopy c = state_.a2a_copy(body.collective, tensors[t], me, tensors[t], static_cast<int64_t>(to));
        c.dst = send + to * chunk + offsets[t];
        c.dst_rows = c.count, c.dst_heads = c.head_count, c.dst_head0 = 0, c.dst_index = nullptr;
        tensors[t].lse ? copy_lse_rows(c, comm()) : copy_token_rows(c, comm());
      }
    }
    RINGLAB_NCCL_CHECK(ncclGroupStart());
    for (size_t m = 0; m < members.size(); ++m) {
      RINGLAB_NCCL_CHECK(ncclSend(send + m * chunk, chunk, ncclUint8, static_cast<int>(members[m]), world_, comm()));
      RINGLAB_NCCL_CHECK(ncclRecv(recv + m * chunk, chunk, ncclUint8, static_cast<int>(members[m]), world_, comm()));
    }
    RINGLAB_NCCL_CHECK(ncclGroupEnd());
    for (size_t from = 0; from < members.size(); ++from) {
      for (size_t t = 0; t < tensors.size(); ++t) {
        RowCopy c = state_.a2a_copy(body.collective, tensors[t], static_cast<int64_t>(from), tensors[t], me);
        c.src = recv + from * chunk + offsets[t];
        c.src_rows = c.count, c.src_heads = c.head_count, c.src_head0 = 0, c.src_index = nullptr;
        tensors[t].lse ? copy_lse_rows(c, comm()) : copy_token_rows(c, comm());
      }
    }
  }

  const Plan& plan_;
  const int64_t rank_;
  ncclComm_t world_;
  ncclComm_t ring_ = nullptr;
  ncclComm_t split_ = nullptr;
  GpuRunOptions options_;
  GpuRank state_;
  Stream compute_, comm_;
  std::deque<Event> events_;
  std::vector<Timed> timed_;
  std::map<std::tuple<int, int, int64_t>, const Event*> posted_;
  DeviceBuffer staging_send_, staging_recv_;
  RankSummary summary_;
};

}  // namespace

NcclRankResult run_nccl_rank(const Plan& plan, int64_t rank, ncclComm_t world, const AttentionInputs<float>& inputs,
                             const GpuRunOptions& options) {
  NcclRank runner(plan, rank, world, inputs, options);
  return runner.run();
}

// ---- [single process] --------------------------------------------------------------------------

GpuRunResult run_gpu_nccl(const Plan& plan, const AttentionInputs<float>& inputs, const GpuRunOptions& options) {
  const int64_t P = plan.ranks();
  if (const std::string why = nccl_single_process_support(P); !why.empty()) throw UsageError(why);
  const int devices = device_count();
  ncclUniqueId id;
  RINGLAB_NCCL_CHECK(ncclGetUniqueId(&id));
  std::vector<NcclRankResult> results(static_cast<size_t>(P));
  std::vector<std::exception_ptr> errors(static_cast<size_t>(P));
  std::vector<std::thread> threads;
  for (int64_t r = 0; r < P; ++r) {
    threads.emplace_back([&, r] {
      try {
        RINGLAB_CUDA_CHECK(cudaSetDevice(static_cast<int>(r % devices)));
        ncclComm_t comm = nullptr;
        RINGLAB_NCCL_CHECK(ncclCommInitRank(&comm, static_cast<int>(P), id, static_cast<int>(r)));
        try {
          results[static_cast<size_t>(r)] = run_nccl_rank(plan, r, comm, inputs, options);
        } catch (...) {
          ncclCommAbort(comm);
          throw;
        }
        RINGLAB_NCCL_CHECK(ncclCommDestroy(comm));
      } catch (...) {
        errors[static_cast<size_t>(r)] = std::current_exception();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
  return merge_nccl_results(plan, std::move(results), nccl_label(plan, options, false));
}

// ---- [merging] ---------------------------------------------------------------------------------

GpuRunResult merge_nccl_results(const Plan& plan, std::vector<NcclRankResult>&& ranks, std::string executor) {
  const AttentionDims& d = plan.spec().dims;
  GpuRunResult result;
  result.executor = std::move(executor);
  result.outputs.out = Tensor<float>(d.q_shape());
  result.outputs.lse = Tensor<float>(d.lse_shape());
  if (plan.spec().backward) {
    result.outputs.dq = Tensor<float>(d.q_shape());
    result.outputs.dk = Tensor<float>(d.kv_shape());
    result.outputs.dv = Tensor<float>(d.kv_shape());
  }
  for (NcclRankResult& r : ranks) {
    scatter_local_outputs(r.outputs, r.positions, result.outputs);
    result.ranks.push_back(r.summary);
    result.device_ms = std::max(result.device_ms, r.device_ms);
    for (TraceEvent& e : r.trace) result.trace.push_back(std::move(e));
  }
  return result;
}

}  // namespace ringlab::gpu
