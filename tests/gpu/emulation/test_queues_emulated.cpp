// The hardware queues gpu-streams' streams get (gpu/device.hpp): CUDA_DEVICE_MAX_CONNECTIONS read
// as the driver reads it, asked for by the commands unless set, and named in the run's label and
// in one warning line where the 2 P streams of a run outnumber the queues. The CUDA runtime is
// mocked: what a device does with the queues is measured by the bundle's A/B, not here.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "gpu/device.hpp"
#include "tests/gpu/gpu_test_support.hpp"

namespace ringlab {
namespace {

// Sets (or unsets, with nullopt) the variable for one scope, and puts back what was there.
class QueuesVariable {
 public:
  explicit QueuesVariable(const std::optional<std::string>& value) {
    if (const char* before = std::getenv(gpu::kHardwareQueuesVariable)) before_ = before;
    set(value);
  }
  QueuesVariable(const QueuesVariable&) = delete;
  QueuesVariable& operator=(const QueuesVariable&) = delete;
  ~QueuesVariable() { set(before_); }

 private:
  static void set(const std::optional<std::string>& value) {
    if (value) {
      setenv(gpu::kHardwareQueuesVariable, value->c_str(), 1);
    } else {
      unsetenv(gpu::kHardwareQueuesVariable);
    }
  }
  std::optional<std::string> before_;
};

}  // namespace

TEST_CASE("hardware queues: CUDA_DEVICE_MAX_CONNECTIONS read, asked for unless set, sharing named",
          "[gpu][emulated][queues]") {
  {
    const QueuesVariable unset(std::nullopt);
    CHECK(gpu::hardware_queues() == 8);  // the driver's default
    CHECK(gpu::queue_sharing(16) == "16 streams share 8 hardware queues, CUDA_DEVICE_MAX_CONNECTIONS unset");
    gpu::request_hardware_queues();
    REQUIRE(std::getenv(gpu::kHardwareQueuesVariable) != nullptr);
    CHECK(std::string(std::getenv(gpu::kHardwareQueuesVariable)) == "32");
    CHECK(gpu::hardware_queues() == 32);
    CHECK(gpu::queue_sharing(32).empty());
    CHECK(gpu::queue_sharing(34) == "34 streams share 32 hardware queues, CUDA_DEVICE_MAX_CONNECTIONS=32");
  }
  {
    const QueuesVariable chosen("4");  // the user's choice stays
    gpu::request_hardware_queues();
    CHECK(std::string(std::getenv(gpu::kHardwareQueuesVariable)) == "4");
    CHECK(gpu::hardware_queues() == 4);
    CHECK(gpu::queue_sharing(4).empty());
    CHECK(gpu::queue_sharing(6) == "6 streams share 4 hardware queues, CUDA_DEVICE_MAX_CONNECTIONS=4");
  }
  for (const char* bad : {"0", "33", "-8", "eight", "8x", ""}) {
    const QueuesVariable value{std::string(bad)};
    INFO("CUDA_DEVICE_MAX_CONNECTIONS=" << bad);
    CHECK(gpu::hardware_queues() == -1);
    CHECK(gpu::queue_sharing(64).empty());  // no count to compare with: the command refuses it instead
  }
}

TEST_CASE("emulated gpu-streams: the label names the hardware queues its streams share, and only then",
          "[gpu][emulated][streams][queues]") {
  const PlanSpec spec = test::gpu_spec("ring", "contiguous", 6, false, false);  // 12 streams
  const Plan plan = build_plan(spec);
  gpu::GpuRunOptions options;
  options.dtype = gpu::Dtype::fp32;
  {
    const QueuesVariable few("8");
    gpu::StreamsRun run(plan, make_inputs(spec.dims, 1, false), options);
    const ExecutionResult result = run.run(true);
    CHECK_THAT(result.executor,
               Catch::EndsWith("; 12 streams share 8 hardware queues, CUDA_DEVICE_MAX_CONNECTIONS=8)"));
  }
  const QueuesVariable enough("32");
  CHECK_THAT(gpu::streams_label(plan, options), !Catch::Contains("hardware queues"));
}

TEST_CASE(
    "emulated ringlab-gpu run: one warning line where the streams share queues, a refusal where the "
    "variable is no count",
    "[gpu][emulated][cli][queues]") {
  const std::vector<std::string> six = {"run", "--ranks", "6",  "--seq",   "96",   "--heads",
                                        "2",   "--dim",   "64", "--dtype", "fp32", "--causal"};
  {
    const QueuesVariable few("8");
    const test::CliOutcome shared = test::run_gpu_cli(six);
    INFO(shared.out << shared.err);
    CHECK(shared.status == 0);  // still correct: a warning, not a failure
    CHECK(shared.err ==
          "ringlab-gpu: warning: 12 streams share 8 hardware queues, CUDA_DEVICE_MAX_CONNECTIONS=8: a rank's work can "
          "wait behind another's that it does not depend on, and the times come out longer; unset "
          "CUDA_DEVICE_MAX_CONNECTIONS (ringlab-gpu then asks for 32) or set it to 32\n");
    CHECK_THAT(shared.out, Catch::Contains("12 streams share 8 hardware queues"));
    // Three ranks, six streams: a queue each, no warning.
    std::vector<std::string> three = six;
    three[2] = "3";
    const test::CliOutcome own = test::run_gpu_cli(three);
    CHECK(own.status == 0);
    CHECK(own.err.empty());
  }
  {
    const QueuesVariable enough("32");
    const test::CliOutcome run = test::run_gpu_cli(six);
    CHECK(run.status == 0);
    CHECK(run.err.empty());
    CHECK_THAT(run.out, !Catch::Contains("hardware queues"));
  }
  {
    const QueuesVariable enough("32");
    const test::CliOutcome info = test::run_gpu_cli({"info"});
    CHECK_THAT(info.out, Catch::Contains("hardware queues per context: 32 (CUDA_DEVICE_MAX_CONNECTIONS; gpu-streams "
                                         "uses 2 per virtual rank, so up to 16 ranks get a queue per stream)\n"));
  }
  {
    const QueuesVariable bad("lots");
    const test::CliOutcome refused = test::run_gpu_cli(six);
    CHECK(refused.status == 2);
    CHECK(refused.out.empty());
    CHECK(refused.err ==
          "ringlab-gpu: error: CUDA_DEVICE_MAX_CONNECTIONS=lots is not a number of hardware queues the CUDA driver "
          "takes (1 to 32); unset it (ringlab-gpu then asks for 32) or set it in that range\n");
  }
}

}  // namespace ringlab
