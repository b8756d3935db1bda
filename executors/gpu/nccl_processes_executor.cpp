// gpu-nccl across mpirun processes: one process per rank, NCCL bootstrapped through the
// MultiProcess hooks (cli/ringlab-gpu/mpi_bootstrap.cpp fills them in with MPI), every rank's
// result gathered to rank 0, which verifies and reports for everyone.
#include "executors/gpu/nccl_processes_executor.hpp"

#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "executors/gpu/nccl_executor.hpp"
#include "gpu/cuda_check.hpp"
#include "gpu/device.hpp"
#include "reference/error.hpp"
#include "sim/pipeline/trace.hpp"

namespace ringlab::gpu {
namespace {

static_assert(std::is_trivially_copyable_v<RankSummary>, "RankSummary travels as bytes between processes");

// Serialises one rank's result for the gather to rank 0: the local outputs, the summary (plain
// numbers) and the trace events as JSON.
std::string serialize(const NcclRankResult& r) {
  std::string bytes;
  auto put = [&](const void* data, size_t size) { bytes.append(static_cast<const char*>(data), size); };
  const Tensor<float>* tensors[] = {&r.outputs.out, &r.outputs.lse, &r.outputs.dq, &r.outputs.dk, &r.outputs.dv};
  for (const Tensor<float>* t : tensors) {
    const uint64_t count = static_cast<uint64_t>(t->size());
    put(&count, sizeof count);
    put(t->data(), count * sizeof(float));
  }
  put(&r.summary, sizeof r.summary);
  put(&r.device_ms, sizeof r.device_ms);
  bytes += chrome_trace_json(r.trace, 0);
  return bytes;
}

NcclRankResult deserialize(const std::string& bytes, const RankGeometry& g, const std::vector<int64_t>& positions) {
  NcclRankResult r;
  size_t at = 0;
  auto get = [&](void* data, size_t size) {
    if (at + size > bytes.size()) throw CommError("gpu-nccl: a rank's gathered result is truncated");
    std::memcpy(data, bytes.data() + at, size);
    at += size;
  };
  const Shape shapes[] = {{g.B, g.n_local, g.H, g.D},
                          {g.B, g.H, g.n_local},
                          {g.B, g.n_local, g.H, g.D},
                          {g.B, g.n_local, g.HKV, g.D},
                          {g.B, g.n_local, g.HKV, g.D}};
  Tensor<float>* tensors[] = {&r.outputs.out, &r.outputs.lse, &r.outputs.dq, &r.outputs.dk, &r.outputs.dv};
  for (int i = 0; i < 5; ++i) {
    uint64_t count = 0;
    get(&count, sizeof count);
    if (count == 0) continue;
    *tensors[i] = Tensor<float>(shapes[i]);
    if (static_cast<int64_t>(count) != tensors[i]->size())
      throw CommError("gpu-nccl: a rank's output has the wrong size");
    get(tensors[i]->data(), count * sizeof(float));
  }
  get(&r.summary, sizeof r.summary);
  get(&r.device_ms, sizeof r.device_ms);
  r.trace = parse_chrome_trace(bytes.substr(at), "gathered trace");
  r.positions = positions;
  return r;
}

// gpu-nccl with one process per rank: NCCL bootstrapped through MPI, every rank's result gathered
// to rank 0, which verifies and reports for everyone (the others' pipelines stop after executing).
class NcclProcessesExecutor final : public GpuExecutor {
 public:
  NcclProcessesExecutor(GpuRunOptions options, const MultiProcess& mp) : GpuExecutor(options), mp_(mp) {}
  PipelineNeeds needs() const override {
    PipelineNeeds needs = GpuExecutor::needs();
    needs.reports = mp_.rank == 0;
    return needs;
  }
  std::string label(const Plan& plan) const override { return nccl_label(plan, options_, true); }
  ExecutionResult execute(const Plan& plan, const AttentionInputs<float>& inputs,
                          const ExecuteOptions& options) override {
    if (mp_.size != plan.ranks()) {
      throw UsageError("mpirun started " + std::to_string(mp_.size) + " processes but --ranks is " +
                       std::to_string(plan.ranks()) + "; use mpirun -np " + std::to_string(plan.ranks()));
    }
    return with_comm_faults(label(plan), [&] { return gather(plan, run_own_rank(plan, inputs, options.trace)); });
  }

 private:
  // This process's rank, serialised for the gather ("R" + result), or "E" + the error when it
  // failed. Every rank goes through the same collectives whatever fails where — agree, then (only
  // when all agreed) the unique id's broadcast, then the gather — so no rank ever waits in one
  // collective while another is in a different one; the error is rethrown after the gather.
  std::string run_own_rank(const Plan& plan, const AttentionInputs<float>& inputs, bool trace) {
    ncclUniqueId id{};
    std::string error;
    try {
      const int devices = device_count();
      if (devices == 0) throw UsageError("rank " + std::to_string(mp_.rank) + " sees no CUDA device");
      RINGLAB_CUDA_CHECK(cudaSetDevice(mp_.local_rank % devices));
      if (mp_.rank == 0) RINGLAB_NCCL_CHECK(ncclGetUniqueId(&id));
    } catch (const std::exception& e) {
      failure_ = std::current_exception();
      error = e.what();
    }
    if (!mp_.all_agree(error.empty())) {
      if (error.empty()) {
        error = "another rank failed before NCCL started (its error is on its own line)";
        failure_ = std::make_exception_ptr(CommError("gpu-nccl rank " + std::to_string(mp_.rank) + ": " + error));
        peer_failed_ = true;
      }
      return "E" + error;
    }
    mp_.broadcast(&id, sizeof id);
    try {
      return "R" + serialize(run_nccl_rank(plan, mp_.rank, id, inputs, options_, trace));
    } catch (const std::exception& e) {
      failure_ = std::current_exception();
      return std::string("E") + e.what();
    }
  }

  // The merged result on rank 0; an empty one (the label only) elsewhere.
  ExecutionResult gather(const Plan& plan, const std::string& payload) {
    const std::vector<std::string> gathered = mp_.gather(payload);
    // Rank 0, fine itself but stopped by another rank's setup error, reports that error (below).
    if (failure_ && !(peer_failed_ && mp_.rank == 0)) std::rethrow_exception(std::exchange(failure_, nullptr));
    failure_ = nullptr;
    if (mp_.rank != 0) {
      ExecutionResult none;
      none.executor = label(plan);
      return none;
    }
    std::vector<NcclRankResult> all;
    for (int64_t r = 0; r < plan.ranks(); ++r) {
      const std::string& part = gathered[static_cast<size_t>(r)];
      if (part.empty() || part[0] != 'R') {
        throw CommError("gpu-nccl rank " + std::to_string(r) +
                        " failed: " + (part.empty() ? "no result" : part.substr(1)));
      }
      all.push_back(deserialize(part.substr(1), RankGeometry(plan, r, options_.dtype), plan.layout().positions(r)));
    }
    return merge_nccl_results(plan, std::move(all), label(plan));
  }

  const MultiProcess& mp_;
  std::exception_ptr failure_;
  bool peer_failed_ = false;
};
}  // namespace

std::unique_ptr<Executor> make_nccl_processes_executor(GpuRunOptions options, const MultiProcess& mp) {
  return std::make_unique<NcclProcessesExecutor>(options, mp);
}

}  // namespace ringlab::gpu
