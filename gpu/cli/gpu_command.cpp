// `ringlab-gpu run` and `ringlab-gpu info`. Sections:
//   [flags]        the shared run flags plus --executor and --dtype
//   [execution]    gpu-nccl across mpirun processes (an executor of its own); the executor choice
//   [run]          the run pipeline (sim/run/pipeline.hpp) with the chosen GPU executor
//   [info]         what this machine can run
//   [main]         parsing and exit statuses
#include "gpu/cli/gpu_command.hpp"

#include <CLI/CLI.hpp>
#include <cstring>
#include <exception>
#include <memory>
#include <ostream>
#include <type_traits>
#include <utility>

#include "gpu/device.hpp"
#include "gpu/dtype.hpp"
#include "gpu/executors/executor.hpp"
#include "reference/error.hpp"
#include "sim/run/command_line.hpp"
#include "sim/run/config.hpp"
#include "sim/run/pipeline.hpp"
#ifdef RINGLAB_WITH_NCCL
#include "gpu/executors/nccl_executor.hpp"
#endif

namespace ringlab::gpu {
namespace {

// ---- [flags] -----------------------------------------------------------------------------------

struct GpuRunConfig {
  RunConfig run;
  std::string executor = "streams";
  std::string dtype = "bf16";
  int device = 0;
};

void add_gpu_run_flags(CLI::App& command, GpuRunConfig& config) {
  add_run_flags(command, config.run);
  command.add_option("--executor", config.executor, "streams: P virtual ranks on one GPU | nccl: one GPU per rank")
      ->check(CLI::IsMember({"streams", "nccl"}))
      ->capture_default_str();
  command.add_option("--dtype", config.dtype, "input precision: bf16 | fp16 (tensor cores) | fp32 (precise path)")
      ->check(CLI::IsMember({"bf16", "fp16", "fp32"}))
      ->capture_default_str();
  command.add_option("--device", config.device, "gpu-streams: the CUDA device the virtual ranks share")
      ->capture_default_str();
}

// ---- [execution] -------------------------------------------------------------------------------

#ifdef RINGLAB_WITH_NCCL
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
#endif

std::unique_ptr<Executor> make_executor(const GpuRunConfig& config, const GpuRunOptions& options,
                                        const MultiProcess* mp) {
  const bool processes = mp && mp->size > 1;
  if (config.executor == "streams") {
    if (processes) throw UsageError("--executor streams runs in one process; drop mpirun, or use --executor nccl");
    return std::make_unique<StreamsExecutor>(options);
  }
#ifdef RINGLAB_WITH_NCCL
  if (processes) return std::make_unique<NcclProcessesExecutor>(options, *mp);
  return std::make_unique<NcclExecutor>(options);
#else
  throw UsageError("this ringlab-gpu was built without NCCL; use --executor streams, or rebuild with NCCL installed");
#endif
}

// ---- [run] -------------------------------------------------------------------------------------

// The run pipeline with the chosen executor: inputs rounded to the dtype (and the oracle computed
// on those), the dtype's tolerances, device time, and rank 0 reporting under mpirun.
int run(GpuRunConfig& config, std::ostream& out, std::ostream& err, const MultiProcess* mp, const std::string& prefix) {
  GpuRunOptions options;
  options.dtype = parse_dtype(config.dtype);
  options.device = config.device;
  options.timeout = config.run.timeout;
  const std::unique_ptr<Executor> executor = make_executor(config, options, mp);
  PipelineOptions pipeline;
  pipeline.tool = "ringlab-gpu";
  pipeline.error_prefix = prefix;
  pipeline.executor_line = true;  // two executors and three precisions: the header names which
  return run_pipeline(config.run, *executor, out, err, pipeline);
}

// ---- [info] ------------------------------------------------------------------------------------

int info(std::ostream& out) {
  std::string why;
  const int devices = device_count(&why);
  int runtime = 0, driver = 0;
  (void)cudaRuntimeGetVersion(&runtime);
  (void)cudaDriverGetVersion(&driver);
  out << "CUDA runtime " << runtime / 1000 << "." << runtime % 1000 / 10 << ", driver "
      << (driver ? std::to_string(driver / 1000) + "." + std::to_string(driver % 1000 / 10) : std::string("none"))
      << "\n";
  out << "devices: " << devices << (devices == 0 ? " (" + why + ")" : "") << "\n";
  for (int d = 0; d < devices; ++d) out << "  " << d << ": " << device_description(d) << "\n";
#ifdef RINGLAB_WITH_NCCL
  out << nccl_version_text() << ": gpu-nccl runs up to " << nccl_max_single_process_ranks(devices)
      << " ranks in one process here (one per GPU";
  out << (nccl_max_single_process_ranks(devices) > devices ? "; NCCL_MULTI_RANK_GPU_ENABLE=1 allows two" : "") << ")\n";
#else
  out << "NCCL: not built in (gpu-nccl unavailable)\n";
#endif
#ifdef RINGLAB_WITH_MPI
  out << "MPI: built in (mpirun -np P ringlab-gpu run --executor nccl ...)\n";
#else
  out << "MPI: not built in (gpu-nccl runs single-process)\n";
#endif
  out << "kernels: bf16/fp16 tensor cores (mma.sync m16n8k16) for D = 64, 128; fp32 for D <= 128\n";
  return devices > 0 ? kExitVerified : kExitUsage;
}

}  // namespace

// ---- [main] ------------------------------------------------------------------------------------

int gpu_main(int argc, const char* const* argv, std::ostream& out, std::ostream& err, const MultiProcess* mp) {
  CLI::App app{"ringlab-gpu: the plans of ringlab run on real GPUs (gpu-streams, gpu-nccl)"};
  app.name("ringlab-gpu");
  app.require_subcommand(1);
  GpuRunConfig config;
  CLI::App* run_command =
      app.add_subcommand("run", "run one schedule on the GPU and verify it against exact attention");
  add_gpu_run_flags(*run_command, config);
  CLI::App* info_command = app.add_subcommand("info", "devices, CUDA and NCCL versions, what gpu-nccl can run here");
  const std::string prefix =
      mp && mp->size > 1 ? "ringlab-gpu (rank " + std::to_string(mp->rank) + "): " : "ringlab-gpu: ";
  if (const std::optional<int> status =
          cli::parse_command_line(app, argc, argv, out, err, prefix, "run 'ringlab-gpu run --help' for the flags")) {
    return *status;
  }
  try {
    if (info_command->parsed()) return info(out);
    return run(config, out, err, mp, prefix);
  } catch (const UsageError& error) {
    err << prefix << "error: " << error.what() << "\n";
    return kExitUsage;
  } catch (const CommError& error) {
    err << prefix << "communication fault: " << error.what() << "\n";
    return kExitCommFault;
  } catch (const CudaError& error) {
    if (error.code() == cudaErrorMemoryAllocation) {
      err << prefix << "error: out of device memory (" << error.what()
          << "); use smaller sizes (--seq, --batch, --heads) or fewer virtual ranks\n";
      return kExitUsage;
    }
    err << prefix << "internal CUDA error: " << error.what() << " (please report this)\n";
    return 70;
  } catch (const std::bad_alloc&) {
    err << prefix << "error: out of host memory; use smaller sizes (--seq, --batch, --heads)\n";
    return kExitUsage;
  } catch (const std::exception& error) {
    err << prefix << "internal error: " << error.what() << " (please report this)\n";
    return 70;
  }
}

}  // namespace ringlab::gpu
