// Ring efficiency on gpu-streams: P virtual ranks on one GPU against one kernel over the same
// total work (the same plan at P = 1), forward and forward+backward, and per-step times measured
// with CUDA events next to a model's prediction for the same plan. Sections:
//   [checks]       every schedule verified at a small size before anything is timed
//   [efficiency]   T(P = 1) / T(P) per schedule and P, with the targets of the issue. T(1) and
//                  T(P) time only each run's start and end (GpuRunOptions::span_events off); the
//                  "T(P) ops" column times the same run with every op bracketed by two timing
//                  events, as traces and the per-step tables need: the difference is what that
//                  instrumentation costs the one host thread that enqueues every rank's ops.
//                  "host T(P)" is the host's time enqueueing the T(P) run (StreamsRun::
//                  host_enqueue_ms): near T(P), the host sets the pace.
//                  "T(P) graph" times the same run captured once as a CUDA graph and launched
//                  (GpuRunOptions::graph; T(1) likewise): the host enqueues nothing per op, so
//                  what the host's walk costs the schedule is T(P) - T(P) graph. The verdict is
//                  the plain run's (`eff`), the way `ringlab-gpu run` runs by default.
//   [steps]        per-step measured vs predicted for one P. A step's measured time is the end of
//                  its last event (over the ranks) minus that of the step before (step 0: minus the
//                  phase's first start), as the dry executor times its steps; the virtual ranks'
//                  steps overlap on the one GPU, so spans (first event to last) would overlap too.
//
// Targets (gpu/README.md): >= 90% for the non-causal ring, >= 85% for the zig-zag causal ring
// with skipping; the contiguous causal ring shows its imbalance instead of meeting a target: the
// "work imb" column is max/mean FLOPs over the ranks (1.00 balanced). On one GPU the virtual
// ranks share the SMs, so an idle rank's share goes to the others and the imbalance costs time
// only where one rank's kernels are too small to fill the GPU; on P GPUs it costs it directly.
//
// The predictions, side by side:
//   simple     a step costs max(compute, transfers): compute = the step's FLOPs over all ranks /
//              the FLOP rate of the P = 1 run (the ranks share one GPU), transfers = the step's
//              bytes / the measured device-to-device copy bandwidth
//   dry run    the simulator's cost model (executors/dry/dry_executor.hpp) walking the same plan, on
//              the machine of --hw FILE, or else one built from this run's two figures
//              (executors/dry/calibrate.hpp: the P = 1 run's FLOP rate, the copy bandwidth shared P
//              ways, 5 us launches), its P ranks sharing the one device by processor sharing
//              (DeviceModel::ranks_per_device). Per step: the dry executor's end of the step minus
//              the end of the one before.
//   calibrated the device model fitted to every step measured here (ringlab calibrate's fit:
//              masked-tile efficiency, block size, half-query and half-key calls, per pass),
//              predicted vs measured per step (in-sample); --write-hw FILE writes the machine file.
//              Then one kernel (P = 1) at each block size from S/8 to S, non-causal and causal,
//              measured beside the fitted model's prediction (held out from the fit), and beside
//              it with the forward kernels' floor fitted to those rows (ringlab calibrate's
//              fit_floor: the start-up of a kernel whose thread blocks all fit at once); the
//              machine file --write-hw writes has both fits.
// The per-step tables are forward, then forward+backward (--no-step-backward: forward only); their
// text is what `ringlab calibrate FILE` reads back. --forward-only times the forward pass alone
// and --no-steps stops after the efficiency table: the bundle's A/B of the hardware queues
// (CUDA_DEVICE_MAX_CONNECTIONS, gpu/device.hpp) runs the table twice that way, at 8 and 32 queues.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>
#include <optional>

#include "bench/gpu/bench_gpu_common.hpp"
#include "bench/report_row.hpp"
#include "executors/dry/calibrate.hpp"
#include "executors/dry/dry_executor.hpp"
#include "executors/gpu/executor.hpp"
#include "reference/error.hpp"
#include "reference/inputs.hpp"
#include "sim/pipeline/output_files.hpp"
#include "sim/pipeline/tables.hpp"
#include "sim/pipeline/verification.hpp"

namespace ringlab {
namespace {

struct Schedule {
  const char* name;
  Algorithm algo;
  LayoutKind layout;
  bool causal;
  int64_t ulysses;
  double target;  // efficiency target, 0 = none
};

const Schedule kSchedules[] = {
    {"ring contiguous, full", Algorithm::ring, LayoutKind::contiguous, false, 1, 0.90},
    {"ring zigzag, causal+skip", Algorithm::ring, LayoutKind::zigzag, true, 1, 0.85},
    {"ring contiguous, causal+skip", Algorithm::ring, LayoutKind::contiguous, true, 1, 0},
    {"ring striped, causal+skip", Algorithm::ring, LayoutKind::striped, true, 1, 0},
    {"allgather zigzag, causal", Algorithm::allgather, LayoutKind::zigzag, true, 1, 0},
    {"ulysses contiguous, causal", Algorithm::ulysses, LayoutKind::contiguous, true, 1, 0},
};

PlanSpec spec_of(const Schedule& s, int64_t P, const AttentionDims& dims, bool backward, gpu::Dtype dtype) {
  PlanSpec spec;
  spec.algo = s.algo;
  spec.layout = s.layout;
  spec.ranks = P;
  spec.ulysses = s.ulysses;
  spec.dims = dims;
  spec.causal = s.causal;
  spec.backward = backward;
  spec.element_bytes = gpu::dtype_bytes(dtype);
  return spec;
}

struct Timing {
  double ms = 0;         // median device time of a whole run
  double host_ms = 0;    // median host time enqueueing it (StreamsRun::host_enqueue_ms)
  double imbalance = 1;  // max / mean FLOPs over the ranks
};

Timing median_device_ms(gpu::StreamsRun& run, int warmup, int iterations) {
  for (int i = 0; i < warmup; ++i) run.run(false);
  std::vector<double> times, host;
  Timing timing;
  for (int i = 0; i < iterations; ++i) {
    const ExecutionResult result = run.run(false);
    times.push_back(result.time.seconds * 1e3);
    host.push_back(run.host_enqueue_ms());
    timing.imbalance = load_imbalance(result.ranks).flops_max_over_mean;
  }
  std::sort(times.begin(), times.end());
  std::sort(host.begin(), host.end());
  timing.ms = times[times.size() / 2];
  timing.host_ms = host[host.size() / 2];
  return timing;
}

// The same run as one CUDA graph (GpuRunOptions::graph): its median milliseconds, or -1 after
// printing why once when the capture or a launch fails, so that a graph problem on some device
// costs the table one column, not the per-step tables and the fit that follow.
double median_graph_ms(gpu::StreamsRun& run, int iterations) {
  static bool reported = false;
  try {
    run.set_graph(true);
    const double ms = median_device_ms(run, 1, iterations).ms;
    run.set_graph(false);
    return ms;
  } catch (const gpu::CudaError& e) {
    run.set_graph(false);
    (void)cudaGetLastError();
    if (!reported) std::printf("(as one CUDA graph: %s; the graph columns say n/a)\n", e.what());
    reported = true;
    return -1;
  }
}

// ---- [checks] ----------------------------------------------------------------------------------

bool check_schedule(const Schedule& s, int64_t P, gpu::Dtype dtype, std::string& detail) {
  AttentionDims dims;
  dims.seq = 64 * 2 * P, dims.heads = 4 * P, dims.kv_heads = P, dims.dim = 128;  // divisible for every layout
  const PlanSpec spec = spec_of(s, P, dims, true, dtype);
  const Plan plan = build_plan(spec);
  AttentionInputs<double> x = make_inputs(dims, 11, true).cast<double>();
  x.q = gpu::rounded_to_dtype(x.q, dtype), x.k = gpu::rounded_to_dtype(x.k, dtype);
  x.v = gpu::rounded_to_dtype(x.v, dtype), x.dout = gpu::rounded_to_dtype(x.dout, dtype);
  gpu::GpuRunOptions options;
  options.dtype = dtype;
  const ExecutionResult result = gpu::StreamsRun(plan, x.cast<float>(), options).run(true);
  const ReferenceOutputs reference = compute_reference(x, s.causal ? MaskKind::causal : MaskKind::none, true);
  const Verification v = verify(result.outputs, reference, result.executor, gpu::gpu_tolerance_function(dtype));
  for (const TensorCheck& c : v.checks)
    if (!c.result.ok) detail = c.name + ": " + c.result.describe();
  return v.ok();
}

// ---- [steps] -----------------------------------------------------------------------------------

struct Calibration {
  double flops_per_ms = 0;  // achieved by the P = 1 run
  double bytes_per_ms = 0;  // device-to-device copy
};

double copy_bandwidth_bytes_per_ms(cudaStream_t stream) {
  const size_t bytes = size_t(256) << 20;
  gpu::DeviceBuffer a(bytes), b(bytes);
  const double ms = bench::time_ms(stream, 2, 5, [&] {
    RINGLAB_CUDA_CHECK(cudaMemcpyAsync(b.get(), a.get(), bytes, cudaMemcpyDeviceToDevice, stream));
  });
  return double(bytes) / ms;
}

double predicted_step_ms(double step_flops, double step_bytes, const Calibration& c) {
  return std::max(step_flops / c.flops_per_ms, step_bytes / c.bytes_per_ms);
}

// The cost model's machine for P virtual ranks on this GPU: `model` (--hw FILE) with its ranks
// sharing the device, or one built from this run's two figures (executors/dry/calibrate.hpp).
Hardware one_gpu_machine(const Calibration& c, int64_t P, const AttentionDims& dims, gpu::Dtype dtype,
                         const Hardware* model) {
  if (model != nullptr) {
    Hardware hw = *model;
    hw.device.ranks_per_device = P, hw.device.shared_cores = 0, hw.ranks_per_node = P;
    return hw;
  }
  return gpu_streams_machine(c.flops_per_ms * 1e3, c.bytes_per_ms * 1e3, P, gpu::dtype_bytes(dtype),
                             gpu::device_description(0), true, dims.seq);
}

// One schedule's per-step table (forward, or forward+backward with both phases); returns what it
// measured, one StepTable per phase, for the fit.
std::vector<StepTable> print_steps(const Schedule& s, int64_t P, const AttentionDims& dims, gpu::Dtype dtype,
                                   const Calibration& c, bool backward, const Hardware* model) {
  const PlanSpec spec = spec_of(s, P, dims, backward, dtype);
  const Plan plan = build_plan(spec);
  const AttentionInputs<float> x = make_inputs(dims, 1, backward);
  gpu::GpuRunOptions options;
  options.dtype = dtype;
  gpu::StreamsRun run(plan, x, options);
  run.run(false);  // warm-up
  const ExecutionResult result = run.run(false, true);
  // Per (phase label, step): the end of its last event, FLOPs and received bytes over all ranks;
  // per phase, the start of its first event (a step's time: see [steps] at the top).
  struct Step {
    double end = 0, flops = 0, bytes = 0, dry_ms = -1;
  };
  std::map<std::pair<std::string, int>, Step> steps;
  std::map<std::string, double> phase_start;  // us
  std::map<std::string, bool> computes;       // phases with kernels: the ones a table lists
  for (const TraceEvent& e : result.trace) {
    Step& st = steps[{e.label, e.step}];
    st.end = std::max(st.end, e.start_us + e.duration_us);
    const auto [at, inserted] = phase_start.try_emplace(e.label, e.start_us);
    if (!inserted) at->second = std::min(at->second, e.start_us);
    if (e.flops > 0) st.flops += e.flops, computes[e.label] = true;
    if (e.name == "recv" && e.bytes > 0) st.bytes += double(e.bytes);
  }
  const Hardware machine = one_gpu_machine(c, P, dims, dtype, model);
  const DryResult dry = run_dry_plan(plan, machine);
  for (size_t i = 0; i < dry.steps.size(); ++i) {
    const DryStep& d = dry.steps[i];
    const bool first = i == 0 || dry.steps[i - 1].phase != d.phase;
    const double begin = first ? dry.phases[static_cast<size_t>(d.phase)].start_s : dry.steps[i - 1].end_s;
    const auto found = steps.find({plan.phases()[static_cast<size_t>(d.phase)].name, static_cast<int>(d.step)});
    if (found != steps.end()) found->second.dry_ms = (d.end_s - begin) * 1e3;
  }
  const char* pass = backward ? "forward+backward" : "forward";
  std::printf(
      "\nper-step times: %s, P=%lld, %s, %s (one run, CUDA events; a step: its last end minus the last end "
      "of the step before)\n",
      s.name, static_cast<long long>(P), dims.to_string().c_str(), pass);
  std::printf("%-22s %5s %11s %11s %9s %11s %9s %12s\n", "phase", "step", "measured", "simple", "meas/simp", "dry run",
              "meas/dry", "GFLOP");
  std::printf("%-22s %5s %11s %11s %9s %11s %9s %12s\n", "", "", "[ms]", "[ms]", "", "[ms]", "", "");
  std::vector<double> dry_ratios;
  std::vector<StepTable> tables;
  // Phases in plan order (forward before backward), each phase's steps in order.
  for (const Phase& phase : plan.phases()) {
    if (!computes[phase.name]) continue;
    StepTable table;
    table.schedule = s.name, table.spec = spec, table.phase = phase.name;
    table.flops_per_s = c.flops_per_ms * 1e3, table.copy_Bps = c.bytes_per_ms * 1e3;
    double before = phase_start[phase.name];  // us: the end of the step before, or the phase's start
    for (int step = 0; step < phase.steps; ++step) {
      const auto found = steps.find({phase.name, step});
      if (found == steps.end()) break;
      const Step& st = found->second;
      const double end = std::max(st.end, before);  // a step with events on fewer ranks may end earlier
      const double measured = (end - before) / 1000.0, simple = predicted_step_ms(st.flops, st.bytes, c);
      before = end;
      table.measured.push_back(measured * 1e-3);
      char dry_cell[16] = "-", dry_ratio[16] = "-";
      if (st.dry_ms > 0) {
        std::snprintf(dry_cell, sizeof dry_cell, "%.3f", st.dry_ms);
        std::snprintf(dry_ratio, sizeof dry_ratio, "%.2f", measured / st.dry_ms);
        dry_ratios.push_back(measured / st.dry_ms);
      }
      std::printf("%-22s %5d %11.3f %11.3f %9.2f %11s %9s %12.2f\n", phase.name.c_str(), step, measured, simple,
                  simple > 0 ? measured / simple : 0.0, dry_cell, dry_ratio, st.flops / 1e9);
    }
    tables.push_back(table);
  }
  std::printf("simple model: max(step FLOPs / %.1f TFLOP/s, step bytes / %.0f GB/s), both measured in this run\n",
              c.flops_per_ms / 1e9, c.bytes_per_ms / 1e6);
  std::printf("dry run: sim/cost's dry executor on the same plan, %s\n",
              model != nullptr ? ("machine " + machine.name + " (--hw), its P ranks sharing this GPU").c_str()
                               : "P ranks sharing one device at this run's two figures, kernel shapes not calibrated");
  if (!dry_ratios.empty()) {
    std::sort(dry_ratios.begin(), dry_ratios.end());
    const double median = dry_ratios[dry_ratios.size() / 2];
    bench::report_row("gpu ring",
                      bench::format("%s P=%lld %s: measured / dry-run step time, median over steps", s.name,
                                    static_cast<long long>(P), backward ? "fwd+bwd" : "fwd"),
                      bench::format("%.2f", median), "-", "-");
  }
  return tables;
}

// Fits the device model to every step measured above and prints predicted vs measured per step
// (the fit's own data: in-sample).
Hardware calibrate(const std::vector<StepTable>& tables, const Calibration& c, const AttentionDims& dims,
                   gpu::Dtype dtype) {
  const int64_t P = tables.front().spec.ranks;
  const FitResult fit = fit_device(one_gpu_machine(c, P, dims, dtype, nullptr), tables);
  std::printf("\ncalibrated model (ringlab calibrate on the tables above; in-sample: %zu unknowns, %d steps)\n",
              fit.fitted.size(), fit.points);
  std::printf("%-38s %-16s %5s %11s %11s %9s\n", "schedule", "phase", "step", "measured", "fitted", "error");
  for (const StepTable& t : tables) {
    const std::vector<double> predicted = predicted_steps(t.spec, t.phase, fit.hardware);
    for (size_t s = 0; s < t.measured.size() && s < predicted.size(); ++s) {
      std::printf("%-38s %-16s %5zu %11.3f %11.3f %+8.1f%%\n", t.schedule.c_str(), t.phase.c_str(), s,
                  t.measured[s] * 1e3, predicted[s] * 1e3, 100 * (predicted[s] / t.measured[s] - 1));
    }
  }
  for (const std::string& line : fit.fitted) std::printf("  fitted: %s\n", line.c_str());
  bench::report_row("gpu ring", "calibrated model: largest |predicted / measured - 1| over the steps (in-sample)",
                    bench::format("%.1f%%", 100 * fit.max_abs_error), "<= 15%",
                    fit.max_abs_error <= 0.15 ? "met" : "MISSED");
  return fit.hardware;
}

// One kernel (P = 1) at each block size, non-causal (the block_rows factors) and causal (the masked
// efficiency), measured and predicted by the step fit (held out from it); then the forward
// kernels' floor (DeviceModel::forward_floor_s) fitted to these rows and their prediction with it
// (in-sample). Returns the step fit with the floor: the machine file.
Hardware kernel_sweep(const AttentionDims& dims, gpu::Dtype dtype, const Calibration& c, const Hardware& fitted,
                      int iterations) {
  cudaDeviceProp prop{};
  RINGLAB_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  KernelRows rows;
  rows.sms = prop.multiProcessorCount;
  std::vector<double> flops;
  for (int64_t n = std::max<int64_t>(1024, dims.seq / 8); n <= dims.seq; n *= 2) {
    for (bool causal : {false, true}) {
      AttentionDims d = dims;
      d.seq = n;
      const Schedule s{"one kernel", Algorithm::ring, LayoutKind::contiguous, causal, 1, 0};
      StepTable t;
      t.schedule = "one kernel, S=" + std::to_string(n) + (causal ? ", causal" : ", full");
      t.spec = spec_of(s, 1, d, false, dtype);
      t.phase = "ring forward";
      gpu::GpuRunOptions options;
      options.dtype = dtype;
      gpu::StreamsRun run(build_plan(t.spec), make_inputs(d, 1, false), options);
      t.measured = {median_device_ms(run, 1, iterations).ms * 1e-3};
      flops.push_back(bench::attention_flops(d.batch, d.heads, n, d.dim, causal, false));
      rows.tables.push_back(std::move(t));
    }
  }
  const FitResult floor = fit_floor(fitted, rows);
  std::printf(
      "\none kernel by block size (P = 1 runs, median of %d; predicted: the step fit, held out; with floor: then the "
      "forward kernels' floor fitted to these rows, in-sample)\n",
      iterations);
  std::printf("%7s %7s %10s %10s %10s %11s %9s %11s %9s\n", "S", "causal", "measured", "TFLOP/s", "of peak",
              "predicted", "error", "with floor", "error");
  std::printf("%7s %7s %10s %10s %10s %11s %9s %11s %9s\n", "", "", "[ms]", "", "", "[ms]", "", "[ms]", "");
  for (size_t i = 0; i < rows.tables.size(); ++i) {
    const StepTable& t = rows.tables[i];
    const double ms = t.measured[0] * 1e3;
    const double predicted = predicted_steps(t.spec, t.phase, fitted).at(0) * 1e3;
    const double with_floor = predicted_steps(t.spec, t.phase, floor.hardware).at(0) * 1e3;
    std::printf("%7lld %7s %10.3f %10.1f %10.3f %11.3f %+8.1f%% %11.3f %+8.1f%%\n",
                static_cast<long long>(t.spec.dims.seq), t.spec.causal ? "yes" : "no", ms, flops[i] / ms / 1e9,
                flops[i] / ms / c.flops_per_ms, predicted, 100 * (predicted / ms - 1), with_floor,
                100 * (with_floor / ms - 1));
  }
  for (const std::string& line : floor.fitted) std::printf("  fitted: %s\n", line.c_str());
  return floor.hardware;
}

}  // namespace
}  // namespace ringlab

int main(int argc, char** argv) {
  using namespace ringlab;
  gpu::request_hardware_queues();  // before any CUDA call; an explicit CUDA_DEVICE_MAX_CONNECTIONS stays
  CLI::App app{"bench_gpu_ring: gpu-streams efficiency vs one kernel, and per-step times vs a model"};
  AttentionDims dims;
  dims.seq = 16384, dims.heads = 32, dims.kv_heads = 8, dims.dim = 128;
  std::string ranks = "2,4,8", dtype_name = "bf16";
  int iterations = 5, step_ranks = 4;
  app.add_option("--seq", dims.seq)->capture_default_str();
  app.add_option("--heads", dims.heads)->capture_default_str();
  app.add_option("--kv-heads", dims.kv_heads)->capture_default_str();
  app.add_option("--dim", dims.dim)->capture_default_str();
  app.add_option("--batch", dims.batch)->capture_default_str();
  app.add_option("--ranks", ranks, "virtual ranks P")->capture_default_str();
  app.add_option("--dtype", dtype_name)->capture_default_str();
  app.add_option("--iterations", iterations)->capture_default_str();
  app.add_option("--step-ranks", step_ranks, "P of the per-step table")->capture_default_str();
  std::string hw_file, write_hw;
  bool step_backward = true;
  app.add_option("--hw", hw_file, "the per-step tables' dry-run column on this machine file (its ranks share the GPU)");
  app.add_option("--write-hw", write_hw,
                 "fit the cost model to every measured step (ringlab calibrate) and write the machine file here");
  app.add_flag("!--no-step-backward", step_backward, "per-step tables of the forward pass only");
  bool forward_only = false, steps = true;
  app.add_flag("--forward-only", forward_only, "time the forward pass alone (efficiency and per-step tables)");
  app.add_flag("!--no-steps", steps, "stop after the efficiency table: no per-step tables, fit or kernel sweep");
  CLI11_PARSE(app, argc, argv);
  std::optional<Hardware> model;
  try {
    if (!hw_file.empty()) model = load_hardware(hw_file, dims.dim);
  } catch (const UsageError& e) {
    std::cerr << "bench_gpu_ring: error: " << e.what() << "\n";
    return 2;
  }
  std::string why;
  if (!gpu::device_available(&why)) {
    std::cerr << "bench_gpu_ring: no CUDA device (" << why << "); nothing to measure\n";
    return 2;
  }
  const gpu::Dtype dtype = gpu::parse_dtype(dtype_name);
  const std::vector<int64_t> Ps = bench::parse_list(ranks);

  int failures = 0;
  std::printf("checks before timing (S = 128 P, every output vs exact attention, %s tolerances):\n",
              gpu::dtype_name(dtype));
  for (const Schedule& s : kSchedules)
    for (int64_t P : Ps) {
      std::string detail;
      const bool ok = check_schedule(s, P, dtype, detail);
      failures += ok ? 0 : 1;
      if (!ok) std::printf("  FAIL %s P=%lld: %s\n", s.name, static_cast<long long>(P), detail.c_str());
    }
  std::printf("  %s\n\n", failures ? "some schedules FAILED: their times below are not meaningful" : "all ok");

  std::printf("efficiency on %s: T(one kernel, P=1) / T(P virtual ranks), %s, %s\n", gpu::device_description(0).c_str(),
              dims.to_string().c_str(), gpu::dtype_name(dtype));
  const char* queues_set = std::getenv(gpu::kHardwareQueuesVariable);
  std::printf("hardware queues: %d (%s=%s); gpu-streams uses 2 streams per virtual rank\n", gpu::hardware_queues(),
              gpu::kHardwareQueuesVariable, queues_set ? queues_set : "unset");
  std::printf("%-30s %4s %8s %10s %10s %9s %7s %7s %9s %10s %7s %10s %9s  %s\n", "schedule", "P", "pass", "T(1)",
              "T(P)", "host T(P)", "eff", "target", "work imb", "T(P) ops", "eff ops", "T(P) graph", "eff graph",
              "verdict");
  std::printf("%-30s %4s %8s %10s %10s %9s %7s %7s %9s %10s %7s %10s %9s\n", "", "", "", "[ms]", "[ms]", "[ms]", "[%]",
              "[%]", "[max/mean]", "[ms]", "[%]", "[ms]", "[%]");
  Calibration calibration;
  gpu::Stream stream;
  calibration.bytes_per_ms = copy_bandwidth_bytes_per_ms(stream.get());
  int missed = 0;
  const AttentionInputs<float> x = make_inputs(dims, 1, true);  // dout is only uploaded by backward plans
  std::vector<StepTable> whole_blocks;  // the backward of one whole block, causal and not, for the fit
  for (const Schedule& s : kSchedules) {
    double t1_forward = 0;
    for (bool backward : {false, true}) {
      if (backward && forward_only) continue;
      gpu::GpuRunOptions options;
      options.dtype = dtype;
      options.span_events = false;  // T(1), T(P): the run's start and end events only
      const Plan single = build_plan(spec_of(s, 1, dims, backward, dtype));
      gpu::StreamsRun one(single, x, options);
      const double t1 = median_device_ms(one, 1, iterations).ms;
      const double t1_graph = median_graph_ms(one, iterations);
      if (!backward) t1_forward = t1;
      if (backward && s.algo == Algorithm::ring && s.layout == LayoutKind::contiguous) {
        whole_blocks.push_back(
            whole_block_backward(s.name, spec_of(s, 1, dims, true, dtype), t1_forward * 1e-3, t1 * 1e-3));
      }
      if (!backward && s.algo == Algorithm::ring && !s.causal) {  // the model's FLOP rate: one full kernel
        calibration.flops_per_ms =
            bench::attention_flops(dims.batch, dims.heads, dims.seq, dims.dim, false, false) / t1;
      }
      for (int64_t P : Ps) {
        const Plan plan = build_plan(spec_of(s, P, dims, backward, dtype));
        gpu::StreamsRun many(plan, x, options);
        const Timing timing = median_device_ms(many, 1, iterations);
        many.set_span_events(true);  // the same run with every op bracketed by timing events
        const double tp_ops = median_device_ms(many, 0, iterations).ms;
        const double tp_graph = median_graph_ms(many, iterations);
        char graph_ms[16] = "n/a", graph_eff[16] = "n/a";
        if (t1_graph > 0 && tp_graph > 0) {
          std::snprintf(graph_ms, sizeof graph_ms, "%.3f", tp_graph);
          std::snprintf(graph_eff, sizeof graph_eff, "%.1f", 100 * t1_graph / tp_graph);
        }
        const double tp = timing.ms, efficiency = t1 / tp;
        const char* verdict = s.target == 0 ? "-" : efficiency >= s.target ? "met" : "MISSED";
        missed += s.target > 0 && efficiency < s.target ? 1 : 0;
        char target[16] = "-";
        if (s.target > 0) std::snprintf(target, sizeof target, "%.0f", 100 * s.target);
        std::printf("%-30s %4lld %8s %10.3f %10.3f %9.3f %7.1f %7s %9.2f %10.3f %7.1f %10s %9s  %s\n", s.name,
                    static_cast<long long>(P), backward ? "fwd+bwd" : "fwd", t1, tp, timing.host_ms, 100 * efficiency,
                    target, timing.imbalance, tp_ops, 100 * t1 / tp_ops, graph_ms, graph_eff, verdict);
        bench::report_row("gpu ring",
                          bench::format("%s P=%lld %s: T(P=1) / T(P)", s.name, static_cast<long long>(P),
                                        backward ? "fwd+bwd" : "fwd"),
                          bench::format("%.1f%% (%.3f / %.3f ms)", 100 * efficiency, t1, tp),
                          s.target > 0 ? bench::format(">= %.0f%%", 100 * s.target) : "-", verdict);
      }
    }
  }
  if (steps && calibration.flops_per_ms > 0) {
    std::vector<StepTable> measured;
    for (bool backward : {false, true}) {
      if (backward && (!step_backward || forward_only)) continue;
      for (const Schedule& s : kSchedules)
        if (s.algo == Algorithm::ring && s.causal && s.layout != LayoutKind::striped) {
          const std::vector<StepTable> tables =
              print_steps(s, step_ranks, dims, dtype, calibration, backward, model ? &*model : nullptr);
          // The fit takes the forward steps of the forward run and everything of the fwd+bwd run's
          // backward phase (its forward steps repeat the forward run's).
          for (const StepTable& t : tables)
            if (!backward || t.spec.backward == (t.phase.find("backward") != std::string::npos)) measured.push_back(t);
        }
    }
    if (!measured.empty()) {
      // With the backward of one whole block (the P = 1 runs above): the backward's speed at the
      // peak's block size, so that the backward's block-size factors can be fitted (calibrate.hpp).
      if (step_backward && !forward_only) measured.insert(measured.end(), whole_blocks.begin(), whole_blocks.end());
      const Hardware fitted =
          kernel_sweep(dims, dtype, calibration, calibrate(measured, calibration, dims, dtype), iterations);
      if (!write_hw.empty()) {
        Hardware out = fitted;
        out.name = write_hw;
        write_file_atomically(write_hw, to_json(out).dump(2) + "\n");
        std::printf("wrote %s (ringlab run --dry-run --hw %s; its ranks_per_device is this run's P)\n",
                    write_hw.c_str(), write_hw.c_str());
      }
    }
  }
  std::printf("\n%s: %d check failure(s), %d efficiency target(s) missed\n", failures || missed ? "FAIL" : "PASS",
              failures, missed);
  return failures ? 1 : 0;
}
