// The `ringlab run` and `ringlab plan` command-line contract, end to end through the
// built binary: tables and JSON, --save / --in round trips (and NumPy interop), traces, fault
// injection and the errata's exit statuses. Bad inputs: test_bad_inputs.cpp.
#include <unistd.h>
#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>

#include "reference/compare.hpp"
#include "reference/exact_attention.hpp"
#include "reference/inputs.hpp"
#include "reference/npy.hpp"
#include "sim/pipeline/trace.hpp"
#include "tests/cli/run_binary.hpp"

using namespace ringlab;
using ringlab::test::run_binary;
namespace fs = std::filesystem;

namespace {

const std::string kRinglab = RINGLAB_BINARY;

// A fresh empty directory, removed at the end of the test.
struct TempDir {
  fs::path path;
  TempDir() {
    path =
        fs::temp_directory_path() / ("ringlab-cli-" + std::to_string(::getpid()) + "-" + std::to_string(counter()++));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  std::string operator/(const std::string& name) const { return (path / name).string(); }
  static int& counter() {
    static int n = 0;  // only names temporary directories
    return n;
  }
};

void write_inputs(const TempDir& dir, const AttentionDims& dims, bool with_dout = false) {
  const AttentionInputs<double> x = make_inputs(dims, 4, with_dout).cast<double>();
  write_npy(dir / "q.npy", x.q);
  write_npy(dir / "k.npy", x.k);
  write_npy(dir / "v.npy", x.v);
  if (with_dout) write_npy(dir / "dout.npy", x.dout);
}

bool has_python_numpy() { return std::system("/usr/bin/python3 -c 'import numpy' > /dev/null 2>&1") == 0; }

}  // namespace

TEST_CASE("ringlab run prints the per-rank, verification and footer tables and passes", "[cli]") {
  const auto run = run_binary(kRinglab, {"run", "--no-progress"});
  INFO(run.out << run.err);
  REQUIRE(run.status == 0);
  // The table formats are relied on by users' scripts: pin the header lines.
  CHECK(run.out.find(" rank  computed  skipped  masked      GFLOP   MB sent   MB recv    busy s  blocked s\n") !=
        std::string::npos);
  CHECK(run.out.find("tensor shape                max_abs_err max_rel_err   tol_abs   tol_rel tol_used  result\n") !=
        std::string::npos);
  CHECK(run.out.find("out    (1, 1024, 4, 64)") != std::string::npos);
  CHECK(run.out.find("PASS: 2 of 2 tensors within tolerance\n") != std::string::npos);
  CHECK(run.out.find("load balance: max/mean FLOPs 1.000 (the plan's work per rank)\n") != std::string::npos);
  CHECK(run.out.find("busy time: max/mean ") != std::string::npos);
  CHECK(run.err.empty());
}

TEST_CASE("a lone --heads means HKV = H (no GQA unless asked)", "[cli]") {
  const auto run = run_binary(kRinglab, {"run", "--json", "--ranks", "2", "--seq", "64", "--heads", "6"});
  REQUIRE(run.status == 0);
  CHECK(nlohmann::json::parse(run.out)["config"].get<std::string>().find("H=6 HKV=6") != std::string::npos);
}

TEST_CASE("a problem the simulator cannot finish is refused at once, pointing to --dry-run; a large one runs",
          "[cli][bad-input]") {
  const auto started = std::chrono::steady_clock::now();
  const auto refused = run_binary(kRinglab, {"run", "--no-progress", "--ranks", "100000", "--seq", "64"}, 60);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  INFO(refused.err << " (" << seconds << " s)");
  CHECK(refused.status == 2);
  REQUIRE(refused.err_lines().size() == 1);
  CHECK_THAT(refused.err, Catch::Contains("cannot finish P=100000") && Catch::Contains("GB of memory") &&
                              Catch::Contains("ringlab run --dry-run costs it"));
  CHECK(refused.out.empty());
  CHECK(seconds < 10);
  // Not every large P is refused: 256 ranks (a thread each, 65,536 block computations) run and verify.
  const auto large = run_binary(kRinglab, {"run", "--no-progress", "--ranks", "256", "--seq", "256"});
  INFO(large.err);
  CHECK(large.status == 0);
}

TEST_CASE("ringlab run --json is one object with the verification", "[cli]") {
  const auto run = run_binary(
      kRinglab, {"run", "--json", "--ranks", "3", "--seq", "96", "--causal", "--backward", "--layout", "zigzag"});
  REQUIRE(run.status == 0);
  const nlohmann::json summary = nlohmann::json::parse(run.out);
  CHECK(summary["exit_status"] == 0);
  CHECK(summary["verification"]["ok"] == true);
  CHECK(summary["verification"]["checks"].size() == 5);
  CHECK(summary["ranks"].size() == 3);
  CHECK(summary["plan_check"]["ok"] == true);
  CHECK(summary["load_imbalance"]["flops_max_over_mean"].get<double>() <= 1.02);
}

TEST_CASE("saving writes outputs in global order and --in reads float64 inputs", "[cli]") {
  TempDir dir;
  const AttentionDims dims{2, 120, 4, 2, 8};
  write_inputs(dir, dims, true);
  const auto run = run_binary(kRinglab, {"run", "--in", dir.path.string(), "--save", dir / "out", "--ranks", "4",
                                         "--layout", "striped", "--causal", "--backward", "--no-progress"});
  INFO(run.out << run.err);
  REQUIRE(run.status == 0);
  for (const char* name : {"out.npy", "lse.npy", "dq.npy", "dk.npy", "dv.npy"})
    CHECK(fs::exists(dir / ("out/" + std::string(name))));
  const NpyArray out = read_npy(dir / "out/out.npy"), lse = read_npy(dir / "out/lse.npy"),
                 dk = read_npy(dir / "out/dk.npy");
  CHECK(out.descr == "<f4");
  CHECK(out.values.shape() == dims.q_shape());
  CHECK(lse.values.shape() == dims.lse_shape());
  CHECK(dk.values.shape() == dims.kv_shape());
  // The saved out is exact attention of the files' inputs, in global token order.
  const NpyArray q = read_npy(dir / "q.npy"), k = read_npy(dir / "k.npy"), v = read_npy(dir / "v.npy");
  const AttentionOutput<double> exact = exact_attention(q.values, k.values, v.values, MaskKind::causal);
  CHECK(compare(out.values.cast<float>(), exact.out, fp32_tolerance("out")).ok);
  CHECK(compare(lse.values.cast<float>(), exact.lse, fp32_tolerance("lse")).ok);
  // Nothing else was left in the directory: no staging leftovers.
  int entries = 0;
  for (const auto& entry : fs::directory_iterator(dir.path))
    entries += entry.path().filename().string().find("partial") == std::string::npos;
  CHECK(entries == 5);  // q, k, v, dout, out/
}

TEST_CASE("a trailing slash on --save DIR/ names DIR, and --seed goes wherever --docs does", "[cli]") {
  TempDir dir;
  const auto run = run_binary(kRinglab, {"run", "--save", dir / "out/", "--no-progress"});
  INFO(run.out << run.err);
  CHECK(run.status == 0);
  CHECK(fs::exists(dir / "out/out.npy"));
  for (const auto& entry : fs::recursive_directory_iterator(dir.path))
    CHECK(entry.path().filename().string().find("partial") == std::string::npos);
  // --docs random:N draws its lengths from --seed: plan, compare and figure take it as run does.
  const std::vector<std::string> docs{"--causal", "--layout", "zigzag", "--seq", "4096", "--docs", "random:6"};
  auto with = [&](std::vector<std::string> args, const char* seed) {
    args.insert(args.end(), docs.begin(), docs.end());
    args.insert(args.end(), {"--seed", seed});
    return run_binary(kRinglab, args);
  };
  const auto one = with({"plan"}, "1"), two = with({"plan"}, "2");
  CHECK(one.status == 0);
  CHECK(two.status == 0);
  CHECK(one.out.substr(0, one.out.find('\n')) != two.out.substr(0, two.out.find('\n')));  // other lengths
  CHECK(with({"compare"}, "2").status == 0);
  CHECK(with({"figure", "grid-step", "--out", dir / "grid.svg"}, "2").status == 0);
  CHECK(with({"run", "--dry-run"}, "2").status == 0);
}

TEST_CASE("NumPy writes the inputs and checks ringlab's outputs", "[cli][numpy]") {
  if (!has_python_numpy()) {
    WARN("skipped: /usr/bin/python3 with numpy is not installed (scripts/setup installs python3-numpy)");
    return;
  }
  TempDir dir;
  const std::string script = std::string(RINGLAB_TEST_DIR) + "/numpy_interop.py";
  REQUIRE(std::system(("/usr/bin/python3 " + script + " write " + dir.path.string()).c_str()) == 0);
  const auto run =
      run_binary(kRinglab, {"run", "--in", dir.path.string(), "--save", dir / "out", "--algo", "hybrid", "--ulysses",
                            "2", "--ranks", "4", "--layout", "zigzag", "--causal", "--no-progress"});
  INFO(run.out << run.err);
  REQUIRE(run.status == 0);
  CHECK(std::system(("/usr/bin/python3 " + script + " check " + dir.path.string()).c_str()) == 0);
}

TEST_CASE("tracing writes a Chrome trace that reads back", "[cli]") {
  TempDir dir;
  const auto run =
      run_binary(kRinglab, {"run", "--ranks", "4", "--seq", "256", "--trace", dir / "t.json", "--no-progress"});
  REQUIRE(run.status == 0);
  const std::vector<TraceEvent> events = read_chrome_trace(dir / "t.json");
  int compute = 0;
  std::set<int> ranks;
  for (const TraceEvent& e : events) {
    ranks.insert(e.rank);
    if (e.lane == TraceLane::compute && e.q_block >= 0) ++compute;
  }
  CHECK(ranks == std::set<int>{0, 1, 2, 3});
  CHECK(compute == 16);  // 4 ranks x 4 ring steps
  // The trace names its run, for a viewer to show that schedule.
  const TraceFile file = read_trace_file(dir / "t.json");
  REQUIRE(file.run);
  CHECK(file.run->tool == "ringlab run");
  CHECK(file.run->spec.ranks == 4);
  CHECK(file.run->spec.dims.seq == 256);
  CHECK(file.run->executor.rfind("sim executor, 4 ranks", 0) == 0);
  // Documents padded for the layout read back as they ran: the padding is in the trace, and the
  // spec read back describes itself as the writer described it.
  const auto padded = run_binary(kRinglab, {"run", "--ranks", "4", "--seq", "256", "--layout", "zigzag", "--docs",
                                            "100,156", "--causal", "--trace", dir / "p.json", "--no-progress"});
  REQUIRE(padded.status == 0);
  const TraceFile back = read_trace_file(dir / "p.json");
  REQUIRE(back.run);
  CHECK(back.run->spec.document_padding == std::vector<int64_t>{4, 4});
  CHECK(back.run->spec.tokens() == 256);
  std::ifstream text(dir / "p.json");
  const nlohmann::json written = nlohmann::json::parse(text);
  CHECK(written["otherData"]["ringlab"]["describe"] == back.run->spec.describe());
}

TEST_CASE(
    "fault injection: drop deadlocks (exit 3), corrupt is detected (exit 3), delay still verifies, alter fails "
    "verification (exit 1); the silent ones are said",
    "[cli]") {
  const std::vector<std::string> base{"run", "--ranks", "4", "--seq", "256", "--no-progress", "--timeout", "5"};
  auto with = [&](const std::string& fault) {
    std::vector<std::string> args = base;
    args.insert(args.end(), {"--inject", fault});
    return run_binary(kRinglab, args, 60);
  };
  const auto drop = with("drop@1:1");
  INFO(drop.err);
  CHECK(drop.status == 3);
  CHECK(drop.err.find("deadlock") != std::string::npos);
  CHECK(drop.err.find("rank 2") != std::string::npos);  // rank 1's step-1 message was for rank 2
  const auto corrupt = with("corrupt@2:0");
  CHECK(corrupt.status == 3);
  const auto duplicate = with("duplicate@0:1");
  CHECK(duplicate.status == 3);
  const auto delay = with("delay@3:2");
  CHECK(delay.status == 0);
  CHECK(delay.out.find("injected fault delay@3:2: delayed message") != std::string::npos);
  // Silent corruption: no receiver can tell, the oracle can; the run says what was altered.
  const auto alter = with("alter@1:0");
  INFO(alter.out);
  CHECK(alter.status == 1);
  CHECK(alter.out.find("injected fault alter@1:0: negated every value of message #1 from rank 1 to rank 2") !=
        std::string::npos);
  CHECK(alter.out.find("FAIL") != std::string::npos);
  CHECK(alter.out.find("the error is in how results travel or merge") != std::string::npos);
}

TEST_CASE("low precision: bf16 passes against its P=1 errors; rounding the accumulators grows the error",
          "[cli][precision]") {
  auto run = [](const std::string& accumulate) {
    // 8 ranks, 8 hops of dK/dV: the kernel's own rounding of P and dS (the same at every P) is part
    // of every error, so the accumulators' rounding needs more hops to show clearly (at 4 ranks
    // dk's RMS error grew 1.24x with storage accumulation, at 8 ranks 1.57x).
    const auto result = run_binary(kRinglab, {"run", "--json", "--ranks", "8", "--seq", "256", "--causal", "--backward",
                                              "--precision", "bf16", "--accumulate", accumulate});
    INFO(result.err);
    REQUIRE(result.status == 0);
    return nlohmann::json::parse(result.out);
  };
  const nlohmann::json fp32 = run("fp32"), storage = run("storage");
  CHECK(fp32["dtype"] == "bf16");
  CHECK(fp32["verification"]["single_rank_executor"] == "sim executor, 1 rank (bf16, accumulate fp32)");
  for (size_t i = 0; i < 5; ++i) {
    const nlohmann::json &a = fp32["verification"]["checks"][i], &b = storage["verification"]["checks"][i];
    INFO(a["tensor"]);
    // One rank has one step: nothing to accumulate, the same error either way.
    CHECK(a["single_rank_rms_error"] == b["single_rank_rms_error"]);
    CHECK(a["rms_error"].get<double>() > 0);
    CHECK(a["rms_error"].get<double>() < 1.5 * a["single_rank_rms_error"].get<double>());
  }
  // dK/dV travel P steps: rounded after every hop they lose more than kept in fp32.
  const nlohmann::json &dk32 = fp32["verification"]["checks"][3], &dk16 = storage["verification"]["checks"][3];
  REQUIRE(dk32["tensor"] == "dk");
  CHECK(dk16["rms_error"].get<double>() > 1.3 * dk32["rms_error"].get<double>());

  const auto text = run_binary(kRinglab, {"run", "--no-progress", "--ranks", "2", "--seq", "128", "--precision", "fp16",
                                          "--merge", "logsigmoid"});
  CHECK(text.status == 0);
  CHECK_THAT(text.out, Catch::Contains("P=1 columns: the same problem on sim executor, 1 rank (fp16, accumulate fp32, "
                                       "logsigmoid merge)") &&
                           Catch::Contains("max/P=1"));
  const auto note =
      run_binary(kRinglab, {"run", "--no-progress", "--ranks", "2", "--seq", "64", "--accumulate", "storage"});
  CHECK(note.status == 0);
  CHECK(note.err ==
        "ringlab: note: --accumulate storage changes nothing with --precision fp32 (the storage "
        "precision is fp32 already)\n");
}

TEST_CASE("ringlab figure precision draws the study's ratios", "[cli][precision]") {
  TempDir dir;
  const std::vector<std::string> problem = {"--causal", "--layout", "zigzag", "--seq", "256",
                                            "--heads",  "2",        "--dim",  "32"};
  std::vector<std::string> figure = {"figure", "precision", "--ranks", "4", "--out", dir / "p.svg"};
  figure.insert(figure.end(), problem.begin(), problem.end());
  const auto run = run_binary(kRinglab, figure);
  INFO(run.err);
  REQUIRE(run.status == 0);
  std::ifstream in(dir / "p.svg");
  const std::string svg((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> study = {"study", "precision", "--json", "--ranks", "1,2,4"};
  study.insert(study.end(), problem.begin(), problem.end());
  const nlohmann::json rows = nlohmann::json::parse(run_binary(kRinglab, study).out)["rows"];
  int points = 0;
  for (const auto& row : rows) {
    if (row["tensor"] == "lse") continue;  // fp32 in both: not drawn
    char ratio[32];
    std::snprintf(ratio, sizeof ratio, "%.4g", row["rms_ratio"].get<double>());
    const std::string point = "data-series=\"" + row["tensor"].get<std::string>() + ", accumulate " +
                              row["accumulate"].get<std::string>() + "\" data-ranks=\"" +
                              std::to_string(row["ranks"].get<int>()) + "\" data-ratio=\"" + ratio + "\"";
    INFO(point);
    CHECK(svg.find(point) != std::string::npos);
    ++points;
  }
  CHECK(points == 3 * 3 * 4);  // P = 1, 2, 4; fp32, storage, fused; out, dq, dk, dv
}

TEST_CASE("low precision: an fp16 overflow inside the run exits 1 naming the tensor and the element",
          "[cli][precision]") {
  // Causal attention with a large dout: key 0's dV sums dout over every query that sees it,
  // 30000 x (1 + 1/2 + ... + 1/16) on rank 0 alone, beyond fp16's 65504.
  TempDir dir;
  AttentionInputs<double> x = make_inputs({1, 64, 2, 2, 8}, 3, true).cast<double>();
  for (int64_t i = 0; i < x.q.size(); ++i) x.q[i] = 0;  // uniform attention over the keys seen
  for (int64_t i = 0; i < x.dout.size(); ++i) x.dout[i] = 30000;
  for (const char* name : {"q", "k", "v", "dout"}) {
    const Tensor<double>& t = name[0] == 'q' ? x.q : name[0] == 'k' ? x.k : name[0] == 'v' ? x.v : x.dout;
    write_npy(dir / (std::string(name) + ".npy"), t);
  }
  const auto run = run_binary(kRinglab, {"run", "--no-progress", "--in", dir.path.string(), "--ranks", "4", "--causal",
                                         "--backward", "--precision", "fp16"});
  INFO(run.err);
  CHECK(run.status == 1);
  REQUIRE(run.err_lines().size() == 1);
  CHECK_THAT(run.err, Catch::Contains("fp16 overflow: dv (a step's partial)(0, 0, ") && Catch::Contains("65504"));
  CHECK(run.out.empty());
  // bf16 has float32's range: the same inputs run to the verification (whose tolerances are for
  // values of order 1, so it may well fail it: exit 0 or 1, but no overflow).
  const auto bf16 = run_binary(kRinglab, {"run", "--no-progress", "--in", dir.path.string(), "--ranks", "4", "--causal",
                                          "--backward", "--precision", "bf16"});
  CHECK((bf16.status == 0 || bf16.status == 1));
  CHECK(bf16.err.find("overflow") == std::string::npos);
  CHECK_THAT(bf16.out, Catch::Contains("verification: sim executor, 4 ranks (bf16, accumulate fp32)"));
}

TEST_CASE("the errata: exit 1 with a diagnosis at P >= 3, and reverse-dkv passes at P = 2", "[cli][errata]") {
  const auto reverse4 = run_binary(kRinglab, {"run", "--ranks", "4", "--seq", "256", "--causal", "--backward",
                                              "--erratum", "reverse-dkv", "--no-progress"});
  CHECK(reverse4.status == 1);
  CHECK(reverse4.out.find("adds dK/dV of block") != std::string::npos);
  CHECK(reverse4.out.find("every block is right on its own") != std::string::npos);
  const auto reverse2 = run_binary(kRinglab, {"run", "--ranks", "2", "--seq", "256", "--causal", "--backward",
                                              "--erratum", "reverse-dkv", "--no-progress"});
  CHECK(reverse2.status == 0);
  const auto mask = run_binary(
      kRinglab, {"run", "--ranks", "3", "--seq", "192", "--causal", "--erratum", "kv-offset-mask", "--no-progress"});
  CHECK(mask.status == 1);
  CHECK(mask.out.find("first wrong block: rank 0, step 0") != std::string::npos);  // its own block, unmasked
}

TEST_CASE("ringlab plan prints the grid and checks the plan", "[cli]") {
  const auto plan = run_binary(kRinglab, {"plan", "--ranks", "4", "--seq", "64", "--layout", "zigzag", "--causal"});
  REQUIRE(plan.status == 0);
  CHECK(plan.out.find("    1 | b3 q-half kv>1") != std::string::npos);
  CHECK(plan.out.find("OK: the plan is well formed") != std::string::npos);
  const auto erratum = run_binary(
      kRinglab, {"plan", "--ranks", "3", "--seq", "48", "--causal", "--backward", "--erratum", "reverse-dkv"});
  CHECK(erratum.status == 1);
  CHECK(erratum.out.find("FOUND PROBLEMS") != std::string::npos);
}

TEST_CASE("ringlab plan's balance lint: a warning above --max-imbalance, exit 1 with --strict", "[cli][mask]") {
  auto plan = [](std::vector<std::string> extra) {
    std::vector<std::string> args{"plan", "--ranks", "4", "--seq", "4096", "--causal"};
    args.insert(args.end(), extra.begin(), extra.end());
    return run_binary(kRinglab, args);
  };
  // Contiguous causal, P=4: rank 3 computes three full blocks and its diagonal (3.5 blocks' worth)
  // against a mean of 2 blocks: 1.75 (to three digits; a diagonal holds n(n+1)/2 pairs).
  const auto loose = plan({});
  CHECK(loose.status == 0);
  CHECK(loose.out.find("warning: max/mean FLOPs 1.750 is above --max-imbalance 1.10: rank 3") != std::string::npos);
  CHECK(loose.out.find("--layout zigzag shares it") != std::string::npos);
  CHECK(plan({"--strict"}).status == 1);
  CHECK(plan({"--strict", "--max-imbalance", "1.8"}).status == 0);  // under a looser threshold: no warning
  CHECK(plan({"--strict", "--max-imbalance", "1.8"}).out.find("warning") == std::string::npos);
  const auto zigzag = plan({"--strict", "--layout", "zigzag"});
  CHECK(zigzag.status == 0);
  CHECK(zigzag.out.find("warning") == std::string::npos);
  const auto documents = plan({"--docs", "256,256,192,256,1280,448,960,448"});
  CHECK(documents.out.find("--layout zigzag (per document) or balanced share it") != std::string::npos);
  CHECK(plan({"--docs", "256,256,192,256,1280,448,960,448", "--layout", "balanced", "--strict"}).status == 0);
}

TEST_CASE("uneven shapes run on every algorithm and layout: padded, verified, outputs exactly (B, S, H, D)",
          "[cli][uneven]") {
  const std::string algo = GENERATE("ring", "allgather", "ulysses", "hybrid");
  const std::string layout = GENERATE("contiguous", "zigzag", "striped", "balanced");
  const int64_t P = GENERATE(3, 4);
  const int64_t S = 24 * P + 5;  // divisible by neither P nor 2P
  TempDir dir;
  std::vector<std::string> args{"run",        "--no-progress",
                                "--algo",     algo,
                                "--layout",   layout,
                                "--ranks",    std::to_string(P),
                                "--seq",      std::to_string(S),
                                "--heads",    std::to_string(2 * P),
                                "--kv-heads", std::to_string(P),
                                "--dim",      "8",
                                "--batch",    "2",
                                "--causal",   "--backward",
                                "--save",     dir / "out"};
  if (algo == "hybrid") args.insert(args.end(), {"--ulysses", P % 2 == 0 ? "2" : "1"});
  const auto run = run_binary(kRinglab, args);
  INFO(algo << " " << layout << " P=" << P << "\n" << run.out << run.err);
  REQUIRE(run.status == 0);
  CHECK(run.out.find("padding token") != std::string::npos);
  const NpyArray out = read_npy(dir / "out/out.npy"), lse = read_npy(dir / "out/lse.npy");
  CHECK(out.values.shape() == Shape{2, S, 2 * P, 8});
  CHECK(lse.values.shape() == Shape{2, 2 * P, S});
  CHECK(read_npy(dir / "out/dk.npy").values.shape() == Shape{2, S, P, 8});
  // The saved outputs are the oracle's for the unpadded problem.
  const AttentionInputs<double> x = make_inputs({2, S, 2 * P, P, 8}, 0, true).cast<double>();
  const AttentionOutput<double> exact = exact_attention(x.q, x.k, x.v, MaskKind::causal);
  CHECK(compare(out.values, exact.out, fp32_tolerance("out")).ok);
}

TEST_CASE("heads that do not divide over the Ulysses degree are padded and cut from the outputs", "[cli][uneven]") {
  // (algo, P, U, H, HKV): plain heads, GQA whose HKV does not divide, a hybrid
  const auto [algo, P, U, H, HKV] =
      GENERATE(std::tuple{"ulysses", 4, 4, 6, 6}, std::tuple{"ulysses", 4, 4, 10, 5}, std::tuple{"hybrid", 6, 3, 8, 4});
  TempDir dir;
  std::vector<std::string> args{
      "run",      "--no-progress", "--algo",          algo,         "--ranks",           std::to_string(P), "--seq",
      "97",       "--heads",       std::to_string(H), "--kv-heads", std::to_string(HKV), "--dim",           "8",
      "--causal", "--backward",    "--save",          dir / "out"};
  if (std::string(algo) == "hybrid") args.insert(args.end(), {"--ulysses", std::to_string(U)});
  const auto run = run_binary(kRinglab, args);
  INFO(run.out << run.err);
  REQUIRE(run.status == 0);
  CHECK(run.out.find("padding head") != std::string::npos);
  CHECK(read_npy(dir / "out/out.npy").values.shape() == Shape{1, 97, H, 8});
  CHECK(read_npy(dir / "out/lse.npy").values.shape() == Shape{1, H, 97});
  CHECK(read_npy(dir / "out/dv.npy").values.shape() == Shape{1, 97, HKV, 8});
}
