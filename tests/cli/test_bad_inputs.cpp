// The bad-input matrix across the command line: `ringlab run`, `ringlab check`, `ringlab grade`
// and `ringlab-viz`. Every row must exit 2 with exactly one line on stderr ("<tool>: error:
// <problem>; <fix>"), print nothing on stdout, and leave no output file or staging leftover.
#include <unistd.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "reference/inputs.hpp"
#include "reference/npy.hpp"
#include "tests/cli/run_binary.hpp"

using namespace ringlab;
using ringlab::test::run_binary;
namespace fs = std::filesystem;

namespace {

struct Row {
  const char* what;
  std::string binary;  // the built ringlab or ringlab-viz
  std::vector<std::string> args;
  const char* message;         // a piece of the expected line
  std::string must_not_exist;  // an output that must not appear ("" = none)
};

// Input directories, each with one thing wrong.
std::string inputs_with(const fs::path& root, const std::string& name,
                        const std::function<void(const std::string&)>& spoil) {
  const std::string dir = (root / name).string();
  fs::create_directories(dir);
  const AttentionInputs<double> x = make_inputs({1, 64, 4, 2, 8}, 1, false).cast<double>();
  write_npy(dir + "/q.npy", x.q);
  write_npy(dir + "/k.npy", x.k);
  write_npy(dir + "/v.npy", x.v);
  spoil(dir);
  return dir;
}

void replace_in_file(const std::string& path, const std::string& from, const std::string& to) {
  std::string bytes = npy_bytes(read_npy(path).values);
  bytes.replace(bytes.find(from), from.size(), to);
  std::ofstream(path, std::ios::binary) << bytes;
}

}  // namespace

TEST_CASE("bad input across run, check, grade and ringlab-viz: exit 2, one line, no files", "[cli][bad-input]") {
  const fs::path root = fs::temp_directory_path() / ("ringlab-bad-" + std::to_string(::getpid()));
  fs::remove_all(root);
  fs::create_directories(root);
  const std::string save = (root / "never").string();
  const std::string ringlab = RINGLAB_BINARY;

  const std::string nan_dir = inputs_with(root, "nan", [](const std::string& d) {
    Tensor<double> q = read_npy(d + "/q.npy").values;
    q[17] = NAN;
    write_npy(d + "/q.npy", q);
  });
  const std::string inf_dir = inputs_with(root, "inf", [](const std::string& d) {
    Tensor<double> v = read_npy(d + "/v.npy").values;
    v[3] = INFINITY;
    write_npy(d + "/v.npy", v);
  });
  const std::string truncated_dir = inputs_with(root, "truncated", [](const std::string& d) {
    const std::string bytes = npy_bytes(read_npy(d + "/k.npy").values);
    std::ofstream(d + "/k.npy", std::ios::binary) << bytes.substr(0, bytes.size() - 100);
  });
  const std::string typed_dir =
      inputs_with(root, "typed", [](const std::string& d) { replace_in_file(d + "/q.npy", "<f8", "<i8"); });
  const std::string fortran_dir =
      inputs_with(root, "fortran", [](const std::string& d) { replace_in_file(d + "/q.npy", "False", "True "); });
  const std::string shape_dir = inputs_with(root, "shape", [](const std::string& d) {
    write_npy(d + "/k.npy", Tensor<double>({1, 64, 2, 16}));
  });
  const std::string missing_dir = inputs_with(root, "missing", [](const std::string& d) { fs::remove(d + "/v.npy"); });
  const std::string good_dir = inputs_with(root, "good", [](const std::string&) {});
  const std::string folder_dir = inputs_with(root, "folder", [](const std::string& d) {
    fs::remove(d + "/q.npy");
    fs::create_directories(d + "/q.npy");  // a directory where an array should be
  });
  const std::string fp16_dir = inputs_with(root, "fp16", [](const std::string& d) {
    Tensor<double> v = read_npy(d + "/v.npy").values;
    v[9] = 70000;  // beyond fp16's 65504
    write_npy(d + "/v.npy", v);
  });
  fs::create_directories(root / "full");
  std::ofstream(root / "full/keep.txt") << "already here\n";
  const std::string bad_trace = (root / "bad.json").string();
  std::ofstream(bad_trace) << "{\"traceEvents\": [";
  const std::string png = (root / "shot.png").string();
  const std::string cases_new = (root / "cases-new").string(), cases_held = (root / "cases-held").string();
  fs::create_directories(root / "cases-held/some-case");
  std::ofstream(root / "cases-held/suite.json") << "{}\n";
  std::ofstream(root / "cases-held/some-case/case.json") << "{}\n";

  auto run = [&](std::vector<std::string> args, const char* message) {
    args.insert(args.begin(), {"run", "--no-progress"});
    if (std::find(args.begin(), args.end(), "--save") == args.end()) args.insert(args.end(), {"--save", save});
    return Row{"", ringlab, args, message, save};
  };
  std::vector<Row> rows = {
      // ringlab run: flags, sizes, divisibility, GQA and Ulysses constraints, memory, inputs, outputs, faults
      run({"--bogus"}, "--bogus"),
      run({"--algo", "tree"}, "--algo"),
      run({"--ranks", "3", "--seq", "1000", "--block", "100"}, "not divisible by P block=300"),
      run({"--ranks", "4", "--seq", "1004", "--layout", "zigzag", "--block", "1"}, "2 P block=8"),
      run({"--ranks", "4", "--seq", "1024", "--layout", "striped", "--block", "3"}, "not divisible"),
      run({"--heads", "4", "--kv-heads", "3"}, "does not divide H=4"),
      run({"--algo", "hybrid", "--ranks", "4"}, "--ulysses"),
      run({"--algo", "hybrid", "--ranks", "6", "--ulysses", "4", "--seq", "1200"}, "does not divide P=6"),
      run({"--ranks", "0"}, "--ranks"),
      run({"--seq", "-5"}, "must be positive"),
      run({"--dim", "0"}, "must be positive"),
      run({"--seq", "100000000", "--heads", "64"}, "GB"),
      run({"--in", nan_dir}, "NaN"),
      run({"--in", inf_dir}, "Inf"),
      run({"--in", truncated_dir}, "truncated"),
      run({"--in", typed_dir}, "dtype <i8"),
      run({"--in", fortran_dir}, "Fortran order"),
      run({"--in", shape_dir}, "k has shape"),
      run({"--in", missing_dir}, "no v.npy"),
      run({"--in", (root / "nowhere").string()}, "not a readable directory"),
      run({"--save", (root / "full").string()}, "not empty"),
      run({"--trace", (root / "no-dir" / "t.json").string()}, "does not exist"),
      run({"--erratum", "reverse-dkv", "--causal"}, "--backward"),
      run({"--erratum", "kv-offset-mask", "--causal", "--algo", "allgather"}, "--algo ring"),
      run({"--inject", "explode@1:2"}, "inject"),
      run({"--inject", "drop@9:1"}, "no rank 9"),
      run({"--inject", "drop@1:99"}, "there is no step 99 in this plan (its phases have steps 0 to 3)"),
      run({"--in", folder_dir}, "q.npy is a directory, not a .npy file"),
      // integers a flag cannot hold, and flags that do not apply
      run({"--ranks", "99999999999999999999"}, "--ranks: 99999999999999999999 is too large"),
      run({"--seed", "-1"}, "--seed: -1 is negative"),
      run({"--seed", "18446744073709551616"}, "--seed: 18446744073709551616 is too large"),
      run({"--block", "0"}, "--block: 0 is too small"),
      run({"--kv-heads", "0"}, "--kv-heads must be positive"),
      run({"--ulysses", "2"}, "--ulysses 2 applies to --algo hybrid only"),
      run({"--hw", "h100-ib"}, "--hw h100-ib applies to --dry-run and compare"),
      run({"--dim", "100000000"}, "use smaller sizes"),
      {"", ringlab, {"plan", "--show-ranks", "0"}, "--show-ranks must be at least 2", ""},
      {"", ringlab, {"plan", "--show-ranks", "-2"}, "--show-ranks must be at least 2", ""},
      {"", ringlab, {"plan", "--ranks", "100000", "--seq", "100000"}, "use ringlab run --dry-run", ""},
      {"", ringlab, {"nosuch"}, "unknown command 'nosuch' for ringlab; use run, plan", ""},
      // sizes whose counts wrap in 64 bits: refused, not costed into negative megabytes
      {"", ringlab, {"run", "--dry-run", "--seq", "9223372036854775807"}, "too large to count in 64 bits", ""},
      {"",
       ringlab,
       {"run", "--dry-run", "--seq", "1000000000", "--heads", "1000000000", "--dim", "100000"},
       "too large to count in 64 bits",
       ""},
      {"", ringlab, {"compare", "--seq", "4611686018427387904"}, "too large to count in 64 bits", ""},
      // more ranks than ringlab plans: refused at once (P = 10^8 took 47 s and 15 GB to fail)
      {"",
       ringlab,
       {"run", "--dry-run", "--ranks", "100000000", "--seq", "1000000"},
       "more ranks than ringlab plans",
       ""},
      // a dry run that would walk every rank at every step of a huge ring: refused before walking
      {"", ringlab, {"run", "--dry-run", "--ranks", "65536", "--seq", "4194304", "--causal"}, "walked once", ""},
      // a trimmed ring (a window) too long to plan block by block in seconds: refused at once
      {"",
       ringlab,
       {"run", "--dry-run", "--ranks", "131072", "--seq", "16777216", "--causal", "--window", "4096"},
       "at most 65536 positions)",
       ""},
      {"",
       ringlab,
       {"run", "--dry-run", "--ranks", "32768", "--seq", "16777216", "--causal", "--window", "4096", "--layout",
        "striped"},
       "at most 16384 positions with this layout",
       ""},
      // compare: flags a scenario would ignore, and a hybrid with no row
      {"", ringlab, {"compare", "--scenario", "llama3-8b", "--ranks", "4"}, "drop --ranks", ""},
      {"", ringlab, {"compare", "--scenario", "causal-8", "--seq", "100"}, "drop --seq", ""},
      {"", ringlab, {"compare", "--algo", "hybrid", "--ranks", "4"}, "--algo hybrid needs --ulysses U", ""},
      {"",
       ringlab,
       {"figure", "nosuch", "--out", (root / "fig.svg").string()},
       "timeline or precision",
       (root / "fig.svg").string()},
      run({"--timeout", "-1"}, "--timeout"),
      // documents and windows
      run({"--seq", "1024", "--docs", "500,500"}, "sum to 1000, not S=1024"),
      run({"--seq", "1024", "--docs", "1024,0"}, "at least 1, got 0"),
      run({"--seq", "1024", "--docs", "1030,-6"}, "at least 1, got -6"),
      run({"--seq", "1024", "--docs", "512,abc"}, "'abc' is not a document length"),
      run({"--seq", "64", "--docs", "random:65"}, "more documents than S=64"),
      run({"--seq", "64", "--docs", "random:0"}, "N >= 1"),
      run({"--window", "0"}, "--window must be at least 1"),
      Row{"", ringlab, {"plan", "--causal", "--max-imbalance", "0.9"}, "--max-imbalance must be at least 1", ""},
      run({"--window", "-8", "--causal"}, "--window must be at least 1"),
      run({"--erratum", "kv-offset-mask", "--causal", "--window", "64"}, "drop --window and --docs"),
      run({"--in", good_dir, "--heads", "2"}, "--heads 2 contradicts"),
      run({"--in", good_dir, "--seq", "128"}, "--seq 128 contradicts"),
      run({"--in", good_dir, "--docs", "60,60"}, "sum to 120, not S=64"),
      // low precision
      run({"--precision", "fp8"}, "unknown precision 'fp8'; use --precision fp32, bf16 or fp16"),
      run({"--accumulate", "bf16"}, "--accumulate"),
      run({"--merge", "sigmoid"}, "--merge"),
      {"", ringlab, {"run", "--dry-run", "--precision", "bf16"}, "--dry-run computes none", ""},
      run({"--in", fp16_dir, "--precision", "fp16"}, "fp16 overflow: v(0, 0, 1, 1) = 70000"),
      {"", ringlab, {"run", "--dry-run", "--hw", "abacus"}, "abacus", ""},
      // ringlab study precision
      {"", ringlab, {"study", "precision", "--precision", "fp32"}, "pick --precision bf16 or fp16", ""},
      {"", ringlab, {"study", "precision", "--precision", "fp4"}, "unknown precision 'fp4'", ""},
      {"", ringlab, {"study", "precision", "--ranks", "0,2"}, "--ranks must list positive", ""},
      {"",
       ringlab,
       {"study", "precision", "--layout", "zigzag", "--seq", "96", "--ranks", "1,2,4,32"},
       "does not pad",
       ""},
      {"", ringlab, {"study", "precision", "--ranks", "1,1024"}, "use at most --ranks 256", ""},
      {"", ringlab, {"study", "precision", "--backward"}, "always runs the forward and the backward pass", ""},
      {"", ringlab, {"study", "nosuch"}, "unknown command 'nosuch' for ringlab study; use precision", ""},
      {"", ringlab, {"study"}, "subcommand is required", ""},
      // ringlab conformance cases: the suite, the directory
      {"", ringlab, {"conformance", "cases", cases_new, "--suite", "huge"}, "unknown suite 'huge'", cases_new},
      {"", ringlab, {"conformance", "cases", (root / "no-dir" / "cases").string()}, "does not exist", ""},
      {"", ringlab, {"conformance", "cases", (root / "full").string()}, "not conformance cases", ""},
      {"", ringlab, {"conformance", "cases", cases_held}, "already holds conformance cases; pass --force", ""},
      {"", ringlab, {"conformance", "cases", (root / "full/keep.txt").string()}, "not a directory", ""},
      {"", ringlab, {"conformance"}, "subcommand is required", ""},
      {"", ringlab, {"conformance", "nosuch", "x"}, "unknown command 'nosuch' for ringlab conformance; use cases", ""},
      {"", ringlab, {"conformance", "cases", (root / "no-dir" / "cases/").string()}, "does not exist", ""},
      // ringlab check: exercises, parts, answers and units
      {"", ringlab, {"check", "nosuch", "x=1"}, "unknown exercise 'nosuch'", ""},
      {"", ringlab, {"check", "overlap-time", "nopart=3"}, "unknown part 'nopart'", ""},
      {"", ringlab, {"check", "comm-volume", "ring=32GB", "ring=33GB"}, "part 'ring' is answered twice", ""},
      {"", ringlab, {"check", "overlap-time", "total=eighty"}, "cannot read 'eighty'", ""},
      {"", ringlab, {"check", "attention-memory", "full=4.4parsec"}, "unknown unit 'parsec'", ""},
      {"", ringlab, {"check", "attention-memory", "full"}, "is not PART=ANSWER", ""},
      {"", ringlab, {"check", "attention-memory", "--variant", "-3", "full=4.4TB"}, "negative", ""},
      {"", ringlab, {"exercises", "show", "nosuch"}, "unknown exercise", ""},
      // ringlab grade: labs, files, criteria
      {"", ringlab, {"grade", "nosuch"}, "unknown lab 'nosuch'", ""},
      {"", ringlab, {"grade", "03-ring-forward", (root / "nowhere.cpp").string()}, "no file", ""},
      {"", ringlab, {"grade", "03-ring-forward", root.string()}, "no file", ""},
      {"", ringlab, {"grade", "03-ring-forward", "solution", "--only", "nosuch"}, "no criterion 'nosuch'", ""},
      // A folder where no file can be made (even by root): the reason, not "disk full?".
      {"",
       ringlab,
       {"grade", "01-softmax-merge", "solution", "--only", "merge-two", "--output", "/proc/ringlab.json"},
       "pass an --output in a folder you can write",
       ""},
  };
#ifdef RINGLAB_VIZ_BINARY
  // ringlab-viz: traces, outputs, flags — refused before any window opens.
  const std::string viz = RINGLAB_VIZ_BINARY;
  for (Row row : std::vector<Row>{
           {"", viz, {"--trace", bad_trace, "--screenshot", png}, "not valid JSON", png},
           {"", viz, {"--trace", (root / "nowhere.json").string(), "--screenshot", png}, "cannot open the trace", png},
           {"", viz, {"--screenshot", (root / "no-dir" / "x.png").string()}, "does not exist", ""},
           {"", viz, {"--screenshot", png, "--step", "-4"}, "0 or more", png},
           {"", viz, {"--screenshot", png, "--size", "0x0"}, "WIDTHxHEIGHT", png},
           {"",
            viz,
            {"--screenshot", png, "--ranks", "3", "--seq", "1000", "--block", "100"},
            "not divisible by P block=300",
            png},
           {"", viz, {"--screenshot", png, "--panel", "nosuch"}, "unknown panel", png},
           {"", viz, {"--bogus"}, "--bogus", ""},
           {"", viz, {"--screenshot", png, "--frames", "-5"}, "--frames: -5 is negative", png},
           {"", viz, {"--screenshot", png, "--ranks", "5000", "--seq", "5000"}, "at most 512 ring positions", png},
       })
    rows.push_back(row);
#else
  WARN("ringlab-viz is not built here (no viewer dependencies): its rows are skipped");
#endif
  CHECK(rows.size() >= 20);
  for (const Row& row : rows) {
    const auto result = run_binary(row.binary, row.args, 120);
    std::string command = fs::path(row.binary).filename().string();
    for (const std::string& a : row.args) command += " " + a;
    INFO(command << "\n  stderr: " << result.err << "\n  stdout: " << result.out);
    CHECK(result.status == 2);
    REQUIRE(result.err_lines().size() == 1);
    const std::string tool = fs::path(row.binary).filename().string() + ": error: ";
    CHECK(result.err_lines()[0].rfind(tool, 0) == 0);
    CHECK(result.err.find(row.message) != std::string::npos);
    CHECK(result.out.empty());
    if (!row.must_not_exist.empty()) CHECK_FALSE(fs::exists(row.must_not_exist));
  }
  for (const auto& entry : fs::recursive_directory_iterator(root)) {
    INFO(entry.path());
    CHECK(entry.path().filename().string().find("partial") == std::string::npos);
  }
  CHECK(fs::exists(root / "full/keep.txt"));
  CHECK(fs::exists(root / "cases-held/some-case/case.json"));  // refused without --force: untouched
  fs::remove_all(root);
}
