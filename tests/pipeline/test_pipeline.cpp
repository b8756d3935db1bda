// The run pipeline (sim/pipeline/pipeline.hpp) driven by a fake executor whose behaviour each test
// picks: exact outputs pass (exit 0), wrong ones fail with the verification table (exit 1), a
// deadlock ends in one line (exit 3), bad output paths are refused before anything runs and leave
// no file; and what the contract asks of the pipeline — the executor's element size in the plan,
// its rounding of the inputs before the oracle, its tolerances, a diagnosis run only when it can,
// no report from a process that does not report, the executor's own report (the dry executor).
#include <unistd.h>
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "executors/dry/dry_executor.hpp"
#include "reference/error.hpp"
#include "reference/exact_attention.hpp"
#include "reference/npy.hpp"
#include "sim/pipeline/pipeline.hpp"
#include "sim/pipeline/tables.hpp"

using namespace ringlab;
namespace fs = std::filesystem;

namespace {

enum class Behaviour { exact, wrong, deadlock };

// An executor with no op semantics at all: it answers with exact attention of the inputs it is
// given (in float64, stored as float32), spoiled or failed as asked, and records what the pipeline
// asked of it.
class FakeExecutor final : public Executor {
 public:
  explicit FakeExecutor(Behaviour behaviour = Behaviour::exact) : behaviour_(behaviour) {}

  PipelineNeeds needs_for_test;  // what needs() answers
  bool round_inputs = false;     // prepare_inputs: q, k, v to multiples of 1/8 (a coarse "dtype")
  int executions = 0;
  std::vector<bool> diagnosed;  // per execute: were the diagnosis inputs given?
  std::vector<bool> progress;   // per execute: was a progress counter given?
  int64_t element_bytes_seen = 0;
  std::string dims_checked;  // check_sizes' last argument

  void check_sizes(const AttentionDims& dims) const override { dims_checked_ = dims.to_string(); }
  PipelineNeeds needs() const override { return needs_for_test; }
  void prepare_inputs(AttentionInputs<double>& inputs) const override {
    if (!round_inputs) return;
    for (Tensor<double>* t : {&inputs.q, &inputs.k, &inputs.v})
      for (int64_t i = 0; i < t->size(); ++i) (*t)[i] = std::round((*t)[i] * 8) / 8;
  }
  std::string label(const Plan& plan) const override {
    return "fake executor, " + std::to_string(plan.ranks()) + " ranks";
  }

  ExecutionResult execute(const Plan& plan, const AttentionInputs<float>& inputs,
                          const ExecuteOptions& options) override {
    ++executions;
    diagnosed.push_back(options.diagnose_inputs != nullptr && options.diagnose_reference != nullptr);
    progress.push_back(options.ops_done != nullptr);
    element_bytes_seen = plan.spec().element_bytes;
    ExecutionResult result;
    result.executor = label(plan);
    result.ranks.resize(static_cast<size_t>(plan.ranks()));
    result.time = {TimeKind::device, 0.0125};
    if (behaviour_ == Behaviour::deadlock) {
      result.failure =
          RunFailure{FailureKind::deadlock, "deadlock: rank 0 waits for rank 1, which waits for rank 0", 3};
      return result;
    }
    if (inputs.q.empty()) return result;  // given none: computes none
    const AttentionInputs<double> x = inputs.cast<double>();
    const MaskKind mask = plan.spec().causal ? MaskKind::causal : MaskKind::none;
    const AttentionOutput<double> forward = exact_attention(x.q, x.k, x.v, mask);
    result.outputs.out = forward.out.cast<float>();
    result.outputs.lse = forward.lse.cast<float>();
    if (plan.spec().backward) {
      const AttentionGrads<double> grads = exact_attention_backward(x.q, x.k, x.v, x.dout, mask);
      result.outputs.dq = grads.dq.cast<float>();
      result.outputs.dk = grads.dk.cast<float>();
      result.outputs.dv = grads.dv.cast<float>();
    }
    if (behaviour_ == Behaviour::wrong) result.outputs.out[5] += 1.0f;
    if (options.diagnose_inputs) {
      BlockError bad;
      bad.rank = 1, bad.step = 0, bad.q_block = 1, bad.kv_block = 0, bad.max_abs_error = 1, bad.ok = false;
      result.block_errors = {bad};
    }
    return result;
  }

  const std::string& checked() const { return dims_checked_; }

 private:
  Behaviour behaviour_;
  mutable std::string dims_checked_;
};

RunConfig small_config() {
  RunConfig config;
  config.ranks = 2;
  config.dims = {1, 64, 2, 0, 8};
  config.progress = false;
  return config;
}

// small_config with --trace DIR/t.json.
RunConfig traced_config(const fs::path& dir) {
  RunConfig config = small_config();
  config.trace_file = (dir / "t.json").string();
  return config;
}

struct Outcome {
  int status = -1;
  std::string out, err;
};

Outcome run(RunConfig config, Executor& executor, const PipelineOptions& options = {}) {
  std::ostringstream out, err;
  Outcome outcome;
  outcome.status = run_pipeline(config, executor, out, err, options);
  outcome.out = out.str();
  outcome.err = err.str();
  return outcome;
}

int lines(const std::string& text) { return static_cast<int>(std::count(text.begin(), text.end(), '\n')); }

// A fresh empty directory, removed at the end of the test.
struct TempDir {
  fs::path path =
      fs::temp_directory_path() / ("ringlab-run-" + std::to_string(::getpid()) + "-" + std::to_string(next()));
  TempDir() {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  static int next() {
    static int n = 0;  // only names temporary directories
    return n++;
  }
  // Every entry below the directory, as paths relative to it.
  std::vector<std::string> entries() const {
    std::vector<std::string> names;
    for (const auto& e : fs::recursive_directory_iterator(path)) names.push_back(fs::relative(e.path(), path).string());
    std::sort(names.begin(), names.end());
    return names;
  }
};

}  // namespace

TEST_CASE("pipeline: exact outputs verify, exit 0, with the report of ringlab run", "[run][pipeline]") {
  FakeExecutor fake;
  const Outcome o = run(small_config(), fake);
  INFO(o.out << o.err);
  CHECK(o.status == kExitVerified);
  CHECK_THAT(o.out, Catch::StartsWith("ringlab run | ring | contiguous(block=32) | P=2 | B=1 S=64 H=2 HKV=2 D=8"));
  CHECK_THAT(o.out,
             Catch::Contains(" rank  computed  skipped  masked      GFLOP   MB sent   MB recv    busy s  blocked s\n"));
  CHECK_THAT(o.out, Catch::Contains("verification: fake executor, 2 ranks vs exact attention (float64)"));
  CHECK_THAT(o.out, Catch::Contains("device time: 12.500 ms (CUDA events, first to last)\n\n"));
  CHECK_THAT(o.out, Catch::EndsWith("PASS: 2 of 2 tensors within tolerance\n"));
  CHECK(o.err.empty());
  CHECK(fake.executions == 1);
  CHECK(fake.checked() == "B=1 S=64 H=2 HKV=2 D=8");  // HKV filled in by validation before the size check
}

TEST_CASE("pipeline: wrong outputs exit 1 with the verification table and the diagnosis hint", "[run][pipeline]") {
  FakeExecutor fake(Behaviour::wrong);
  RunConfig config = small_config();
  config.backward = true;
  const Outcome o = run(config, fake);
  INFO(o.out);
  CHECK(o.status == kExitMismatch);
  CHECK_THAT(o.out, Catch::Contains("out    (1, 64, 2, 8)"));
  CHECK_THAT(o.out, Catch::Contains("FAIL\n"));
  CHECK_THAT(o.out, Catch::Contains("FAIL: 4 of 5 tensors within tolerance\n"));
  // This executor cannot diagnose: one run, and the pointer to the simulator's diagnosis.
  CHECK(fake.executions == 1);
  CHECK_THAT(o.out, Catch::EndsWith("(its diagnosis checks every block on its own)\n"));
}

TEST_CASE("pipeline: an executor that diagnoses runs again with the oracle and names the block", "[run][pipeline]") {
  FakeExecutor fake(Behaviour::wrong);
  fake.needs_for_test.diagnoses = true;
  const Outcome o = run(small_config(), fake);
  CHECK(o.status == kExitMismatch);
  REQUIRE(fake.executions == 2);
  CHECK(fake.diagnosed == std::vector<bool>{false, true});
  CHECK_THAT(o.out, Catch::Contains("diagnosis: where the result first goes wrong\n"));
  CHECK_THAT(o.out, Catch::Contains("  first wrong block: rank 1, step 0"));

  // A passing run is never diagnosed.
  FakeExecutor right;
  right.needs_for_test.diagnoses = true;
  CHECK(run(small_config(), right).status == kExitVerified);
  CHECK(right.executions == 1);
}

TEST_CASE("pipeline: a deadlock exits 3 with one line and no output", "[run][pipeline]") {
  FakeExecutor fake(Behaviour::deadlock);
  const Outcome o = run(small_config(), fake);
  CHECK(o.status == kExitCommFault);
  CHECK(o.out.empty());
  CHECK(lines(o.err) == 1);
  CHECK(o.err == "ringlab: deadlock: rank 0 waits for rank 1, which waits for rank 0\n");

  // --json: the same line, and one object saying what happened.
  RunConfig json = small_config();
  json.json = true;
  PipelineOptions gpu;
  gpu.tool = "ringlab-gpu";
  gpu.error_prefix = "ringlab-gpu (rank 0): ";
  const Outcome j = run(json, fake, gpu);
  CHECK(j.status == kExitCommFault);
  CHECK(j.err == "ringlab-gpu (rank 0): deadlock: rank 0 waits for rank 1, which waits for rank 0\n");
  const nlohmann::json summary = nlohmann::json::parse(j.out);
  CHECK(summary["status"] == "deadlock");
  CHECK(summary["exit_status"] == 3);
}

TEST_CASE("pipeline: bad --save and --trace paths are refused before anything runs, leaving no file",
          "[run][pipeline]") {
  TempDir dir;
  fs::create_directories(dir.path / "full");
  std::ofstream(dir.path / "full" / "keep.txt") << "already here\n";
  const std::vector<std::pair<std::string, std::string>> bad = {
      {(dir.path / "full").string(), ""},                                        // not empty
      {(dir.path / "no-dir" / "out").string(), ""},                              // parent missing
      {(dir.path / "new").string(), (dir.path / "no-dir" / "t.json").string()},  // trace's directory missing
  };
  for (const auto& [save, trace] : bad) {
    FakeExecutor fake;
    RunConfig config = small_config();
    config.save_dir = save;
    config.trace_file = trace;
    INFO("--save " << save << " --trace " << trace);
    CHECK_THROWS_AS(run(config, fake), UsageError);
    CHECK(fake.executions == 0);
  }
  // A run that deadlocks saves nothing either.
  FakeExecutor deadlocked(Behaviour::deadlock);
  RunConfig config = small_config();
  config.save_dir = (dir.path / "never").string();
  CHECK(run(config, deadlocked).status == kExitCommFault);
  CHECK(dir.entries() == std::vector<std::string>{"full", "full/keep.txt"});
}

TEST_CASE("pipeline: --save writes the outputs whole, in global order, and --trace the trace", "[run][pipeline]") {
  TempDir dir;
  FakeExecutor fake;
  RunConfig config = traced_config(dir.path);
  config.backward = true;
  config.save_dir = (dir.path / "out").string();
  CHECK(run(config, fake).status == kExitVerified);
  CHECK(dir.entries() == std::vector<std::string>{"out", "out/dk.npy", "out/dq.npy", "out/dv.npy", "out/lse.npy",
                                                  "out/out.npy", "t.json"});
  const NpyArray out = read_npy((dir.path / "out" / "out.npy").string());
  CHECK(out.values.shape() == Shape{1, 64, 2, 8});
}

TEST_CASE("pipeline: the executor's needs shape the plan, the oracle and the tolerances", "[run][pipeline]") {
  SECTION("element size on the wire") {
    FakeExecutor fake;
    fake.needs_for_test.element_bytes = 2;
    run(small_config(), fake);
    CHECK(fake.element_bytes_seen == 2);
  }
  SECTION("inputs rounded before the oracle: exact outputs of the rounded inputs pass") {
    FakeExecutor fake;
    fake.round_inputs = true;
    CHECK(run(small_config(), fake).status == kExitVerified);
  }
  SECTION("tolerances: a loose one accepts the wrong output, the default does not") {
    FakeExecutor strict(Behaviour::wrong);
    CHECK(run(small_config(), strict).status == kExitMismatch);
    FakeExecutor loose(Behaviour::wrong);
    loose.needs_for_test.tolerance = [](const std::string&) { return Tolerance{2.0, 0.0}; };
    CHECK(run(small_config(), loose).status == kExitVerified);
  }
  SECTION("a progress counter only for an executor that counts") {
    FakeExecutor quiet, counting;
    counting.needs_for_test.counts_progress = true;
    run(small_config(), quiet);
    run(small_config(), counting);
    CHECK(quiet.progress == std::vector<bool>{false});
    CHECK(counting.progress == std::vector<bool>{true});
  }
  SECTION("a process that does not report stays silent") {
    FakeExecutor fake(Behaviour::wrong);
    fake.needs_for_test.reports = false;
    const Outcome o = run(small_config(), fake);
    CHECK(o.status == kExitVerified);
    CHECK(o.out.empty());
    CHECK(o.err.empty());
  }
}

TEST_CASE("pipeline: --json is one object; the time's key says what it measures", "[run][pipeline]") {
  FakeExecutor fake;
  fake.needs_for_test.dtype = "bf16";
  RunConfig config = small_config();
  config.json = true;
  const Outcome o = run(config, fake);
  REQUIRE(o.status == kExitVerified);
  CHECK(lines(o.out) == 1);
  const nlohmann::json summary = nlohmann::json::parse(o.out);
  CHECK(summary["executor"] == "fake executor, 2 ranks");
  CHECK(summary["dtype"] == "bf16");
  CHECK(summary["device_ms"].get<double>() == Approx(12.5));
  CHECK_FALSE(summary.contains("wall_seconds"));
  CHECK(summary["verification"]["ok"] == true);
  CHECK(summary["ranks"].size() == 2);
}

TEST_CASE("pipeline: the erratum variants run, their checker findings in the report", "[run][pipeline]") {
  FakeExecutor fake;
  RunConfig config = small_config();
  config.ranks = 4;
  config.causal = true;
  config.backward = true;
  config.erratum = "reverse-dkv";
  const Outcome o = run(config, fake);
  CHECK(o.status == kExitVerified);  // the fake computes exact attention whatever the plan says
  CHECK_THAT(o.out, Catch::Contains("plan checker: this erratum variant is wrong by construction; it reports\n"));
  CHECK(fake.executions == 1);
}

TEST_CASE("pipeline: an executor without outputs or a report of its own: its work, nothing verified",
          "[run][pipeline]") {
  FakeExecutor fake(Behaviour::wrong);
  fake.needs_for_test.computes_outputs = false;
  RunConfig config = small_config();
  config.in_dir = "/nonexistent";  // never read: no inputs for an executor that computes nothing
  const Outcome o = run(config, fake);
  INFO(o.out);
  CHECK(o.status == kExitVerified);
  CHECK(fake.checked().empty());  // no sizes to check without inputs
  CHECK_THAT(o.out, Catch::Contains("executor: fake executor, 2 ranks\n"));
  CHECK_THAT(o.out, Catch::Contains(" rank  computed  skipped  masked"));
  CHECK_THAT(o.out, !Catch::Contains("verification"));
}

TEST_CASE("pipeline: the dry executor goes through it and prints its own report", "[run][pipeline][dry]") {
  TempDir dir;
  DryExecutor dry;
  RunConfig config = traced_config(dir.path);
  config.dry_run = true;
  const Outcome o = run(config, dry);
  INFO(o.out << o.err);
  CHECK(o.status == kExitVerified);
  CHECK_THAT(o.out, !Catch::Contains("verification"));
  CHECK(dry.detail().ranks.size() == 2);
  CHECK(fs::file_size(dir.path / "t.json") > 100);
  // Its flags: --inject is refused before anything is written.
  config.inject = {"drop@1:0"};
  config.trace_file = (dir.path / "u.json").string();
  CHECK_THROWS_AS(run(config, dry), UsageError);
  CHECK_FALSE(fs::exists(dir.path / "u.json"));
}

TEST_CASE("the load-balance lines: FLOPs from the plan as the headline, busy time explained when ranks share cores",
          "[run]") {
  std::vector<RankSummary> ranks(8);
  for (size_t r = 0; r < ranks.size(); ++r) {
    ranks[r].flops = 1e9;                                         // a balanced plan
    ranks[r].counters.compute_seconds = r == 0 ? 0.0016 : 0.001;  // but one thread waited for a core
  }
  const LoadImbalance imbalance = load_imbalance(ranks);
  CHECK(imbalance.flops_max_over_mean == Approx(1.0));
  CHECK(imbalance.busy_max_over_mean > 1.4);
  std::ostringstream shared, own, predicted;
  print_load_imbalance(shared, imbalance, 8, TimeKind::wall_clock, 2);
  CHECK(shared.str().rfind("load balance: max/mean FLOPs 1.000 (the plan's work per rank)\n", 0) == 0);
  CHECK(shared.str().find("8 ranks share 2 cores") != std::string::npos);
  print_load_imbalance(own, imbalance, 8, TimeKind::wall_clock, 8);
  CHECK(own.str().find("share") == std::string::npos);
  CHECK(own.str().find("(measured)") != std::string::npos);
  print_load_imbalance(predicted, imbalance, 8, TimeKind::predicted, 2);
  CHECK(predicted.str().find("(cost model)") != std::string::npos);
  CHECK(predicted.str().find("share") == std::string::npos);
}
