// The cpu preset's model, structurally: what must hold whatever the machine measures. How close
// its figures come to the simulator's measured times is a benchmark's question, never a test's
// (bench/cost/bench_cpu_model, run by scripts/bench): a timing claim fails on a busy machine.
//
// The model tests use a fixed calibration (the figures of a 2-core machine, written out), so they
// are deterministic; one test measures this machine and checks only that the figures are sane.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>

#include "executors/dry/dry_executor.hpp"
#include "sim/cost/cpu_calibration.hpp"

using namespace ringlab;

namespace {

// A 2-core machine's calibration, as calibrate_cpu(64) measured one (rounded).
CpuCalibration two_core_machine() {
  CpuCalibration c;
  c.cores = 2;
  c.head_dim = 64;
  c.forward_full_flops = 45e9;
  c.forward_masked_flops = 39e9;
  c.backward_full_flops = 46e9;
  c.backward_masked_flops = 40e9;
  c.thread_scaling = {{2, 0.93, 0.95}};
  c.kernel_call_s = 2e-6;
  c.copy_bandwidth_Bps = 13e9;
  c.verify_bandwidth_Bps = 25e9;
  c.message_latency_s = 10e-6;
  c.memory_bandwidth_Bps = 30e9;
  c.first_touch_Bps = 1.5e9;
  return c;
}

struct Prediction {
  double forward_step_s = 0, backward_step_s = 0, total_s = 0;
  double steps_s = 0;  // every step's mean compute, summed
};

// The dry executor on the preset: the first forward and backward step's mean compute, the makespan.
Prediction predict(int64_t ranks, int64_t seq, LayoutKind layout = LayoutKind::contiguous, bool causal = false) {
  PlanSpec spec;
  spec.ranks = ranks;
  spec.layout = layout;
  spec.causal = causal;
  spec.dims = {1, seq, 4, 4, 64};
  spec.backward = true;
  const Plan plan = build_plan(spec);
  const DryResult dry = run_dry_plan(plan, cpu_hardware(two_core_machine()));
  Prediction p{0, 0, dry.makespan_s, 0};
  for (const DryStep& s : dry.steps) {
    p.steps_s += s.compute_mean_s;
    double& step =
        plan.phases()[static_cast<size_t>(s.phase)].pass == Pass::forward ? p.forward_step_s : p.backward_step_s;
    if (step == 0) step = s.compute_mean_s;
  }
  return p;
}

}  // namespace

TEST_CASE("cpu model: predictions are positive and finite, and a backward step costs more than a forward one",
          "[cost][cpu]") {
  struct Case {
    int64_t ranks, seq;
    LayoutKind layout;
    bool causal;
  };
  const Case c = GENERATE(Case{1, 2048, LayoutKind::contiguous, false}, Case{2, 3072, LayoutKind::contiguous, false},
                          Case{4, 4096, LayoutKind::contiguous, false}, Case{8, 6144, LayoutKind::contiguous, false},
                          Case{4, 8192, LayoutKind::zigzag, true});
  INFO("P=" << c.ranks << " S=" << c.seq << " " << layout_name(c.layout) << (c.causal ? " causal" : ""));
  const Prediction p = predict(c.ranks, c.seq, c.layout, c.causal);
  for (const double seconds : {p.forward_step_s, p.backward_step_s, p.total_s}) {
    CHECK(std::isfinite(seconds));
    CHECK(seconds > 0);
  }
  CHECK(p.forward_step_s < p.backward_step_s);
  // The run holds every step's compute, one after the other.
  CHECK(p.total_s >= p.steps_s);
}

TEST_CASE("cpu model: time grows with the sequence, steps shrink with more ranks", "[cost][cpu]") {
  SECTION("fixed P: a longer sequence takes longer, step by step and in total") {
    const Prediction shorter = predict(4, 2048), longer = predict(4, 4096);
    CHECK(longer.forward_step_s > shorter.forward_step_s);
    CHECK(longer.backward_step_s > shorter.backward_step_s);
    CHECK(longer.total_s > shorter.total_s);
  }
  SECTION("fixed S: each step's block shrinks as (S/P)^2 while a rank's share of the cores shrinks as 1/P") {
    double previous = INFINITY;
    for (const int64_t ranks : {1, 2, 4, 8}) {
      const double step = predict(ranks, 4096).forward_step_s;
      INFO("P=" << ranks);
      CHECK(step < previous);
      previous = step;
    }
  }
  SECTION("past the core count, the time-shared machine does the same work in about the same total") {
    // P = 4 and P = 8 on two cores: every step's work over the whole machine, plus the messages.
    const double four = predict(4, 4096).total_s, eight = predict(8, 4096).total_s;
    CHECK(eight == Approx(four).epsilon(0.1));
  }
}

TEST_CASE("cpu model: a kernel on several threads runs at the measured scaling, interpolated between thread counts",
          "[cost][cpu]") {
  DeviceModel d;
  d.peak_flops = 10e9;
  d.shared_cores = 16;
  d.thread_scaling = {{2, 0.9, 0.95}, {4, 0.8, 0.9}, {8, 0.7, 0.85}, {16, 0.6, 0.8}};
  CHECK(d.thread_efficiency(false, 16) == 1);           // one thread per rank: nothing to scale
  CHECK(d.thread_efficiency(false, 32) == 1);           // time-shared cores: one thread per rank
  CHECK(d.thread_efficiency(false, 8) == Approx(0.9));  // 2 threads: measured
  CHECK(d.thread_efficiency(true, 8) == Approx(0.95));
  CHECK(d.thread_efficiency(false, 1) == Approx(0.6));    // 16 threads: measured
  CHECK(d.thread_efficiency(false, 5) == Approx(0.85));   // 3 threads: halfway between 2 and 4
  CHECK(d.thread_efficiency(false, 3) == Approx(0.775));  // 5 threads: a quarter of the way from 4 to 8
  CHECK(d.thread_efficiency(false, 9) == Approx(1.0));    // 16 / 9 = 1 thread
  CHECK(d.rank_flops(false, MaskedWork::full, 4) == Approx(10e9 * 4 * 0.8));
  d.thread_scaling = {{2, 0.9, 0.95}};  // a 16-core machine measured only at 2 threads: the last point beyond
  CHECK(d.thread_efficiency(false, 1) == Approx(0.9));
  d.thread_scaling.clear();  // nothing measured: linear
  CHECK(d.rank_flops(false, MaskedWork::full, 4) == Approx(10e9 * 4));
}

TEST_CASE("cpu model: the preset carries the calibration, thread scaling included", "[cost][cpu]") {
  const Hardware hw = cpu_hardware(two_core_machine());
  REQUIRE(hw.device.thread_scaling.size() == 1);
  CHECK(hw.device.thread_scaling[0].threads == 2);
  CHECK(hw.device.thread_efficiency(false, 1) == Approx(0.93));
  CHECK(hw.device.thread_efficiency(true, 1) == Approx(0.95));
  CHECK(hw.device.rank_flops(false, MaskedWork::full, 1) == Approx(45e9 * 2 * 0.93));
  CHECK(hw.device.rank_flops(true, MaskedWork::masked, 8) == Approx(40e9 * 0.25));
  CHECK(hw.device.first_touch_Bps == 1.5e9);
  CHECK(hw.device.first_touch_seconds(3e9, 4) == Approx(4.0));  // half a core: two rank threads per core
  const nlohmann::json described = to_json(hw)["device"];       // what --json shows of the model
  CHECK(described["first_touch_gb_per_s"].get<double>() == Approx(1.5));
  REQUIRE(described["thread_scaling"].size() == 1);
  CHECK(described["thread_scaling"][0]["threads"] == 2);
  CHECK(described["thread_scaling"][0]["backward"].get<double>() == Approx(0.95));
  bool cited = false;
  for (const std::string& source : hw.sources) cited = cited || source.find("kernel on 2 threads") == 0;
  CHECK(cited);
}

TEST_CASE("cpu model: each rank writes its peak memory for the first time once, at the phases that raise it",
          "[cost][cpu]") {
  const int64_t ranks = GENERATE(2, 4, 8);
  PlanSpec spec;
  spec.ranks = ranks;
  spec.dims = {1, 1024 * ranks, 4, 4, 64};
  spec.backward = true;
  const Plan plan = build_plan(spec);
  Hardware hw = cpu_hardware(two_core_machine());
  const DryResult with = run_dry_plan(plan, hw);
  hw.device.first_touch_Bps = 0;  // not modelled
  const DryResult without = run_dry_plan(plan, hw);
  int64_t peak = 0;  // the memory model's peak, the inputs aside (they exist before the plan runs)
  for (const PhaseMemory& phase : with.memory.phases) {
    peak = std::max(peak, phase.total() - phase.bytes[static_cast<size_t>(MemoryCategory::inputs)]);
  }
  REQUIRE(peak > 0);
  // One thread of the rank writes it: a core's speed at most, a time-shared core's share beyond.
  const double seconds = double(peak) / (1.5e9 * std::min(1.0, 2.0 / double(ranks)));
  INFO("P=" << ranks);
  for (size_t r = 0; r < with.ranks.size(); ++r) {
    CHECK(with.ranks[r].other_s - without.ranks[r].other_s == Approx(seconds));
    CHECK(with.ranks[r].compute_s == without.ranks[r].compute_s);  // the steps' kernels do not pay it
  }
  CHECK(with.makespan_s - without.makespan_s == Approx(seconds));
}

TEST_CASE("cpu calibration: this machine's figures are sane (no claim on their size beyond that)", "[cost][cpu]") {
  const CpuCalibration c = calibrate_cpu(64);
  CHECK(c.cores >= 1);
  for (const double rate :
       {c.forward_full_flops, c.forward_masked_flops, c.backward_full_flops, c.backward_masked_flops,
        c.copy_bandwidth_Bps, c.verify_bandwidth_Bps, c.memory_bandwidth_Bps, c.first_touch_Bps}) {
    CHECK(std::isfinite(rate));
    CHECK(rate > 0);
  }
  CHECK(c.kernel_call_s > 0);
  CHECK(c.message_latency_s > 0);
  // One measurement per thread count the simulator uses at P = 1, 2, 4, ... below the core count.
  int64_t expected = 0;
  for (int t = c.cores; t >= 2; t /= 2) ++expected;
  REQUIRE(static_cast<int64_t>(c.thread_scaling.size()) == expected);
  for (size_t i = 0; i < c.thread_scaling.size(); ++i) {
    const ThreadScaling& s = c.thread_scaling[i];
    INFO("threads " << s.threads);
    CHECK(s.threads >= 2);
    CHECK(s.threads <= c.cores);
    if (i > 0) CHECK(s.threads > c.thread_scaling[i - 1].threads);
    for (const double efficiency : {s.forward, s.backward}) {
      CHECK(std::isfinite(efficiency));
      CHECK(efficiency > 0);
    }
  }
}
