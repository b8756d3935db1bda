// The `cpu` preset against the simulator it describes: for fwd+bwd ring runs at P in {2, 4, 8}
// with steps of tens of milliseconds, the model's per-step compute time (median over the forward
// steps, and over the backward steps) and its total time must be within 15% of what the sim
// executor measures.
//
// Robustness on a shared 2-core machine: the preset is calibrated in this process right before
// the runs (so a uniformly loaded machine is measured as loaded), every run is warmed up, the
// measured figures are medians over steps and ranks, and each P is repeated seven times, each
// repetition predicted from the mean of calibrations made just before and just after its run; the
// median of the seven predicted/measured ratios is what must lie within 15%. ctest runs this executable alone (RUN_SERIAL). A failure prints
// both figures.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "reference/inputs.hpp"
#include "sim/cost/cpu_calibration.hpp"
#include "sim/cost/dry_executor.hpp"
#include "sim/executor/sim_executor.hpp"

using namespace ringlab;

namespace {

double median(std::vector<double> values) {
  REQUIRE(!values.empty());
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

struct Timing {
  double forward_step_s = 0;   // median over forward steps (and ranks) of a step's attention compute
  double backward_step_s = 0;  // the same over backward steps
  double total_s = 0;          // the last rank's first op to the end of the run
};

// The sim executor, measured from its own trace.
Timing measure(const Plan& plan, const AttentionInputs<float>& x) {
  SimOptions options;
  options.world.trace = true;
  options.world.timeout_seconds = 120;
  const SimResult sim = run_sim(plan, x, options);
  REQUIRE(sim.report.ok());
  std::vector<double> forward, backward;
  std::vector<double> first(static_cast<size_t>(plan.ranks()), INFINITY), last(first.size(), 0);
  for (const TraceEvent& e : sim.report.trace) {
    if (e.lane == TraceLane::compute) (e.name == "attention fwd" ? forward : backward).push_back(e.duration_us * 1e-6);
    const size_t r = static_cast<size_t>(e.rank);
    first[r] = std::min(first[r], e.start_us), last[r] = std::max(last[r], e.start_us + e.duration_us);
  }
  // From the moment the last rank starts its first op to the end of the last op: the rank threads
  // start up to a scheduler slice or more apart (thread start-up is not part of the plan, and the
  // model starts every rank at 0); the ranks that started early only wait for the late one.
  const double all_started = *std::max_element(first.begin(), first.end());
  const double all_done = *std::max_element(last.begin(), last.end());
  return {median(forward), median(backward), (all_done - all_started) * 1e-6};
}

// The mean of two calibrations, rate by rate.
CpuCalibration mean_calibration(const CpuCalibration& a, const CpuCalibration& b) {
  CpuCalibration m = a;
  for (double CpuCalibration::*field :
       {&CpuCalibration::forward_full_flops, &CpuCalibration::forward_masked_flops,
        &CpuCalibration::backward_full_flops, &CpuCalibration::backward_masked_flops, &CpuCalibration::kernel_call_s,
        &CpuCalibration::copy_bandwidth_Bps, &CpuCalibration::verify_bandwidth_Bps, &CpuCalibration::message_latency_s,
        &CpuCalibration::memory_bandwidth_Bps}) {
    m.*field = 0.5 * (a.*field + b.*field);
  }
  return m;
}

Timing predict(const Plan& plan, const Hardware& hw) {
  const DryResult dry = run_dry_plan(plan, hw);
  std::vector<double> forward, backward;
  for (const DryStep& s : dry.steps) {
    (plan.phases()[static_cast<size_t>(s.phase)].pass == Pass::forward ? forward : backward).push_back(s.compute_mean_s);
  }
  return {median(forward), median(backward), dry.makespan_s};
}

}  // namespace

TEST_CASE("the cpu preset predicts the simulator's ring step and total times within 15%", "[cost][validation]") {
  // Sizes: every step computes (S/P)^2 H pairs at 4 D (forward) or 10 D (backward) FLOPs, and P
  // rank threads share the cores: steps of a few tens of milliseconds forward, ~2.5x backward.
  struct Case {
    int64_t P, S;
  };
  // Key blocks of whole kernel tiles (n = 1536, 1024, 768 rows), and runs long enough (0.5 to 2 s)
  // that the simulator's fixed costs outside the plan (rank threads starting a scheduler slice
  // apart, OpenMP regions in finalize and prepare-backward) stay a few percent.
  const Case c = GENERATE(Case{2, 3072}, Case{4, 4096}, Case{8, 6144});
  PlanSpec spec;
  spec.ranks = c.P;
  spec.dims = {1, c.S, 4, 4, 64};
  spec.backward = true;
  const Plan plan = build_plan(spec);
  const AttentionInputs<float> x = make_inputs(spec.dims, 5, true);

  constexpr int kRepetitions = 7;
  std::vector<Timing> measured, predicted;
  (void)measure(plan, x);  // warm-up: page faults, thread stacks, the buffer pool
  // Each run is bracketed by calibrations, and predicted from their mean: a machine that speeds up
  // or slows down steadily over the few seconds is measured as it was during the run.
  CpuCalibration before = calibrate_cpu(64);
  for (int repetition = 0; repetition < kRepetitions; ++repetition) {
    measured.push_back(measure(plan, x));
    const CpuCalibration after = calibrate_cpu(64);
    predicted.push_back(predict(plan, cpu_hardware(mean_calibration(before, after))));
    before = after;
  }
  // Each repetition's prediction against the run measured right after its calibration; the
  // median over repetitions of the figures and of their ratios (pairing cancels slow load drift).
  auto median_of = [](const std::vector<Timing>& runs, double Timing::*field) {
    std::vector<double> values;
    for (const Timing& t : runs) values.push_back(t.*field);
    return median(values) * 1e3;
  };
  auto ratio_of = [&](double Timing::*field) {
    std::vector<double> ratios;
    for (size_t i = 0; i < measured.size(); ++i) ratios.push_back(predicted[i].*field / (measured[i].*field));
    return median(ratios);
  };
  const double mf = median_of(measured, &Timing::forward_step_s), pf = median_of(predicted, &Timing::forward_step_s);
  const double mb = median_of(measured, &Timing::backward_step_s), pb = median_of(predicted, &Timing::backward_step_s);
  const double mt = median_of(measured, &Timing::total_s), pt = median_of(predicted, &Timing::total_s);
  const double rf = ratio_of(&Timing::forward_step_s), rb = ratio_of(&Timing::backward_step_s);
  const double rt = ratio_of(&Timing::total_s);
  char text[400];
  std::snprintf(text, sizeof text,
                "P=%lld S=%lld fwd+bwd: forward step measured %.2f ms, predicted %.2f ms (%+.1f%%); backward step "
                "measured %.2f ms, predicted %.2f ms (%+.1f%%); total measured %.2f ms, predicted %.2f ms (%+.1f%%)",
                static_cast<long long>(c.P), static_cast<long long>(c.S), mf, pf, 100 * (rf - 1), mb, pb,
                100 * (rb - 1), mt, pt, 100 * (rt - 1));
  INFO(text);
  WARN(text);
  CHECK(mf > 10);  // the sizes give steps of tens of milliseconds
  CHECK(std::fabs(rf - 1) <= 0.15);
  CHECK(std::fabs(rb - 1) <= 0.15);
  CHECK(std::fabs(rt - 1) <= 0.15);
}
