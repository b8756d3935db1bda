// bench_cpu_model — the `cpu` hardware preset (sim/cost/cpu_calibration.hpp) against the sim
// executor it describes, side by side in one run.
//
// For fwd+bwd runs — ring at P = 1, 2, 4, 8 and a causal zig-zag ring at P = 4, B=1 H=4 D=64 —
// it measures, from the sim executor's own trace, the forward step (median over steps and ranks
// of one step's attention compute), the backward step (the same) and the total time (from the
// last rank's first op to the end), and predicts the same three figures with the dry executor on
// the calibrated preset. Target: the model within 5% of the simulator on every per-step figure;
// the total is reported next to them, against the same 5%.
//
// How it stays fair on a shared machine: the preset is calibrated in this process right before
// and right after each run, and that run is predicted from the mean of the two (a machine that
// speeds up or slows down over the seconds of a run is measured as it was then); every case is
// warmed up once, then repeated, and the error reported is the median over the repetitions of
// each repetition's predicted / measured ratio. A repetition during which other processes took
// more than 10% of the machine (Linux: /proc/stat) is run again, up to three times, and the
// quietest attempt is kept; the last column says how much of the machine other processes took
// during the runs kept: the figures are only as good as the machine is idle.
// On a shared Linux machine, giving the benchmark its own session at high priority helps:
//   setsid sh -c 'echo -20 > /proc/self/autogroup && exec build/bench/cost/bench_cpu_model'
//
// Usage: bench_cpu_model [--quick] [--repeat N]
//   --quick   small sizes, one repetition, one calibration: checks that every row is printed
//             (the figures then mean nothing; the smoke test in bench/cost/CMakeLists.txt runs it)
//   --repeat  repetitions per case (default 5)
// Exit status: 0 when every run verified (a missed accuracy target is reported in the rows, not
// an error), 1 when a sim run failed, 2 on bad usage.
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "bench/report_row.hpp"
#include "executors/dry/dry_executor.hpp"
#include "executors/sim/sim_executor.hpp"
#include "reference/inputs.hpp"
#include "sim/cost/cpu_calibration.hpp"

using namespace ringlab;

namespace {

constexpr double kTarget = 0.05;  // |predicted / measured - 1| per figure

double median(std::vector<double> values) {
  if (values.empty()) return NAN;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

// The three figures of one run, seconds.
struct Timing {
  double forward_step_s = 0;   // median over forward steps (and ranks) of a step's attention compute
  double backward_step_s = 0;  // the same over backward steps
  double total_s = 0;          // the last rank's first op to the end of the run
};

// The sim executor, measured from its own trace. Returns false when the run did not verify.
bool measure(const Plan& plan, const AttentionInputs<float>& x, Timing& timing) {
  WorldOptions world;
  world.timeout_seconds = 300;
  ExecuteOptions options;
  options.trace = true;
  const ExecutionResult sim = SimExecutor(world).execute(plan, x, options);
  if (sim.failure) return false;
  std::vector<double> forward, backward;
  std::vector<double> first(static_cast<size_t>(plan.ranks()), INFINITY), last(first.size(), 0);
  for (const TraceEvent& e : sim.trace) {
    if (e.lane == TraceLane::compute) (e.name == "attention fwd" ? forward : backward).push_back(e.duration_us * 1e-6);
    const size_t r = static_cast<size_t>(e.rank);
    first[r] = std::min(first[r], e.start_us), last[r] = std::max(last[r], e.start_us + e.duration_us);
  }
  // From the moment the last rank starts its first op to the end of the last op: the rank threads
  // start up to a scheduler slice apart (thread start-up is not part of the plan, and the model
  // starts every rank at 0); the ranks that started early only wait for the late one.
  const double all_started = *std::max_element(first.begin(), first.end());
  const double all_done = *std::max_element(last.begin(), last.end());
  timing = {median(forward), median(backward), (all_done - all_started) * 1e-6};
  return true;
}

Timing predict(const Plan& plan, const Hardware& hw) {
  const DryResult dry = run_dry_plan(plan, hw);
  std::vector<double> forward, backward;
  for (const DryStep& s : dry.steps) {
    (plan.phases()[static_cast<size_t>(s.phase)].pass == Pass::forward ? forward : backward)
        .push_back(s.compute_mean_s);
  }
  return {median(forward), median(backward), dry.makespan_s};
}

// The mean of two calibrations, rate by rate.
CpuCalibration mean_calibration(const CpuCalibration& a, const CpuCalibration& b) {
  CpuCalibration m = a;
  for (double CpuCalibration::*field :
       {&CpuCalibration::forward_full_flops, &CpuCalibration::forward_masked_flops,
        &CpuCalibration::backward_full_flops, &CpuCalibration::backward_masked_flops, &CpuCalibration::kernel_call_s,
        &CpuCalibration::copy_bandwidth_Bps, &CpuCalibration::verify_bandwidth_Bps, &CpuCalibration::message_latency_s,
        &CpuCalibration::memory_bandwidth_Bps, &CpuCalibration::first_touch_Bps}) {
    m.*field = 0.5 * (a.*field + b.*field);
  }
  for (size_t i = 0; i < m.thread_scaling.size() && i < b.thread_scaling.size(); ++i) {
    m.thread_scaling[i].forward = 0.5 * (a.thread_scaling[i].forward + b.thread_scaling[i].forward);
    m.thread_scaling[i].backward = 0.5 * (a.thread_scaling[i].backward + b.thread_scaling[i].backward);
  }
  return m;
}

// CPU seconds this process, and the whole machine, have spent (Linux: /proc/stat; elsewhere the
// machine's figure is unknown: NaN, and no run is taken for a busy one).
struct CpuClock {
  double self_s = 0, machine_s = NAN;
  static CpuClock now() {
    CpuClock c;
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    c.self_s = double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
               1e-6 * double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec);
    std::ifstream stat("/proc/stat");
    std::string cpu;
    double user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
    if (stat >> cpu >> user >> nice >> system >> idle >> iowait >> irq >> softirq >> steal && cpu == "cpu") {
      c.machine_s = (user + nice + system + irq + softirq + steal) / double(sysconf(_SC_CLK_TCK));
    }
    return c;
  }
};

struct Case {
  const char* label;  // "ring", "zig-zag causal"
  LayoutKind layout;
  bool causal;
  int64_t ranks, seq;
};

// One case's figures: medians over the repetitions, and the median of the per-repetition ratios.
struct Outcome {
  Timing measured, predicted;
  Timing ratio;         // predicted / measured, per figure
  double others = NAN;  // share of the machine other processes took during the runs kept (median)
};

double field_median(const std::vector<Timing>& runs, double Timing::*field) {
  std::vector<double> values;
  for (const Timing& t : runs) values.push_back(t.*field);
  return median(values);
}

// `fixed`: predict every repetition from this calibration (--quick); else bracket each run.
// A repetition during which other processes took more of the machine than this is run again, up
// to kAttempts times; the quietest attempt is kept.
constexpr double kQuiet = 0.10;
constexpr int kAttempts = 3;

// One run measured and predicted, with the share of the machine other processes took meanwhile.
struct Attempt {
  Timing measured, predicted;
  double others = NAN;
};

// `fixed`: predict every repetition from this calibration (--quick); else bracket each run with
// calibrations (`before` is the latest one, and is updated).
bool run_case(const Case& c, int repeat, const CpuCalibration* fixed, int cores, Outcome& outcome) {
  PlanSpec spec;
  spec.ranks = c.ranks;
  spec.layout = c.layout;
  spec.causal = c.causal;
  spec.dims = {1, c.seq, 4, 4, 64};
  spec.backward = true;
  const Plan plan = build_plan(spec);
  const AttentionInputs<float> x = make_inputs(spec.dims, 5, true);
  Timing warm_up;
  if (!measure(plan, x, warm_up)) return false;  // page faults, thread stacks, the buffer pool
  std::vector<Timing> measured, predicted, ratios;
  std::vector<double> others;
  CpuCalibration before = fixed ? *fixed : calibrate_cpu(spec.dims.dim);
  for (int repetition = 0; repetition < repeat; ++repetition) {
    Attempt kept;
    for (int attempt = 0; attempt < (fixed ? 1 : kAttempts) && (attempt == 0 || kept.others > kQuiet); ++attempt) {
      Attempt a;
      const CpuClock start = CpuClock::now();
      const auto wall_start = std::chrono::steady_clock::now();
      if (!measure(plan, x, a.measured)) return false;
      const double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
      const CpuClock end = CpuClock::now();
      const double others_s = (end.machine_s - start.machine_s) - (end.self_s - start.self_s);
      a.others = std::clamp(others_s / (wall_s * cores), 0.0, 1.0);
      const CpuCalibration after = fixed ? *fixed : calibrate_cpu(spec.dims.dim);
      a.predicted = predict(plan, cpu_hardware(mean_calibration(before, after)));
      before = after;
      if (attempt == 0 || a.others < kept.others) kept = a;
    }
    const Timing& m = kept.measured;
    const Timing& p = kept.predicted;
    measured.push_back(m), predicted.push_back(p), others.push_back(kept.others);
    ratios.push_back(
        {p.forward_step_s / m.forward_step_s, p.backward_step_s / m.backward_step_s, p.total_s / m.total_s});
  }
  for (double Timing::*field : {&Timing::forward_step_s, &Timing::backward_step_s, &Timing::total_s}) {
    outcome.measured.*field = field_median(measured, field);
    outcome.predicted.*field = field_median(predicted, field);
    outcome.ratio.*field = field_median(ratios, field);
  }
  outcome.others = median(others);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  int repeat = 5;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--quick")) {
      quick = true;
    } else if (!std::strcmp(argv[i], "--repeat") && i + 1 < argc && std::atoi(argv[i + 1]) > 0) {
      repeat = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: bench_cpu_model [--quick] [--repeat N]\n");
      return 2;
    }
  }
  if (quick) repeat = 1;
  // Key blocks of whole kernel tiles (S/P = 2048, 1536, 1024, 768 rows) and steps of tens of
  // milliseconds, so that the simulator's fixed costs outside the plan stay small. P = 1 runs its
  // kernels on every core (max(1, cores/P) threads); P = 8 time-shares the cores on most machines.
  std::vector<Case> cases = {{"ring", LayoutKind::contiguous, false, 1, 2048},
                             {"ring", LayoutKind::contiguous, false, 2, 3072},
                             {"ring", LayoutKind::contiguous, false, 4, 4096},
                             {"ring", LayoutKind::contiguous, false, 8, 6144},
                             {"zig-zag causal", LayoutKind::zigzag, true, 4, 8192}};
  if (quick) {
    for (Case& c : cases) c.seq = 128 * c.ranks;
  }
  const CpuCalibration shown = calibrate_cpu(64);
  std::printf(
      "bench_cpu_model: the cpu preset vs the sim executor, fwd+bwd, B=1 H=4 D=64, %d cores, "
      "%d repetitions per case\n",
      shown.cores, repeat);
  std::printf(
      "calibration (one, for reference): forward %.2f / backward %.2f GFLOP/s per core unmasked, "
      "queue copy %.2f GB/s, took %.2f s\n",
      shown.forward_full_flops / 1e9, shown.backward_full_flops / 1e9, shown.copy_bandwidth_Bps / 1e9,
      shown.seconds_spent);
  std::printf(
      "error = model / measured - 1 (median over the repetitions); others = the share of the machine other\n"
      "processes took during the runs (median; a run above %.0f%% is run again, up to %d times)\n",
      100 * kQuiet, kAttempts);
  std::printf("%-16s %3s %6s | %-26s | %-26s | %-26s | %6s\n", "case", "P", "S", "forward step ms", "backward step ms",
              "total ms", "others");
  std::printf("%-16s %3s %6s | %8s %8s %8s | %8s %8s %8s | %8s %8s %8s | %6s\n", "", "", "", "measured", "model",
              "error", "measured", "model", "error", "measured", "model", "error", "");
  int missed = 0;
  for (const Case& c : cases) {
    Outcome o;
    if (!run_case(c, repeat, quick ? &shown : nullptr, shown.cores, o)) {
      std::printf("FAILED: the sim run of %s P=%lld did not verify\n", c.label, static_cast<long long>(c.ranks));
      return 1;
    }
    const double ef = o.ratio.forward_step_s - 1, eb = o.ratio.backward_step_s - 1, et = o.ratio.total_s - 1;
    std::printf("%-16s %3lld %6lld | %8.2f %8.2f %+7.1f%% | %8.2f %8.2f %+7.1f%% | %8.1f %8.1f %+7.1f%% | %5.0f%%\n",
                c.label, static_cast<long long>(c.ranks), static_cast<long long>(c.seq),
                o.measured.forward_step_s * 1e3, o.predicted.forward_step_s * 1e3, 100 * ef,
                o.measured.backward_step_s * 1e3, o.predicted.backward_step_s * 1e3, 100 * eb, o.measured.total_s * 1e3,
                o.predicted.total_s * 1e3, 100 * et, 100 * o.others);
    std::fflush(stdout);
    const struct {
      const char* what;
      double measured, predicted, error;
    } figures[] = {{"forward step", o.measured.forward_step_s, o.predicted.forward_step_s, ef},
                   {"backward step", o.measured.backward_step_s, o.predicted.backward_step_s, eb},
                   {"total", o.measured.total_s, o.predicted.total_s, et}};
    for (const auto& f : figures) {
      const bool met = std::fabs(f.error) < kTarget;
      missed += met ? 0 : 1;
      bench::report_row(
          "cost model",
          bench::format("cpu preset vs sim, %s P=%lld S=%lld fwd+bwd: %s", c.label, static_cast<long long>(c.ranks),
                        static_cast<long long>(c.seq), f.what),
          bench::format("%+.1f%% (model %.2f ms, sim %.2f ms)", 100 * f.error, f.predicted * 1e3, f.measured * 1e3),
          bench::format("within %.0f%%%s", 100 * kTarget, quick ? " (--quick: not judged)" : ""),
          quick ? "-" : bench::verdict(met));
    }
  }
  if (quick) {
    std::printf("QUICK: %zu figures printed (small sizes: not judged)\n", 3 * cases.size());
  } else {
    std::printf("%s: %zu figures, %d outside %.0f%%\n", missed ? "MISSED" : "OK", 3 * cases.size(), missed,
                100 * kTarget);
  }
  return 0;
}
