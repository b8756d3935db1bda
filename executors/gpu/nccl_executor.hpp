// gpu-nccl: one GPU per rank. Each rank walks its own op list (sim/plan/plan.hpp: expand):
//   Exchange   ncclSend / ncclRecv of the slots inside one group (ncclGroupStart/End) on the
//              rank's transfer stream, after an event that marks the data (and receive slot)
//              ready on its compute stream; Wait makes the compute stream wait for the group
//   all_to_all pack each peer's share into a staging buffer, one group of ncclSend/ncclRecv
//              with every group member (itself included), unpack — layouts as in gpu_rank.hpp
//   all-gather ncclAllGather / ncclReduceScatter on the ring family's communicator (ring
//              position order; ncclCommSplit when there is also a Ulysses dimension)
// Bootstrap: one process per rank under mpirun (cli/ringlab-gpu: ncclGetUniqueId on rank 0, MPI_Bcast,
// ncclCommInitRankConfig), or single-process with one thread per rank and rank r on device r.
// Every communicator is nonblocking, so that each NCCL wait — init, split, group end, the final
// wait for the device — runs under one watchdog (NcclWatch): time without progress, and the
// asynchronous error of every live communicator.
// NCCL refuses two ranks on one GPU ("Duplicate GPU detected", since 2.5.6); NCCL >= 2.30 has an
// experimental NCCL_MULTI_RANK_GPU_ENABLE=1. So on a one-GPU machine gpu-nccl runs P = 1 unless
// that switch is available and set.
#pragma once

#include <nccl.h>

#include <chrono>
#include <deque>
#include <functional>
#include <string>
#include <vector>

#include "executors/gpu/executor.hpp"
#include "executors/gpu/gpu_rank.hpp"

namespace ringlab::gpu {

void throw_nccl_error(ncclResult_t result, const char* call, const char* file, int line);
inline void nccl_check(ncclResult_t result, const char* call, const char* file, int line) {
  if (result != ncclSuccess) throw_nccl_error(result, call, file, line);
}
#define RINGLAB_NCCL_CHECK(call) ::ringlab::gpu::nccl_check((call), #call, __FILE__, __LINE__)

// What one rank of a gpu-nccl run returns.
struct NcclRankResult {
  LocalOutputs outputs;            // this rank's layout tokens
  std::vector<int64_t> positions;  // their global positions
  RankSummary summary;
  std::vector<TraceEvent> trace;  // with trace: times from this rank's own start event
  double device_ms = 0;
};

// One NCCL communicator, owned in one place. Created nonblocking (its initialisation is then a
// wait like any other, under the watchdog); aborted at most once; destroyed (finalize, then
// destroy) only when it is live and the run succeeded. Dropped while still live — an error path —
// it aborts rather than destroys: ncclCommDestroy would block on the peers.
class NcclComm {
 public:
  NcclComm() = default;
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;
  ~NcclComm() { abort(); }

  ncclComm_t get() const { return comm_; }
  ncclComm_t* out() { return &comm_; }  // for ncclCommInitRankConfig / ncclCommSplit to fill in
  bool live() const { return comm_ != nullptr && !ended_; }
  void abort() noexcept;  // idempotent; nothing for a comm already ended
  void mark_destroyed() { ended_ = true; }

 private:
  ncclComm_t comm_ = nullptr;
  bool ended_ = false;  // aborted or destroyed: never touched again
};

// One rank's communicators and the watchdog over every wait on them. A wait polls its condition
// and the asynchronous error of every live communicator, and gives up after `timeout` seconds
// WITHOUT PROGRESS (each completed wait, and each device event passed, resets the clock — a long
// run that keeps moving is never cut short): it aborts every communicator, once, and throws
// CommError with a one-line report. Covers the nonblocking init and split, every group end and
// collective, the finalize, and the final wait for the device.
class NcclWatch {
 public:
  NcclWatch(int64_t rank, double timeout);
  NcclWatch(const NcclWatch&) = delete;
  NcclWatch& operator=(const NcclWatch&) = delete;
  ~NcclWatch();  // abort(): whatever is still live on an error path

  // A communicator slot owned here (stable address), for an init or a split to fill in.
  NcclComm& add();
  // `world` of `ranks` ranks from the unique id, nonblocking, waited for under the watchdog.
  NcclComm& init_world(int ranks, const ncclUniqueId& id, int rank);
  // ncclCommSplit of `parent`, nonblocking, waited for under the watchdog.
  NcclComm& split(NcclComm& parent, int color, int key);
  // After a call on `comm` that may return ncclInProgress (group end, collective): checks its
  // result and waits until the communicator is no longer in progress.
  void settle(NcclComm& comm, ncclResult_t result, const char* what);
  // Polls `done` until it returns true, under the watchdog; `what` names the wait in the report.
  void wait(const std::string& what, const std::function<bool()>& done);
  void progress();        // resets the no-progress clock
  void abort() noexcept;  // every live communicator, newest first; idempotent
  // On success: finalizes and destroys every live communicator, newest first (splits before the
  // world they came from).
  void finish();

 private:
  [[noreturn]] void fail(const std::string& why);

  int64_t rank_;
  double timeout_;
  std::deque<NcclComm> comms_;  // a deque: the slots stay where they are
  std::chrono::steady_clock::time_point last_progress_;
};

// Runs rank `rank` of the plan on the current device: joins the world communicator of
// plan.ranks() ranks named by `id` (all ranks must call it), runs its op list, and finalizes the
// communicators. A deadlock, a missing peer or a communication fault throws CommError (after
// aborting every communicator, once).
NcclRankResult run_nccl_rank(const Plan& plan, int64_t rank, const ncclUniqueId& id,
                             const AttentionInputs<float>& inputs, const GpuRunOptions& options, bool trace);

// gpu-nccl in a single process: one thread per rank, rank r on device r % devices. (Under mpirun,
// one process per rank: cli/ringlab-gpu/gpu_command.cpp.)
class NcclExecutor final : public GpuExecutor {
 public:
  using GpuExecutor::GpuExecutor;
  std::string label(const Plan& plan) const override;  // nccl_label(plan, options, false)
  // Throws UsageError when this machine cannot run P ranks in one process.
  ExecutionResult execute(const Plan& plan, const AttentionInputs<float>& inputs,
                          const ExecuteOptions& options) override;
};

// How many ranks one process may run on `devices` GPUs: devices, or more when this NCCL
// allows several ranks per GPU (>= 2.30 with NCCL_MULTI_RANK_GPU_ENABLE=1).
int64_t nccl_max_single_process_ranks(int devices);
// "" when P ranks can run single-process here; otherwise the reason and what to do instead.
std::string nccl_single_process_support(int64_t ranks);
std::string nccl_version_text();  // "NCCL 2.28.9"
// "gpu-nccl, 4 ranks on 4 GPUs, single process (bf16)"
std::string nccl_label(const Plan& plan, const GpuRunOptions& options, bool multi_process);

// Merges per-rank results into a run result (outputs scattered into global order, device time
// the slowest rank's).
ExecutionResult merge_nccl_results(const Plan& plan, std::vector<NcclRankResult>&& ranks, std::string executor);

}  // namespace ringlab::gpu
