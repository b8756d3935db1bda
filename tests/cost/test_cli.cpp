// The command line of the cost model: `ringlab run --dry-run` (text, compact summary, --json,
// --trace, --hw presets and files, errors) and `ringlab compare` (its table format pinned here,
// scenarios, --json), `ringlab calibrate`. `ringlab figure` is tested with the figures, in tests/viz.
#include <catch2/catch.hpp>

#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "reference/printf_text.hpp"
#include "sim/pipeline/trace.hpp"

namespace {

struct Run {
  int status = -1;
  std::string out, err;
};

std::string slurp(const std::string& path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

// Runs the ringlab binary with `args` (shell words, no quoting needed in these tests).
Run run_ringlab(const std::string& args) {
  const std::string err_path = "/tmp/ringlab_cost_cli_stderr_" + std::to_string(::getpid());
  const std::string command = std::string(RINGLAB_BINARY) + " " + args + " 2>" + err_path;
  Run run;
  FILE* pipe = ::popen(command.c_str(), "r");
  REQUIRE(pipe != nullptr);
  char buffer[4096];
  size_t n = 0;
  while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) run.out.append(buffer, n);
  const int status = ::pclose(pipe);
  run.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128;
  run.err = slurp(err_path);
  std::remove(err_path.c_str());
  return run;
}

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> result;
  std::stringstream stream(text);
  for (std::string line; std::getline(stream, line);) result.push_back(line);
  return result;
}

const std::string kSizes = "--ranks 8 --seq 65536 --heads 32 --kv-heads 8 --dim 128 --causal";

}  // namespace

TEST_CASE("ringlab compare prints one fixed-width table with a units row", "[cost][cli][compare]") {
  const Run run = run_ringlab("compare " + kSizes + " --backward");
  REQUIRE(run.status == 0);
  const std::vector<std::string> text = lines(run.out);
  REQUIRE(text.size() > 12);
  CHECK(text[0] == "ringlab compare | P=8 | B=1 S=65536 H=32 HKV=8 D=128 | causal | fwd+bwd | hw h100-nvlink");
  CHECK(text[1].empty());
  // The heading has the user's sizes; padding, which differs row by row, is in each row's note, and
  // padding alone is no mask to name.
  const Run padded = run_ringlab("compare --ranks 3");
  REQUIRE(padded.status == 0);
  const std::vector<std::string> padded_text = lines(padded.out);
  CHECK(padded_text[0] == "ringlab compare | P=3 | B=1 S=1024 H=4 HKV=4 D=64 | full | fwd | hw h100-nvlink");
  REQUIRE(padded_text.size() > 4);
  CHECK(padded_text[4].ends_with("  +2 padding tokens (S=1026)"));
  CHECK(text[2] ==
        "case             layout          U     R        time    exposed    compute         sent   peak mem imbalance "
        "of ideal  note");
  CHECK(text[3] ==
        "                                                  ms    comm ms     ms max      MB/rank    MB/rank  max/mean "
        "       %  ");
  // Seven rows (ring and all-gather in three layouts, Ulysses once), every column where the header says.
  const std::vector<std::string> cases{"ring", "ring", "ring", "allgather", "allgather", "allgather", "ulysses"};
  const std::vector<std::string> layouts{"contiguous", "zigzag", "striped", "contiguous", "zigzag", "striped", "-"};
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string& row = text[4 + i];
    INFO(row);
    CHECK(row.substr(0, 17) == (cases[i] + std::string(17 - cases[i].size(), ' ')));
    CHECK(row.substr(17, 12) == (layouts[i] + std::string(12 - layouts[i].size(), ' ')));
    CHECK(row.size() >= text[2].size() - 6);
    double time_ms = 0, exposed = 0, compute = 0, sent = 0, peak = 0, imbalance = 0, ideal = 0;
    long long u = 0, r = 0;
    REQUIRE(std::sscanf(row.c_str() + 29, "%lld %lld %lf %lf %lf %lf %lf %lf %lf", &u, &r, &time_ms, &exposed, &compute,
                        &sent, &peak, &imbalance, &ideal) == 9);
    CHECK(u * r == 8);
    CHECK(time_ms >= compute);
    CHECK(ideal > 0);
    CHECK(ideal <= 100.5);
  }
  CHECK(text[11].empty());
  CHECK(text[12].rfind("of ideal: ", 0) == 0);
}

// Each row is what `ringlab run --dry-run` gives for its algorithm and layout, padding included:
// zig-zag pads each document to a multiple of 2P, striped to P, contiguous only the end, Ulysses
// the heads that do not divide over P. (The rows once all took the zig-zag's padded S, and
// Ulysses, planned without its head padding, was n/a where run pads.)
TEST_CASE("ringlab compare: every row as ringlab run --dry-run costs it, with its own padding",
          "[cost][cli][compare]") {
  const std::string sizes = "--ranks 4 --seq 1000 --heads 6 --kv-heads 6 --docs 300,400,300 --causal --backward";
  const Run compared = run_ringlab("compare " + sizes + " --json");
  REQUIRE(compared.status == 0);
  const nlohmann::json rows = nlohmann::json::parse(compared.out)["rows"];
  REQUIRE(rows.size() == 9);  // ring and all-gather in 4 layouts (balanced: documents), Ulysses
  int padded_rows = 0;
  for (const nlohmann::json& row : rows) {
    const std::string algo = row["case"];
    std::string flags = "run --dry-run --json --algo " + algo + " " + sizes;
    if (algo != "ulysses") {
      const std::string config = row["config"];
      const size_t at = config.find(" | ") + 3;
      flags += " --layout " + config.substr(at, config.find_first_of(" (|", at) - at);
    }
    INFO(flags);
    REQUIRE(row["ok"] == true);
    const Run run = run_ringlab(flags);
    REQUIRE(run.status == 0);
    const nlohmann::json ran = nlohmann::json::parse(run.out);
    CHECK(row["config"] == ran["config"]);
    CHECK(row["bytes_sent_per_rank"] == ran["summary"]["bytes_sent_per_rank"]);
    CHECK(row["time_seconds"] == ran["summary"]["time_seconds"]);
    CHECK(row["compute_max_over_mean"] == ran["summary"]["load_imbalance"]["compute_max_over_mean"]);
    CHECK(row["peak_memory_bytes"] == ran["memory"]["peak_bytes"]);
    const std::string note = row["note"];
    const bool padded = std::string(ran["config"]).find("padding") != std::string::npos;
    CHECK((note.find("padding") != std::string::npos) == padded);
    padded_rows += padded ? 1 : 0;
  }
  CHECK(padded_rows == 3);  // zig-zag's two rows (documents to 2P = 8) and Ulysses (heads 6 -> 8)
}

TEST_CASE("ringlab compare --scenario hybrid-64 --json", "[cost][cli][compare]") {
  const Run run = run_ringlab("compare --scenario hybrid-64 --json");
  REQUIRE(run.status == 0);
  const nlohmann::json document = nlohmann::json::parse(run.out);
  CHECK(document["command"] == "compare");
  CHECK(document["hardware"] == "h100-ib");
  CHECK(document["scenario"]["name"] == "hybrid-64");
  REQUIRE(document["rows"].size() == 6);
  const nlohmann::json& hybrid = document["rows"][0];
  CHECK(hybrid["ok"] == true);
  CHECK(hybrid["ulysses"] == 8);
  CHECK(hybrid["ring"] == 8);
  // The hybrid sends far less per rank than the pure ring of 64.
  CHECK(hybrid["bytes_sent_per_rank"].get<double>() < 0.2 * document["rows"][2]["bytes_sent_per_rank"].get<double>());
  const Run text = run_ringlab("compare --scenario hybrid-64");
  REQUIRE(text.status == 0);
  CHECK(text.out.find("Ulysses inside nodes, ring across") != std::string::npos);
  CHECK(text.out.find("exercise 5") != std::string::npos);
}

TEST_CASE("ringlab run --dry-run: header, per-rank table, totals, memory, assumptions", "[cost][cli][dry-run]") {
  const Run run =
      run_ringlab("run --dry-run --ranks 4 --seq 16384 --heads 8 --dim 64 --causal --layout zigzag --backward");
  REQUIRE(run.status == 0);
  CHECK(run.err.empty());
  const std::vector<std::string> text = lines(run.out);
  CHECK(text[0].rfind("ringlab run --dry-run | ring | zigzag", 0) == 0);
  CHECK(text[2] == "    rank    compute     other    exposed      idle      total        work       sent  peak mem");
  CHECK(text[3] == "                 ms        ms    comm ms        ms         ms       GFLOP         MB        MB");
  for (int r = 0; r < 4; ++r) CHECK(text[4 + r].substr(0, 8) == "       " + std::to_string(r));
  CHECK(run.out.find("\ntime: ") != std::string::npos);
  CHECK(run.out.find("load imbalance: max/mean FLOPs 1.000") != std::string::npos);
  CHECK(run.out.find("memory per rank by phase") != std::string::npos);
  CHECK(run.out.find("peak: ") != std::string::npos);
  CHECK(run.out.find("model: h100-nvlink") != std::string::npos);
  CHECK(run.out.find("375 GB/s") != std::string::npos);
}

TEST_CASE("ringlab run --dry-run: the traffic line says every rank sends the same only when it does",
          "[cost][cli][dry-run]") {
  const Run even = run_ringlab("run --dry-run --ranks 8 --causal --layout zigzag");
  REQUIRE(even.status == 0);
  CHECK(even.out.find("MB sent per rank in 7 messages (every rank the same)") != std::string::npos);
  // A trimmed ring: the last rank forwards nothing, the middle ones relay their neighbours' blocks.
  const Run trimmed = run_ringlab("run --dry-run --ranks 8 --causal --window 300 --json");
  REQUIRE(trimmed.status == 0);
  const nlohmann::json ranks = nlohmann::json::parse(trimmed.out).at("ranks");
  const Run text = run_ringlab("run --dry-run --ranks 8 --causal --window 300");
  REQUIRE(text.status == 0);
  INFO(text.out);
  CHECK(text.out.find("every rank the same") == std::string::npos);
  int64_t fewest = INT64_MAX, most = 0, total = 0;
  for (const auto& r : ranks) {
    const auto sent = r.at("bytes_sent").get<int64_t>();
    fewest = std::min(fewest, sent), most = std::max(most, sent), total += sent;
  }
  REQUIRE(fewest < most);
  CHECK(text.out.find(ringlab::printf_text("traffic: %.3f MB sent per rank on average, %.3f (rank ",
                                           double(total) / 8 / 1e6, double(fewest) / 1e6)) != std::string::npos);
  CHECK(text.out.find(ringlab::printf_text(") to %.3f (rank ", double(most) / 1e6)) != std::string::npos);
}

TEST_CASE("ringlab run --dry-run at P = 4096 prints the compact summary", "[cost][cli][dry-run]") {
  const Run run = run_ringlab("run --dry-run --ranks 4096 --seq 1048576 --heads 32 --dim 128 --causal --hw h100-ib");
  REQUIRE(run.status == 0);
  CHECK(run.out.find("(4090 ranks not shown)") != std::string::npos);
  for (const char* row : {"\n     min ", "\n  median ", "\n     max ", "\n    4095 "})
    CHECK(run.out.find(row) != std::string::npos);
}

TEST_CASE("ringlab run --dry-run --json and --trace", "[cost][cli][dry-run]") {
  const std::string trace = "/tmp/ringlab_cost_cli_trace.json";
  const Run run = run_ringlab("run --dry-run --json --trace " + trace +
                              " --ranks 4 --seq 4096 --algo hybrid --ulysses 2 --backward");
  REQUIRE(run.status == 0);
  const nlohmann::json document = nlohmann::json::parse(run.out);
  CHECK(document["mode"] == "dry-run");
  CHECK(document["ranks"].size() == 4);
  CHECK(document["hardware"]["name"] == "h100-nvlink");
  CHECK(document["summary"]["time_seconds"].get<double>() > 0);
  CHECK(document["memory"]["peak_bytes"].get<int64_t>() > 0);
  CHECK(document["ranks"][0]["bytes_sent"].get<int64_t>() > 0);
  const std::vector<ringlab::TraceEvent> events = ringlab::read_chrome_trace(trace);
  CHECK(!events.empty());
  bool saw_all_to_all = false;
  for (const ringlab::TraceEvent& e : events) saw_all_to_all = saw_all_to_all || e.name == "all_to_all";
  CHECK(saw_all_to_all);
  std::remove(trace.c_str());
}

TEST_CASE("ringlab run --dry-run --hw: presets, machine files, and clear errors", "[cost][cli][dry-run]") {
  const Run unknown = run_ringlab("run --dry-run --hw dgx-9000");
  CHECK(unknown.status == 2);
  CHECK(lines(unknown.err).size() == 1);
  CHECK(unknown.err.find("h100-nvlink, h100-ib, h100-pcie, cpu") != std::string::npos);
  const std::string path = "/tmp/ringlab_cost_cli_machine.json";
  std::ofstream(path) << R"({"name": "lab", "device": {"peak_tflops": 10, "efficiency": {"forward_full": 0.5}},
                             "intra_node": {"bandwidth_gb_per_s": 10, "latency_us": 2}})";
  const Run custom = run_ringlab("run --dry-run --hw " + path);
  CHECK(custom.status == 0);
  CHECK(custom.out.find("model: lab") != std::string::npos);
  std::ofstream(path) << R"({"device": {"peak_tflops": "fast"}})";
  const Run bad = run_ringlab("run --dry-run --hw " + path);
  CHECK(bad.status == 2);
  CHECK(bad.err.find("peak_tflops is not a number") != std::string::npos);
  // A bandwidth JSON holds but no link has: refused, where the run printed "inf ms".
  std::ofstream(path) << R"({"base": "h100-nvlink", "intra_node": {"bandwidth_gb_per_s": 1e-320}})";
  const Run tiny = run_ringlab("run --dry-run --hw " + path);
  CHECK(tiny.status == 2);
  CHECK(lines(tiny.err).size() == 1);
  CHECK(tiny.err.find("intra_node.bandwidth_gb_per_s") != std::string::npos);
  CHECK(tiny.out.find("inf") == std::string::npos);
  std::remove(path.c_str());
  const Run inject = run_ringlab("run --dry-run --inject drop@1:0");
  CHECK(inject.status == 2);
  CHECK(inject.err.find("--inject") != std::string::npos);
}

TEST_CASE("ringlab calibrate: fits bench_gpu_ring's step tables and writes a machine --hw loads", "[cost][cli]") {
  const std::string steps = std::string(RINGLAB_TEST_DATA) + "/h100-2026-11-26-steps.txt";
  const std::string out = "/tmp/ringlab_cost_cli_fit_" + std::to_string(::getpid()) + ".json";
  const Run fit = run_ringlab("calibrate " + steps + " --out " + out);
  CHECK(fit.status == 0);
  CHECK(fit.out.find("in-sample") != std::string::npos);
  CHECK(fit.out.find("ring contiguous, full, P=1 backward") != std::string::npos);  // the efficiency table's P = 1 runs
  CHECK(fit.out.find("backward_full efficiency") != std::string::npos);
  CHECK(fit.out.find("wrote " + out) != std::string::npos);
  const Run dry =
      run_ringlab("run --dry-run --hw " + out +
                  " --algo ring --layout zigzag --ranks 4 --seq 8192 --heads 32 --kv-heads 8 --dim 128 --causal");
  CHECK(dry.status == 0);
  CHECK(dry.out.find("4 ranks share each device") != std::string::npos);
  CHECK(dry.out.find("half the queries") != std::string::npos);
  std::remove(out.c_str());
  // Bad input: one line, exit 2, no file.
  const std::string empty = "/tmp/ringlab_cost_cli_empty_" + std::to_string(::getpid()) + ".txt";
  std::ofstream(empty) << "no tables here\n";
  const Run bad = run_ringlab("calibrate " + empty + " --out " + out);
  CHECK(bad.status == 2);
  CHECK(bad.err.find("no per-step table") != std::string::npos);
  CHECK(std::count(bad.err.begin(), bad.err.end(), '\n') == 1);
  CHECK_FALSE(std::ifstream(out).good());
  std::remove(empty.c_str());
  CHECK(run_ringlab("calibrate /nonexistent/steps.txt").status == 2);
  // --out is checked before any table is printed: a missing directory, a directory.
  for (const std::string& where : {std::string("/nonexistent/fit.json"), std::string("/tmp")}) {
    const Run refused = run_ringlab("calibrate " + steps + " --out " + where);
    INFO(refused.err);
    CHECK(refused.status == 2);
    CHECK(refused.out.empty());
    CHECK(lines(refused.err).size() == 1);
    CHECK((refused.err.find("does not exist; create it first") != std::string::npos ||
           refused.err.find("is a directory") != std::string::npos));
  }
  CHECK(run_ringlab("calibrate /tmp").status == 2);  // the step times, a directory
}
