// `ringlab conformance cases` and packed documents of any length through the built binary: the
// suite written whole (and replaced whole with --force), its format in --help, and the issue's
// zig-zag example that used to be refused. Bad inputs: test_bad_inputs.cpp.
#include <unistd.h>
#include <catch2/catch.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <utility>

#include "tests/cli/run_binary.hpp"

using ringlab::test::run_binary;
namespace fs = std::filesystem;

namespace {

const std::string kRinglab = RINGLAB_BINARY;

struct Scratch {
  fs::path path = fs::temp_directory_path() / ("ringlab-conformance-cli-" + std::to_string(::getpid()));
  Scratch() {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~Scratch() {
    std::error_code ignored;
    fs::remove_all(path, ignored);
  }
};

nlohmann::json read_json(const fs::path& path) {
  std::ifstream file(path);
  return nlohmann::json::parse(file);
}

}  // namespace

TEST_CASE("ringlab conformance cases writes the quick suite in seconds, whole, and replaces it only with --force",
          "[cli][conformance]") {
  const Scratch scratch;
  const std::string dir = (scratch.path / "cases").string();
  const auto start = std::chrono::steady_clock::now();
  const auto written = run_binary(kRinglab, {"conformance", "cases", dir});
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  INFO(written.err);
  REQUIRE(written.status == 0);
  CHECK(seconds < 20);  // seconds on a laptop; generous for a shared CI machine
  const nlohmann::json suite = read_json(fs::path(dir) / "suite.json");
  CHECK(suite.at("format") == "ringlab-conformance-case/1");
  CHECK(suite.at("suite") == "quick");
  const auto names = suite.at("cases").get<std::vector<std::string>>();
  CHECK(written.out.find("wrote " + std::to_string(names.size()) + " quick cases") != std::string::npos);
  int64_t folders = 0;
  for (const auto& entry : fs::directory_iterator(dir)) folders += entry.is_directory() ? 1 : 0;
  CHECK(folders == static_cast<int64_t>(names.size()));
  for (const std::string& name : names) {
    INFO(name);
    for (const char* file :
         {"case.json", "q.npy", "k.npy", "v.npy", "dout.npy", "out.npy", "lse.npy", "dq.npy", "dk.npy", "dv.npy"})
      CHECK(fs::exists(fs::path(dir) / name / file));
  }
  // Every report the issue names stands behind some case; bf16 and P = 2 next to P >= 3 are there.
  std::string reports;
  std::set<int64_t> ranks;
  bool bf16 = false;
  for (const std::string& name : names) {
    const nlohmann::json c = read_json(fs::path(dir) / name / "case.json");
    for (const auto& r : c.at("stands_for")) reports += r.at("report").get<std::string>() + "|";
    ranks.insert(c.at("P").get<int64_t>());
    bf16 = bf16 || c.at("dtype") == "bf16";
  }
  for (const char* report :
       {"TransformerEngine #3331", "TransformerEngine #1930", "NeMo Automodel PR #3157", "prime-rl PR #2828",
        "PyTorch #141429", "PyTorch #152261", "PyTorch PR #189902", "ring-flash-attention #42"})
    CHECK(reports.find(report) != std::string::npos);
  CHECK(ranks.count(2) == 1);
  CHECK(ranks.count(3) == 1);
  CHECK(bf16);

  // Again without --force: refused, the cases untouched; with --force: replaced whole.
  const auto again = run_binary(kRinglab, {"conformance", "cases", dir});
  CHECK(again.status == 2);
  CHECK(again.err.find("--force") != std::string::npos);
  fs::remove(fs::path(dir) / names[0] / "out.npy");  // a damaged suite ...
  const auto forced = run_binary(kRinglab, {"conformance", "cases", dir, "--force"});
  CHECK(forced.status == 0);
  CHECK(fs::exists(fs::path(dir) / names[0] / "out.npy"));  // ... rewritten whole
  // DIR/ is DIR: its parent is DIR's, and the staging folder goes beside it, not inside.
  const auto slash = run_binary(kRinglab, {"conformance", "cases", dir + "/", "--force"});
  INFO(slash.err);
  CHECK(slash.status == 0);
  CHECK(fs::exists(fs::path(dir) / "suite.json"));
  for (const auto& entry : fs::directory_iterator(scratch.path)) CHECK(entry.path().filename() == "cases");
}

TEST_CASE("ringlab conformance cases --help prints the case format", "[cli][conformance]") {
  const auto help = run_binary(kRinglab, {"conformance", "cases", "--help"});
  CHECK(help.status == 0);
  for (const char* key : {"ringlab-conformance-case/1", "positions", "kv_origin", "tolerances", "stands_for",
                          "no_key_rows", "lse_base", "--suite", "--force"})
    CHECK(help.out.find(key) != std::string::npos);
}

TEST_CASE("ringlab run takes packed documents of any length on the per-document layouts", "[cli][documents]") {
  // The example, refused before ("document 0 has 300 tokens, not a multiple of 8").
  // (300 and 500 are no multiples of 2P = 8; striped needs multiples of P = 4: 301 and 499 are not.)
  for (const auto& [layout, docs] : {std::pair{"zigzag", "300,500,200"}, std::pair{"striped", "301,499,200"}}) {
    INFO(layout);
    const auto run = run_binary(kRinglab, {"run", "--no-progress", "--layout", layout, "--docs", docs, "--seq", "1000",
                                           "--ranks", "4", "--causal", "--backward", "--heads", "2", "--dim", "16"});
    INFO(run.out << run.err);
    CHECK(run.status == 0);
    CHECK(run.out.find("padding tokens at document ends") != std::string::npos);
    CHECK(run.out.find("PASS: 5 of 5") != std::string::npos);
  }
}

TEST_CASE("the balance lint reports padded documents' real work: tiny documents unbalance, long ones do not",
          "[cli][documents]") {
  // Six documents of 1 to 3 tokens at P = 4: each is mostly padding, rank 0 holds most of the real
  // rows, and the lint says so (exit 1 with --strict); 300, 500 and 200 tokens stay balanced.
  const auto tiny = run_binary(kRinglab, {"plan", "--layout", "zigzag", "--docs", "1,1,1,1,1,3", "--seq", "8",
                                          "--ranks", "4", "--causal", "--strict"});
  CHECK(tiny.status == 1);
  CHECK(tiny.out.find("padding tokens at document ends") != std::string::npos);
  CHECK((tiny.out + tiny.err).find("is above --max-imbalance 1.10: rank 0 does") != std::string::npos);
  const auto long_documents = run_binary(kRinglab, {"plan", "--layout", "zigzag", "--docs", "300,500,200", "--seq",
                                                    "1000", "--ranks", "4", "--causal", "--strict"});
  CHECK(long_documents.status == 0);
}
