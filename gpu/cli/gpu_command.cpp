// `ringlab-gpu run` and `ringlab-gpu info`. Sections:
//   [flags]        the shared run flags plus --executor and --dtype
//   [execution]    streams, single-process nccl, and nccl across mpirun processes
//   [run]          inputs rounded to the dtype, plan, execution, verification, output
//   [info]         what this machine can run
//   [main]         parsing and exit statuses
#include "gpu/cli/gpu_command.hpp"

#include <CLI/CLI.hpp>
#include <cstring>
#include <exception>
#include <type_traits>
#include <nlohmann/json.hpp>
#include <ostream>

#include "gpu/device.hpp"
#include "gpu/dtype.hpp"
#include "gpu/executors/executor.hpp"
#include "gpu/kernels/attention_kernels.hpp"
#include "reference/error.hpp"
#include "reference/npy.hpp"
#include "sim/run/output_files.hpp"
#include "sim/plan/check.hpp"
#include "sim/run/config.hpp"
#include "sim/run/inputs.hpp"
#include "sim/run/tables.hpp"
#include "sim/run/verification.hpp"
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
  const Shape shapes[] = {{g.B, g.n_local, g.H, g.D}, {g.B, g.H, g.n_local}, {g.B, g.n_local, g.H, g.D},
                          {g.B, g.n_local, g.HKV, g.D}, {g.B, g.n_local, g.HKV, g.D}};
  Tensor<float>* tensors[] = {&r.outputs.out, &r.outputs.lse, &r.outputs.dq, &r.outputs.dk, &r.outputs.dv};
  for (int i = 0; i < 5; ++i) {
    uint64_t count = 0;
    get(&count, sizeof count);
    if (count == 0) continue;
    *tensors[i] = Tensor<float>(shapes[i]);
    if (static_cast<int64_t>(count) != tensors[i]->size()) throw CommError("gpu-nccl: a rank's output has the wrong size");
    get(tensors[i]->data(), count * sizeof(float));
  }
  get(&r.summary, sizeof r.summary);
  get(&r.device_ms, sizeof r.device_ms);
  r.trace = parse_chrome_trace(bytes.substr(at), "gathered trace");
  r.positions = positions;
  return r;
}

// One process per rank: NCCL bootstrapped through MPI, results gathered to rank 0. Returns the
// merged result on rank 0 (and an empty one elsewhere).
GpuRunResult run_nccl_processes(const Plan& plan, const AttentionInputs<float>& inputs, const GpuRunOptions& options,
                                const MultiProcess& mp) {
  if (mp.size != plan.ranks()) {
    throw UsageError("mpirun started " + std::to_string(mp.size) + " processes but --ranks is " +
                     std::to_string(plan.ranks()) + "; use mpirun -np " + std::to_string(plan.ranks()));
  }
  // A rank that fails still takes part in the gather (with its error), so rank 0 never waits
  // for a result that will not come.
  std::string payload;
  std::exception_ptr failure;
  try {
    const int devices = device_count();
    if (devices == 0) throw UsageError("rank " + std::to_string(mp.rank) + " sees no CUDA device");
    RINGLAB_CUDA_CHECK(cudaSetDevice(mp.local_rank % devices));
    ncclUniqueId id;
    if (mp.rank == 0) RINGLAB_NCCL_CHECK(ncclGetUniqueId(&id));
    mp.broadcast(&id, sizeof id);
    ncclComm_t comm = nullptr;
    RINGLAB_NCCL_CHECK(ncclCommInitRank(&comm, mp.size, id, mp.rank));
    NcclRankResult mine;
    try {
      mine = run_nccl_rank(plan, mp.rank, comm, inputs, options);
    } catch (...) {
      ncclCommAbort(comm);
      throw;
    }
    RINGLAB_NCCL_CHECK(ncclCommDestroy(comm));
    payload = "R" + serialize(mine);
  } catch (const std::exception& error) {
    payload = std::string("E") + error.what();
    failure = std::current_exception();
  }
  const std::vector<std::string> gathered = mp.gather(payload);
  if (failure) std::rethrow_exception(failure);
  if (mp.rank != 0) return {};
  std::vector<NcclRankResult> all;
  for (int64_t r = 0; r < plan.ranks(); ++r) {
    const std::string& part = gathered[static_cast<size_t>(r)];
    if (part.empty() || part[0] != 'R') {
      throw CommError("gpu-nccl rank " + std::to_string(r) + " failed: " + (part.empty() ? "no result" : part.substr(1)));
    }
    all.push_back(deserialize(part.substr(1), RankGeometry(plan, r, options.dtype), plan.layout().positions(r)));
  }
  return merge_nccl_results(plan, std::move(all), nccl_label(plan, options, true));
}
#endif

GpuRunResult execute(const GpuRunConfig& config, const Plan& plan, const AttentionInputs<float>& inputs,
                     const GpuRunOptions& options, const MultiProcess* mp) {
  if (config.executor == "streams") {
    if (mp && mp->size > 1) throw UsageError("--executor streams runs in one process; drop mpirun, or use --executor nccl");
    return run_gpu_streams(plan, inputs, options);
  }
#ifdef RINGLAB_WITH_NCCL
  if (mp && mp->size > 1) return run_nccl_processes(plan, inputs, options, *mp);
  return run_gpu_nccl(plan, inputs, options);
#else
  (void)plan, (void)inputs, (void)options;
  throw UsageError("this ringlab-gpu was built without NCCL; use --executor streams, or rebuild with NCCL installed");
#endif
}

// ---- [run] -------------------------------------------------------------------------------------

void save_outputs(const std::string& directory, const RunOutputs& outputs) {
  StagedDirectory staged(directory);
  write_npy(staged.path("out.npy"), outputs.out);
  write_npy(staged.path("lse.npy"), outputs.lse);
  if (outputs.has_backward()) {
    write_npy(staged.path("dq.npy"), outputs.dq);
    write_npy(staged.path("dk.npy"), outputs.dk);
    write_npy(staged.path("dv.npy"), outputs.dv);
  }
  staged.commit();
}

int run(GpuRunConfig& config, std::ostream& out, const MultiProcess* mp) {
  RunConfig& rc = config.run;
  validate(rc);
  const Dtype dtype = parse_dtype(config.dtype);
  if (rc.dry_run) {
    throw UsageError("--dry-run costs a plan without tensors, which is the simulator's job; use ringlab run --dry-run");
  }
  if (!rc.inject.empty()) {
    throw UsageError("--inject is the simulator's fault injection; use ringlab run --inject (the GPU executors "
                     "run real transfers)");
  }
  if (const std::string why = kernel_support(dtype, rc.dims.dim); !why.empty() && rc.in_dir.empty()) throw UsageError(why);
  std::string why_no_device;
  if (!device_available(&why_no_device)) {
    throw UsageError("no CUDA device visible (" + why_no_device +
                     "); run ringlab-gpu on a machine with an NVIDIA GPU, or use ringlab run (the CPU simulator)");
  }
  const bool root = !mp || mp->rank == 0;
  if (root && !rc.save_dir.empty()) check_output_directory(rc.save_dir);
  if (root && !rc.trace_file.empty()) check_output_file(rc.trace_file);

  // The inputs as the device sees them: rounded to the dtype, and the oracle computed on those.
  AttentionInputs<double> inputs = load_inputs(rc);
  if (const std::string why = kernel_support(dtype, rc.dims.dim); !why.empty()) throw UsageError(why);
  inputs.q = rounded_to_dtype(inputs.q, dtype);
  inputs.k = rounded_to_dtype(inputs.k, dtype);
  inputs.v = rounded_to_dtype(inputs.v, dtype);
  if (!inputs.dout.empty()) inputs.dout = rounded_to_dtype(inputs.dout, dtype);
  PlanSpec spec = plan_spec(rc);
  spec.element_bytes = dtype_bytes(dtype);
  const Plan plan = build_plan(spec);
  const PlanCheck check = check_plan(plan);
  if (!check.ok() && plan.spec().erratum == Erratum::none) {
    throw UsageError("the plan checker refused this plan: " + check.findings.front().describe() +
                     "; this is a bug in ringlab's plan for these flags, please report it");
  }

  GpuRunOptions options;
  options.dtype = dtype;
  options.trace = !rc.trace_file.empty();
  options.device = config.device;
  options.timeout = rc.timeout;
  const GpuRunResult result = execute(config, plan, inputs.cast<float>(), options, mp);
  if (!root) return kExitVerified;  // rank 0 verifies and reports for everyone

  const ReferenceOutputs reference = compute_reference(inputs, rc.mask(), rc.backward);
  const Verification verification = verify(result.outputs, reference, result.executor, gpu_tolerance_function(dtype));
  if (!rc.save_dir.empty()) save_outputs(rc.save_dir, result.outputs);
  if (!rc.trace_file.empty()) write_chrome_trace(rc.trace_file, result.trace, static_cast<int>(plan.ranks()));
  const LoadImbalance imbalance = load_imbalance(result.ranks);
  const int status = verification.ok() ? kExitVerified : kExitMismatch;
  if (rc.json) {
    nlohmann::json summary = {{"command", "run"},
                              {"config", plan.spec().describe()},
                              {"executor", result.executor},
                              {"dtype", dtype_name(dtype)},
                              {"plan_check", to_json(check)},
                              {"ranks", to_json(result.ranks)},
                              {"load_imbalance", to_json(imbalance)},
                              {"device_ms", result.device_ms},
                              {"verification", to_json(verification)},
                              {"exit_status", status}};
    out << summary.dump() << "\n";
    return status;
  }
  out << "ringlab-gpu run | " << plan.spec().describe() << "\n";
  out << "executor: " << result.executor << "\n\n";
  if (!check.ok()) {
    out << "plan checker: this erratum variant is wrong by construction; it reports\n";
    for (size_t i = 0; i < check.findings.size() && i < 4; ++i) out << "  " << check.findings[i].describe() << "\n";
    if (check.findings.size() > 4) out << "  ... and " << check.findings.size() - 4 << " more\n";
    out << "\n";
  }
  print_rank_table(out, result.ranks);
  print_load_imbalance(out, imbalance);
  char line[128];
  std::snprintf(line, sizeof line, "device time: %.3f ms (CUDA events, first to last)\n\n", result.device_ms);
  out << line;
  print_verification(out, verification);
  if (!verification.ok()) {
    out << "\nfor the first (rank, step, block) that diverges, run the simulator with the same flags: ringlab run "
           "(its diagnosis checks every block on its own)\n";
  }
  return status;
}

// ---- [info] ------------------------------------------------------------------------------------

int info(std::ostream& out) {
  std::string why;
  const int devices = device_count(&why);
  int runtime = 0, driver = 0;
  (void)cudaRuntimeGetVersion(&runtime);
  (void)cudaDriverGetVersion(&driver);
  out << "CUDA runtime " << runtime / 1000 << "." << runtime % 1000 / 10 << ", driver "
      << (driver ? std::to_string(driver / 1000) + "." + std::to_string(driver % 1000 / 10) : std::string("none")) << "\n";
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
  CLI::App* run_command = app.add_subcommand("run", "run one schedule on the GPU and verify it against exact attention");
  add_gpu_run_flags(*run_command, config);
  CLI::App* info_command = app.add_subcommand("info", "devices, CUDA and NCCL versions, what gpu-nccl can run here");
  const std::string prefix = mp && mp->size > 1 ? "ringlab-gpu (rank " + std::to_string(mp->rank) + "): " : "ringlab-gpu: ";
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    out << app.help(app.get_subcommands().empty() ? "" : app.get_subcommands().front()->get_name());
    return kExitVerified;
  } catch (const CLI::ParseError& error) {
    std::string message = error.what();
    for (char& c : message)
      if (c == '\n') c = ' ';
    err << prefix << "error: " << message << "; run 'ringlab-gpu run --help' for the flags\n";
    return kExitUsage;
  }
  try {
    if (info_command->parsed()) return info(out);
    return run(config, out, mp);
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
