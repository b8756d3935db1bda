// `ringlab-gpu run` and `ringlab-gpu info`. Sections:
//   [flags]        the shared run flags plus --executor and --dtype
//   [execution]    the executor choice (gpu-nccl across mpirun processes: executors/gpu/nccl_processes_executor.hpp)
//   [run]          the run pipeline (sim/pipeline/pipeline.hpp) with the chosen GPU executor
//   [info]         what this machine can run
//   [main]         parsing and exit statuses
#include "cli/ringlab-gpu/gpu_command.hpp"

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <ostream>
#include <type_traits>
#include <utility>

#include "executors/gpu/executor.hpp"
#include "gpu/device.hpp"
#include "gpu/dtype.hpp"
#include "reference/error.hpp"
#include "sim/pipeline/command_line.hpp"
#include "sim/pipeline/config.hpp"
#include "sim/pipeline/pipeline.hpp"
#ifdef RINGLAB_WITH_NCCL
#include "executors/gpu/nccl_executor.hpp"
#include "executors/gpu/nccl_processes_executor.hpp"
#endif

namespace ringlab::gpu {
namespace {

// ---- [flags] -----------------------------------------------------------------------------------

struct GpuRunConfig {
  RunConfig run;
  std::string executor = "streams";
  std::string dtype = "bf16";
  int device = 0;
  int warmup = 1;
  bool graph = false;
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
  command
      .add_option("--warmup", config.warmup,
                  "untimed runs of the whole plan before the timed one (first launches: lazy module loading, "
                  "attribute setting; gpu-nccl's first connections); 0 times them too")
      ->check(CLI::Range(0, 10))
      ->capture_default_str();
  command.add_flag("--graph", config.graph,
                   "gpu-streams: capture the run once as a CUDA graph and time its launch (the host enqueues "
                   "nothing per op; the whole run is timed, so no --trace)");
}

// ---- [execution] -------------------------------------------------------------------------------

std::unique_ptr<Executor> make_executor(const GpuRunConfig& config, const GpuRunOptions& options,
                                        const MultiProcess* mp) {
  const bool processes = mp && mp->size > 1;
  if (config.executor == "streams") {
    if (processes) throw UsageError("--executor streams runs in one process; drop mpirun, or use --executor nccl");
    return std::make_unique<StreamsExecutor>(options);
  }
#ifdef RINGLAB_WITH_NCCL
  if (processes) return make_nccl_processes_executor(options, *mp);
  return std::make_unique<NcclExecutor>(options);
#else
  throw UsageError("this ringlab-gpu was built without NCCL; use --executor streams, or rebuild with NCCL installed");
#endif
}

// ---- [run] -------------------------------------------------------------------------------------

// The hardware queues gpu-streams' 2 P streams get (gpu/device.hpp): a value the driver cannot
// take is refused; too few for the streams is a warning, since the run is still correct.
void warn_of_shared_queues(const GpuRunConfig& config, std::ostream& err, const std::string& prefix) {
  if (hardware_queues() < 1) {
    throw UsageError(std::string(kHardwareQueuesVariable) + "=" + std::getenv(kHardwareQueuesVariable) +
                     " is not a number of hardware queues the CUDA driver takes (1 to 32); unset it (ringlab-gpu "
                     "then asks for 32) or set it in that range");
  }
  if (config.executor != "streams") return;
  const int64_t streams = 2 * config.run.ranks;
  const std::string sharing = queue_sharing(streams);
  if (sharing.empty()) return;
  err << prefix << "warning: " << sharing
      << ": a rank's work can wait behind another's that it does not depend on, and the times come out longer; "
      << (streams <= kMostHardwareQueues
              ? "unset " + std::string(kHardwareQueuesVariable) + " (ringlab-gpu then asks for 32) or set it to 32"
              : "there are at most 32: up to 16 virtual ranks run with a queue per stream")
      << "\n";
}

// The run pipeline with the chosen executor: inputs rounded to the dtype (and the oracle computed
// on those), the dtype's tolerances, device time, and rank 0 reporting under mpirun.
int run(GpuRunConfig& config, std::ostream& out, std::ostream& err, const MultiProcess* mp, const std::string& prefix) {
  if (config.graph && config.executor != "streams") {
    throw UsageError("--graph captures gpu-streams' run; drop it, or use --executor streams");
  }
  if (config.graph && !config.run.trace_file.empty()) {
    throw UsageError("--graph times the whole run, not its ops: no trace; drop --graph or --trace");
  }
  warn_of_shared_queues(config, err, prefix);
  GpuRunOptions options;
  options.graph = config.graph;
  options.dtype = parse_dtype(config.dtype);
  options.device = config.device;
  options.warmup = config.warmup;
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
  const int queues = hardware_queues();
  out << "hardware queues per context: " << (queues > 0 ? std::to_string(queues) : std::string("not a number")) << " ("
      << kHardwareQueuesVariable << "; gpu-streams uses 2 per virtual rank, so "
      << (queues > 1 ? "up to " + std::to_string(queues / 2) + " ranks get a queue per stream" : "its ranks share")
      << ")\n";
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
