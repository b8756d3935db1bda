// gpu-nccl: one GPU per rank. Each rank walks its own op list (sim/plan/plan.hpp: expand):
//   Exchange   ncclSend / ncclRecv of the slots inside one group (ncclGroupStart/End) on the
//              rank's transfer stream, after an event that marks the data (and receive slot)
//              ready on its compute stream; Wait makes the compute stream wait for the group
//   all_to_all pack each peer's share into a staging buffer, one group of ncclSend/ncclRecv
//              with every group member (itself included), unpack — layouts as in gpu_rank.hpp
//   all-gather ncclAllGather / ncclReduceScatter on the ring family's communicator (ring
//              position order; ncclCommSplit when there is also a Ulysses dimension)
// Bootstrap: one process per rank under mpirun (gpu/cli: ncclGetUniqueId on rank 0, MPI_Bcast,
// ncclCommInitRank), or single-process with one thread per rank and rank r on device r.
// NCCL refuses two ranks on one GPU ("Duplicate GPU detected", since 2.5.6); NCCL >= 2.30 has an
// experimental NCCL_MULTI_RANK_GPU_ENABLE=1. So on a one-GPU machine gpu-nccl runs P = 1 unless
// that switch is available and set.
#pragma once

#include <nccl.h>

#include <string>
#include <vector>

#include "gpu/executors/executor.hpp"
#include "gpu/executors/gpu_rank.hpp"

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

// Runs rank `rank` of the plan on the current device; `world` is a communicator of plan.ranks()
// ranks in which the caller is `rank`. Collective over all ranks (they must all call it). A
// deadlock or a fault throws CommError (after aborting the communicator).
NcclRankResult run_nccl_rank(const Plan& plan, int64_t rank, ncclComm_t world, const AttentionInputs<float>& inputs,
                             const GpuRunOptions& options, bool trace);

// gpu-nccl in a single process: one thread per rank, rank r on device r % devices. (Under mpirun,
// one process per rank: gpu/cli/gpu_command.cpp.)
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
