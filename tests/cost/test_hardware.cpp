// Hardware presets (every number with its source), the FlashAttention-3 figures they were built
// from coming back out of the model, machine files (JSON) with their errors, and the cpu preset's
// calibration and core sharing.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>

#include "executors/dry/dry_executor.hpp"
#include "reference/error.hpp"
#include "reference/formulas.hpp"
#include "sim/cost/cpu_calibration.hpp"

using namespace ringlab;
using nlohmann::json;

namespace {

// Effective TFLOP/s of one H100 on a single-rank attention: visible FLOPs / compute time.
double effective_tflops(bool causal, bool backward, int64_t head_dim) {
  PlanSpec spec;
  spec.ranks = 1;
  spec.dims = {1, 16384, 16, 16, head_dim};
  spec.causal = causal;
  spec.backward = backward;
  spec.element_bytes = 2;
  const Plan plan = build_plan(spec);
  const DryResult result = run_dry_plan(plan, hardware_preset("h100-nvlink", head_dim));
  const int64_t pairs = full_pairs(16384, causal);
  const double flops = backward ? backward_flops(pairs, spec.dims) : forward_flops(pairs, spec.dims);
  double seconds = 0;  // the pass's kernel time (one step at P = 1)
  for (const DryStep& s : result.steps)
    if ((plan.phases()[static_cast<size_t>(s.phase)].pass == Pass::backward) == backward) seconds += s.compute_max_s;
  return flops / seconds / 1e12;
}

std::string temp_file(const std::string& name, const std::string& content) {
  const std::string path = "/tmp/ringlab_cost_test_" + name;
  std::ofstream(path) << content;
  return path;
}

}  // namespace

TEST_CASE("every preset cites a source for its numbers", "[cost][hardware]") {
  for (const std::string name : {"h100-nvlink", "h100-ib", "h100-pcie"}) {
    const Hardware hw = hardware_preset(name, 128);
    INFO(name);
    CHECK(hw.name == name);
    CHECK(!hw.description.empty());
    CHECK(hw.element_bytes == 2);
    CHECK(hw.ranks_per_node == 8);
    CHECK(hw.sources.size() >= 8);
    for (const std::string& source : hw.sources) CHECK(source.find(": ") != std::string::npos);
    for (double e : {hw.device.forward_full_efficiency, hw.device.forward_masked_efficiency,
                     hw.device.backward_full_efficiency, hw.device.backward_masked_efficiency}) {
      CHECK(e > 0);
      CHECK(e <= 1);
    }
  }
  const Hardware nvlink = hardware_preset("h100-nvlink", 128);
  CHECK(nvlink.device.peak_flops == 989e12);
  CHECK(nvlink.intra_node.bandwidth_Bps == 375e9);
  CHECK(nvlink.inter_node.bandwidth_Bps == 50e9);
  CHECK(hardware_preset("h100-pcie", 128).intra_node.bandwidth_Bps < 64e9);
  const auto cites = [&](const char* text) {
    return std::any_of(nvlink.sources.begin(), nvlink.sources.end(),
                       [&](const std::string& s) { return s.find(text) != std::string::npos; });
  };
  CHECK(cites("375 GB/s"));
  CHECK(cites("989 TFLOP/s"));
  CHECK(cites("2407.08608"));
}

TEST_CASE("the H100 preset gives back the FlashAttention-3 figures it was built from", "[cost][hardware]") {
  // d128, 16K tokens: forward 648 non-causal, 616 causal; backward 561 non-causal; d64 forward 497.
  CHECK(effective_tflops(false, false, 128) == Approx(648).epsilon(0.01));
  CHECK(effective_tflops(true, false, 128) == Approx(616).epsilon(0.01));
  CHECK(effective_tflops(false, true, 128) == Approx(561).epsilon(0.01));
  CHECK(effective_tflops(false, false, 64) == Approx(497).epsilon(0.01));
  CHECK(masked_tile_efficiency(0.6552, 0.6229, 16384, 128) == Approx(0.171).epsilon(0.01));
}

TEST_CASE("unknown presets name the presets", "[cost][hardware]") {
  try {
    (void)load_hardware("dgx-9000");
    FAIL("no error");
  } catch (const UsageError& error) {
    const std::string message = error.what();
    for (const std::string& name : hardware_preset_names()) CHECK(message.find(name) != std::string::npos);
    CHECK(message.find('\n') == std::string::npos);
  }
}

TEST_CASE("machine files: a preset written as JSON reads back the same", "[cost][hardware][json]") {
  const Hardware ib = hardware_preset("h100-ib", 128);
  const Hardware back = hardware_from_json(to_json(ib), "ib.json", 128);
  CHECK(back.name == ib.name);
  CHECK(back.device.peak_flops == Approx(ib.device.peak_flops));
  CHECK(back.device.forward_masked_efficiency == Approx(ib.device.forward_masked_efficiency));
  CHECK(back.device.q_tile == ib.device.q_tile);
  CHECK(back.intra_node.bandwidth_Bps == Approx(ib.intra_node.bandwidth_Bps));
  CHECK(back.inter_node.latency_s == Approx(ib.inter_node.latency_s));
  CHECK(back.ranks_per_node == 8);
  CHECK(back.sources == ib.sources);
}

namespace {

// Every number of two JSON documents equal to within rounding (GB/s <-> bytes/s scales by 1e9).
void check_same_numbers(const json& a, const json& b, const std::string& at) {
  INFO(at);
  REQUIRE(a.type() == b.type());
  if (a.is_object()) {
    REQUIRE(a.size() == b.size());
    for (const auto& item : a.items()) {
      REQUIRE(b.contains(item.key()));
      check_same_numbers(item.value(), b.at(item.key()), at + "." + item.key());
    }
  } else if (a.is_array()) {
    REQUIRE(a.size() == b.size());
    for (size_t i = 0; i < a.size(); ++i) check_same_numbers(a[i], b[i], at + "[" + std::to_string(i) + "]");
  } else if (a.is_number_float()) {
    CHECK(b.get<double>() == Approx(a.get<double>()).epsilon(1e-14));
  } else {
    CHECK(a == b);
  }
}

}  // namespace

// What `--json` prints as "hardware" is a machine file: saved and passed to --hw, it costs every
// plan as the preset did. The cpu preset's fields (shared cores, first touch, thread scaling, host
// copy links) were once refused as unknown.
TEST_CASE("machine files: every preset's printed hardware loads back and costs the same", "[cost][hardware][json]") {
  for (const std::string& name : hardware_preset_names()) {
    INFO(name);
    const Hardware preset = hardware_preset(name, 64);
    const json printed = to_json(preset);
    const Hardware back = hardware_from_json(printed, name + ".json", 64);
    check_same_numbers(printed, to_json(back), name);
    for (Algorithm algo : {Algorithm::ring, Algorithm::ulysses}) {
      PlanSpec spec;
      spec.algo = algo;
      spec.layout = LayoutKind::zigzag;
      spec.ranks = 3;
      spec.dims = {1, 768, 6, 3, 64};
      spec.causal = true;
      spec.backward = true;
      spec.element_bytes = preset.element_bytes;
      const Plan plan = build_plan(spec);
      const DryResult want = run_dry_plan(plan, preset), got = run_dry_plan(plan, back);
      CHECK(got.makespan_s == Approx(want.makespan_s).epsilon(1e-12));
      CHECK(got.memory.peak_bytes == want.memory.peak_bytes);
    }
  }
  // The cpu fields' own mistakes.
  CHECK_THROWS_WITH(
      hardware_from_json(json::parse(R"({"base": "h100-ib", "device": {"thread_scaling": []}})"), "m.json"),
      Catch::Contains("thread_scaling without shared_cores"));
  CHECK_THROWS_WITH(
      hardware_from_json(json::parse(R"({"base": "h100-ib", "intra_node": {"verify_gb_per_s": 3}})"), "m.json"),
      Catch::Contains("verify_gb_per_s without host_copy"));
  CHECK_THROWS_WITH(
      hardware_from_json(
          json::parse(
              R"({"base": "h100-ib", "device": {"shared_cores": 2, "thread_scaling": [{"threads": 2}, {"threads": 2}]}})"),
          "m.json"),
      Catch::Contains("threads ascending"));
  CHECK_THROWS_WITH(hardware_from_json(json::parse(R"({"base": "h100-ib", "intra_node": {"host_copy": 1}})"), "m.json"),
                    Catch::Contains("host_copy is not true or false"));
}

TEST_CASE("machine files: a small description, a preset as base, and the file path form", "[cost][hardware][json]") {
  const json small = json::parse(R"({"name": "lab", "device": {"peak_tflops": 100, "efficiency": {"forward_full": 0.5}},
                                     "intra_node": {"bandwidth_gb_per_s": 20}, "ranks_per_node": 4})");
  const Hardware lab = hardware_from_json(small, "lab.json");
  CHECK(lab.device.peak_flops == 100e12);
  CHECK(lab.device.backward_masked_efficiency == 0.5);  // unset efficiencies follow forward_full
  CHECK(lab.inter_node.bandwidth_Bps == 20e9);          // no inter_node: the intra-node link
  CHECK(lab.ranks_per_node == 4);
  CHECK(lab.device.memory_bandwidth_Bps == 0);  // not modelled

  const json based = json::parse(R"({"base": "h100-ib", "inter_node": {"bandwidth_gb_per_s": 25}})");
  const Hardware slower = hardware_from_json(based, "slow.json", 128);
  CHECK(slower.inter_node.bandwidth_Bps == 25e9);
  CHECK(slower.intra_node.bandwidth_Bps == 375e9);
  CHECK(slower.device.peak_flops == 989e12);

  const std::string path = temp_file("lab.json", small.dump());
  CHECK(load_hardware(path).device.peak_flops == 100e12);
  std::remove(path.c_str());
}

TEST_CASE("machine files: mistakes get one line naming the field", "[cost][hardware][json]") {
  struct Bad {
    const char* text;
    const char* says;
  };
  const Bad bad = GENERATE(
      Bad{R"({"device": {"peak_tflops": 1, "efficency": {}}, "intra_node": {"bandwidth_gb_per_s": 1}})",
          "unknown field 'efficency'"},
      Bad{R"({"intra_node": {"bandwidth_gb_per_s": 1}})", "device.peak_tflops"},
      Bad{R"({"device": {"peak_tflops": 1, "efficiency": {"forward_full": 1.5}}, "intra_node": {"bandwidth_gb_per_s": 1}})",
          "forward_full"},
      Bad{R"({"base": "h100-ib", "intra_node": {"bandwidth_gb_per_s": -3}})", "bandwidth_gb_per_s"},
      Bad{R"({"base": "h100-ib", "device": {"tile": [128]}})", "tile"},
      Bad{R"({"base": "h100-ib", "element_bytes": 3})", "element_bytes"},
      Bad{R"({"base": "tpu"})", "unknown hardware preset 'tpu'"}, Bad{R"([1, 2])", "is not an object"},
      // Numbers JSON holds but no machine has: their times would print as inf or 300 digits.
      Bad{R"({"base": "h100-ib", "intra_node": {"bandwidth_gb_per_s": 1e-320}})", "from 1e-09 to 1e+09"},
      Bad{R"({"base": "h100-ib", "device": {"peak_tflops": 1e300}})", "peak_tflops = 1e+300 is out of range"},
      Bad{R"({"base": "h100-ib", "inter_node": {"latency_us": 1e306}})", "latency_us"},
      Bad{R"({"base": "h100-ib", "device": {"efficiency": {"backward_full": 1e-300}}})", "from 1e-09 to 1"});
  INFO(bad.text);
  try {
    (void)hardware_from_json(json::parse(bad.text), "m.json", 128);
    FAIL("no error");
  } catch (const UsageError& error) {
    const std::string message = error.what();
    CHECK(message.find(bad.says) != std::string::npos);
    CHECK(message.find('\n') == std::string::npos);
    CHECK(message.size() < 300);  // one readable line: the format itself is behind --help-hw
  }
  const std::string broken = temp_file("broken.json", "{\"name\": ");
  CHECK_THROWS_WITH(load_hardware(broken), Catch::Contains("not valid JSON") && Catch::Contains("--help-hw"));
  std::remove(broken.c_str());
  CHECK_THROWS_WITH(load_hardware("/nonexistent/machine.json"), Catch::Contains("cannot open"));
}

TEST_CASE("shared cores: P rank threads split the machine as the simulator does", "[cost][hardware]") {
  DeviceModel d;
  d.peak_flops = 10e9;
  d.shared_cores = 2;
  CHECK(d.rank_share(1) == 2);  // max(1, cores / P) threads, all busy
  CHECK(d.rank_share(2) == 1);
  CHECK(d.rank_share(4) == 0.5);  // four threads on two cores
  CHECK(d.rank_share(8) == 0.25);
  CHECK(d.rank_flops(false, MaskedWork::full, 4) == Approx(5e9));
  d.shared_cores = 0;  // a device per rank
  CHECK(d.rank_share(1024) == 1);
}

TEST_CASE("the cpu preset measures this machine", "[cost][hardware][cpu]") {
  const CpuCalibration c = calibrate_cpu(32);
  CHECK(c.cores >= 1);
  for (double rate : {c.forward_full_flops, c.forward_masked_flops, c.backward_full_flops, c.backward_masked_flops}) {
    CHECK(rate > 1e8);   // more than 0.1 GFLOP/s per core ...
    CHECK(rate < 1e12);  // ... and less than a TFLOP/s
  }
  CHECK(c.copy_bandwidth_Bps > 1e8);
  CHECK(c.message_latency_s > 0);
  CHECK(c.message_latency_s < 0.01);
  const Hardware hw = cpu_hardware(c);
  CHECK(hw.element_bytes == 4);
  CHECK(hw.device.shared_cores == c.cores);
  CHECK(hw.intra_node.host_copy);
  CHECK(hw.device.q_tile == 128);
  CHECK(hw.device.kv_tile == 256);
  CHECK(hw.sources.size() >= 10);
}
