// gpu-nccl. Sections: [errors and support] [one rank] [ops] [single process] [merging]
#include "executors/gpu/nccl_executor.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <exception>
#include <map>
#include <thread>
#include <tuple>

#include "executors/gpu/local_ops.hpp"
#include "gpu/device.hpp"
#include "gpu/kernels/attention_kernels.hpp"
#include "reference/error.hpp"
#include "sim/pipeline/op_interpreter.hpp"
#include "sim/plan/queries.hpp"

namespace ringlab::gpu {

// ---- [errors and support] ----------------------------------------------------------------------

void throw_nccl_error(ncclResult_t result, const char* call, const char* file, int line) {
  const std::string message =
      std::string(call) + " failed at " + file + ":" + std::to_string(line) + ": " + ncclGetErrorString(result);
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
         dtype_name(options.dtype) + ", " + warmup_text(options.warmup) + ")";
}

std::string warmup_text(int warmup) {
  return warmup == 0   ? "no warm-up: first launches timed"
         : warmup == 1 ? "timed after 1 warm-up run"
                       : "timed after " + std::to_string(warmup) + " warm-up runs";
}

// ---- [communicators and the watchdog] ---------------------------------------------------------

void NcclComm::abort() noexcept {
  if (!live()) return;
  ended_ = true;
  (void)ncclCommAbort(comm_);  // nothing more to do if even the abort fails
}

NcclWatch::NcclWatch(int64_t rank, double timeout)
    : rank_(rank), timeout_(timeout), last_progress_(std::chrono::steady_clock::now()) {}

NcclWatch::~NcclWatch() { abort(); }

void NcclWatch::abort() noexcept {
  for (auto c = comms_.rbegin(); c != comms_.rend(); ++c) c->abort();
}

NcclComm& NcclWatch::add() { return comms_.emplace_back(); }

namespace {

ncclConfig_t nonblocking_config() {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  return config;
}

// A call's result when ncclInProgress means "started" (a nonblocking communicator).
void check_started(ncclResult_t result, const char* what) {
  if (result != ncclSuccess && result != ncclInProgress) throw_nccl_error(result, what, __FILE__, __LINE__);
}

}  // namespace

NcclComm& NcclWatch::init_world(int ranks, const ncclUniqueId& id, int rank) {
  NcclComm& world = add();
  ncclConfig_t config = nonblocking_config();
  settle(world, ncclCommInitRankConfig(world.out(), ranks, id, rank, &config), "ncclCommInitRankConfig");
  return world;
}

NcclComm& NcclWatch::split(NcclComm& parent, int color, int key) {
  NcclComm& child = add();
  ncclConfig_t config = nonblocking_config();
  const ncclResult_t result = ncclCommSplit(parent.get(), color, key, child.out(), &config);
  settle(parent, result, "ncclCommSplit");
  settle(child, ncclSuccess, "ncclCommSplit");
  return child;
}

void NcclWatch::settle(NcclComm& comm, ncclResult_t result, const char* what) {
  check_started(result, what);
  wait(what, [&] {
    ncclResult_t state = ncclSuccess;
    check_started(ncclCommGetAsyncError(comm.get(), &state), "ncclCommGetAsyncError");
    if (state == ncclInProgress) return false;
    if (state != ncclSuccess) fail(std::string("asynchronous error in ") + what + ": " + ncclGetErrorString(state));
    return true;
  });
}

void NcclWatch::wait(const std::string& what, const std::function<bool()>& done) {
  for (;;) {
    if (done()) {
      progress();
      return;
    }
    for (NcclComm& c : comms_) {
      if (!c.live()) continue;
      ncclResult_t state = ncclSuccess;
      check_started(ncclCommGetAsyncError(c.get(), &state), "ncclCommGetAsyncError");
      if (state != ncclSuccess && state != ncclInProgress)
        fail(std::string("asynchronous error while waiting for ") + what + ": " + ncclGetErrorString(state));
    }
    const double idle = std::chrono::duration<double>(std::chrono::steady_clock::now() - last_progress_).count();
    if (idle > timeout_) {
      char seconds[32];
      std::snprintf(seconds, sizeof seconds, "%g", timeout_);
      fail(std::string("no progress for ") + seconds + " s while waiting for " + what +
           " (a peer is missing, or a send has no matching receive; --timeout sets the limit)");
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

void NcclWatch::progress() { last_progress_ = std::chrono::steady_clock::now(); }

void NcclWatch::finish() {
  for (auto c = comms_.rbegin(); c != comms_.rend(); ++c) {
    if (!c->live()) continue;
    settle(*c, ncclCommFinalize(c->get()), "ncclCommFinalize");
    check_started(ncclCommDestroy(c->get()), "ncclCommDestroy");
    c->mark_destroyed();
  }
}

void NcclWatch::fail(const std::string& why) {
  abort();
  throw CommError("gpu-nccl rank " + std::to_string(rank_) + ": " + why + "; communicators aborted");
}

// ---- [one rank] --------------------------------------------------------------------------------

namespace {

class NcclRank {
 public:
  // `world` belongs to `watch`, which also owns the split this makes (and aborts or finalizes both).
  NcclRank(const Plan& plan, int64_t rank, NcclWatch& watch, NcclComm& world, const AttentionInputs<float>& inputs,
           const GpuRunOptions& options)
      : plan_(plan), rank_(rank), watch_(watch), world_(world), ring_(&world), options_(options),
        state_(plan, rank, options.dtype, inputs), interpreter_(plan, rank, summary_) {
    // The ring family's communicator: the world when there is no Ulysses dimension.
    if (plan_uses(plan, Family::ring) && plan.ulysses() > 1) {
      ring_ =
          &watch_.split(world_, static_cast<int>(plan.ulysses_index(rank)), static_cast<int>(plan.ring_position(rank)));
    }
  }
  NcclRank(const NcclRank&) = delete;
  NcclRank& operator=(const NcclRank&) = delete;

  // Any error aborts the communicators before this rank's buffers and streams are freed: the
  // abort is what lets a device stuck in an NCCL kernel let go of them.
  NcclRankResult run(bool trace) {
    try {
      for (int i = 0; i < options_.warmup; ++i) warm_up();
      return run_plan(trace);
    } catch (...) {
      watch_.abort();
      throw;
    }
  }

 private:
  friend class ringlab::OpInterpreter;  // calls the handlers of [ops]

  // The whole plan once, untimed and read back by nobody: every rank warms up the same number of
  // times, so the collectives match. What it counted and recorded is dropped before the measured
  // run (which resets the buffers it accumulates into).
  void warm_up() {
    timeline_.set_timing(false);
    record(compute())->wait_on(comm());
    state_.reset(compute());
    RankSummary dropped;
    OpInterpreter interpreter(plan_, rank_, dropped);
    interpreter.run_all(expand(plan_, rank_), *this);
    wait_for_device({record(compute()), record(comm())}, "the warm-up run");
    timeline_.clear();
    timeline_.set_timing(true);
    posted_.clear();
    summary_ = RankSummary{};  // the handlers' own counters (bytes sent) counted the warm-up too
  }

  NcclRankResult run_plan(bool trace) {
    const Event* start = record(compute(), true);
    start->wait_on(comm());
    state_.reset(compute());
    interpreter_.run_all(expand(plan_, rank_), *this);
    const Event* end_compute = record(compute(), true);
    const Event* end_comm = record(comm(), true);
    wait_for_device({end_compute, end_comm}, "the device to finish");

    NcclRankResult result;
    result.device_ms = std::max(elapsed_ms(*start, *end_compute), elapsed_ms(*start, *end_comm));
    std::vector<TraceEvent> events = timeline_.resolve(*start, [&](int) -> RankSummary& { return summary_; });
    if (trace) result.trace = std::move(events);
    result.summary = summary_;
    result.outputs = state_.download_outputs(plan_.spec().backward);
    result.positions = state_.local_positions();
    return result;
  }

  cudaStream_t compute() const { return compute_.get(); }
  cudaStream_t comm() const { return comm_.get(); }
  const Event* record(cudaStream_t stream, bool timing = false) { return timeline_.record(stream, timing); }

  // Polls, under the watchdog, until the device has passed every event; each event of the
  // timeline it passes on the way counts as progress.
  void wait_for_device(const std::vector<const Event*>& ends, const std::string& what) {
    size_t passed = timeline_.passed();
    watch_.wait(what, [&] {
      if (const size_t now = timeline_.passed(); now > passed) {
        passed = now;
        watch_.progress();
      }
      for (const Event* e : ends) {
        const cudaError_t status = cudaEventQuery(e->get());
        if (status == cudaErrorNotReady) return false;
        RINGLAB_CUDA_CHECK(status);
      }
      return true;
    });
  }

  // ncclGroupEnd on a nonblocking communicator may return while the peers still connect: waited
  // for under the watchdog.
  void group_end(NcclComm& comm, const char* what) { watch_.settle(comm, ncclGroupEnd(), what); }

  // ---- [ops] -----------------------------------------------------------------------------------
  // The op interpreter's handlers: the local ops as timed work on the compute stream (shared with
  // gpu-streams: local_ops.hpp), the communication through NCCL on the transfer stream.

  template <class Local>
  void execute(const Op& op, const Local&, TraceEvent event) {
    run_local_op(state_, op.body, std::move(event), compute(), timeline_);
  }

  // `e`: "send" (or "recv" when it only receives), its peer, tag and bytes.
  void execute(const Op& op, const ExchangeOp& body, TraceEvent e) {
    record(compute())->wait_on(comm());  // data and receive slot ready
    const Event* done = timeline_.timed(comm(), e, [&] {
      RINGLAB_NCCL_CHECK(ncclGroupStart());
      if (body.send_to >= 0) {
        RINGLAB_NCCL_CHECK(ncclSend(state_.slot_block(body.send_slot),
                                    static_cast<size_t>(state_.slot_block_bytes(body.send_slot)), ncclUint8,
                                    static_cast<int>(body.send_to), world_.get(), comm()));
      }
      if (body.recv_from >= 0) {
        RINGLAB_NCCL_CHECK(ncclRecv(state_.slot_block(body.recv_slot),
                                    static_cast<size_t>(state_.slot_block_bytes(body.recv_slot)), ncclUint8,
                                    static_cast<int>(body.recv_from), world_.get(), comm()));
      }
      group_end(world_, "a send / receive group (ncclGroupEnd)");
    });
    if (body.send_to >= 0 && body.recv_from >= 0) {  // the receive half, on the same span
      e.name = "recv";
      e.peer = static_cast<int>(body.recv_from);
      e.bytes = state_.slot_block_bytes(body.recv_slot);
      timeline_.also(std::move(e));
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

  void execute(const Op& op, const WaitOp& body, const TraceEvent&) {
    const auto found = posted_.find({op.phase, body.exchange_id, body.exchange_step});
    if (found == posted_.end()) {
      throw CommError("rank " + std::to_string(rank_) + " waits for exchange " + std::to_string(body.exchange_id) +
                      " of step " + std::to_string(body.exchange_step) + ", which it never posted");
    }
    found->second->wait_on(compute());
    posted_.erase(found);
  }

  // `e`: "all_gather" | "reduce_scatter" | "all_to_all" and the bytes received.
  void execute(const Op&, const CollectiveOp& body, TraceEvent e) {
    record(compute())->wait_on(comm());
    summary_.counters.collectives += 1;
    summary_.counters.bytes_sent += body.send_bytes;
    summary_.counters.bytes_received += body.recv_bytes;
    const Event* done = timeline_.timed(comm(), std::move(e), [&] {
      switch (body.collective) {
        case Collective::all_gather_kv: {
          state_.pack_own_kv(comm());
          const size_t bytes = static_cast<size_t>(state_.slot_block_bytes(Slot::kv0));
          watch_.settle(*ring_,
                        ncclAllGather(state_.own_kv_block(), state_.slot_block(Slot::gathered_kv, 0), bytes, ncclUint8,
                                      ring_->get(), comm()),
                        "ncclAllGather");
          break;
        }
        case Collective::reduce_scatter_dkv: {
          const size_t count = static_cast<size_t>(state_.slot_block_bytes(Slot::dkv0) / 4);
          watch_.settle(*ring_,
                        ncclReduceScatter(state_.slot_block(Slot::gathered_dkv, 0), state_.slot_block(Slot::dkv0),
                                          count, ncclFloat32, ncclSum, ring_->get(), comm()),
                        "ncclReduceScatter");
          break;
        }
        default: all_to_all(body);
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
      // cudaFree waits for the whole device: first, under the watchdog, for this rank's streams.
      if (!staging_send_.empty()) wait_for_device({record(compute()), record(comm())}, "a staging buffer to be free");
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
      RINGLAB_NCCL_CHECK(
          ncclSend(send + m * chunk, chunk, ncclUint8, static_cast<int>(members[m]), world_.get(), comm()));
      RINGLAB_NCCL_CHECK(
          ncclRecv(recv + m * chunk, chunk, ncclUint8, static_cast<int>(members[m]), world_.get(), comm()));
    }
    group_end(world_, "an all-to-all group (ncclGroupEnd)");
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
  NcclWatch& watch_;
  NcclComm& world_;
  NcclComm* ring_;  // the world, or the split of it that watch_ owns
  GpuRunOptions options_;
  GpuRank state_;
  Stream compute_, comm_;
  Timeline timeline_;
  std::map<std::tuple<int, int, int64_t>, const Event*> posted_;
  DeviceBuffer staging_send_, staging_recv_;
  RankSummary summary_;
  OpInterpreter interpreter_;  // counts into summary_
};

}  // namespace

NcclRankResult run_nccl_rank(const Plan& plan, int64_t rank, const ncclUniqueId& id,
                             const AttentionInputs<float>& inputs, const GpuRunOptions& options, bool trace) {
  NcclWatch watch(rank, options.timeout);
  NcclComm& world = watch.init_world(static_cast<int>(plan.ranks()), id, static_cast<int>(rank));
  NcclRankResult result;
  {
    NcclRank runner(plan, rank, watch, world, inputs, options);
    result = runner.run(trace);
  }
  watch.finish();
  return result;
}

// ---- [single process] --------------------------------------------------------------------------

namespace {

// One thread per rank, rank r on device r % devices; the first rank's error is rethrown.
std::vector<NcclRankResult> run_rank_threads(const Plan& plan, const AttentionInputs<float>& inputs,
                                             const GpuRunOptions& options, bool trace) {
  const int64_t P = plan.ranks();
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
        results[static_cast<size_t>(r)] = run_nccl_rank(plan, r, id, inputs, options, trace);
      } catch (...) {
        errors[static_cast<size_t>(r)] = std::current_exception();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
  return results;
}

}  // namespace

std::string NcclExecutor::label(const Plan& plan) const { return nccl_label(plan, options_, false); }

ExecutionResult NcclExecutor::execute(const Plan& plan, const AttentionInputs<float>& inputs,
                                      const ExecuteOptions& options) {
  if (const std::string why = nccl_single_process_support(plan.ranks()); !why.empty()) throw UsageError(why);
  return with_comm_faults(label(plan), [&] {
    return merge_nccl_results(plan, run_rank_threads(plan, inputs, options_, options.trace), label(plan));
  });
}

// ---- [merging] ---------------------------------------------------------------------------------

ExecutionResult merge_nccl_results(const Plan& plan, std::vector<NcclRankResult>&& ranks, std::string executor) {
  ExecutionResult result;
  result.executor = std::move(executor);
  result.outputs = allocate_outputs(plan);
  double device_ms = 0;
  for (NcclRankResult& r : ranks) {
    scatter_local_outputs(r.outputs, r.positions, result.outputs);
    result.ranks.push_back(r.summary);
    device_ms = std::max(device_ms, r.device_ms);
    for (TraceEvent& e : r.trace) result.trace.push_back(std::move(e));
  }
  result.time = {TimeKind::device, device_ms * 1e-3};
  return result;
}

}  // namespace ringlab::gpu
