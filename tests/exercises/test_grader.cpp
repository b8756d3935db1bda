// The grader itself: what no student file may do to it — hang it (an endless loop), crash it (a
// segfault), or confuse it (an exception, a compile error) — its text report, Gradescope's
// results.json and the hand-outs. Runs the built `ringlab grade ... --json`. (Every lab's rubric,
// validated by its negative controls — starter, solution and broken versions — is in
// test_rubrics.cpp.)
// Compiled binaries are cached under the build tree, so a second run takes seconds.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <utility>

#include "exercises/grader/patch.hpp"
#include "tests/cli/run_binary.hpp"
#include "tests/exercises/grading_support.hpp"

using ringlab::test::run_binary;

namespace {

const std::string kBinary = RINGLAB_BINARY;
const std::string kFixtures = RINGLAB_TEST_FIXTURES;

struct Graded : ringlab::test::GradedReport {
  bool correctness_passed() const {
    return report["score"]["correctness_passed"] == report["score"]["correctness_total"];
  }
};

Graded grade(const std::string& lab, const std::string& file, const std::vector<std::string>& extra = {}) {
  return ringlab::test::grade_json<Graded>(kBinary, lab, file, extra);
}

std::string read(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// The lab README's "| `id` | points | what |" rows: what each criterion is worth.
std::map<std::string, double> readme_points(const std::string& lab) {
  const std::string text =
      read(std::filesystem::path(RINGLAB_TEST_SOURCE_DIR) / "exercises" / "labs" / lab / "README.md");
  std::map<std::string, double> points;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("| `", 0) != 0) continue;
    const size_t id_end = line.find('`', 3);
    const size_t cell = line.find('|', id_end);
    const size_t cell_end = line.find('|', cell + 1);
    if (id_end == std::string::npos || cell_end == std::string::npos) continue;
    points[line.substr(3, id_end - 3)] = std::stod(line.substr(cell + 1, cell_end - cell - 1));
  }
  return points;
}

}  // namespace

#ifdef RINGLAB_WITH_LAB07
TEST_CASE("lab 07: the same student file compiles with nvcc, with the device runner", "[exercises][grader]") {
  const std::string lab = std::string(RINGLAB_TEST_SOURCE_DIR) + "/exercises/labs/07-block-kernel";
  for (const char* file : {"solution.cpp", "starter.cpp"}) {
    INFO(file);
    const std::vector<std::string> args{"-std=c++20",
                                        "-O1",
                                        "-arch=sm_" RINGLAB_TEST_CUDA_ARCH,
                                        "-I" + std::string(RINGLAB_TEST_SOURCE_DIR),
                                        "-I" + lab,
                                        "-DRINGLAB_LAB07_STUDENT_FILE=\"" + lab + "/" + file + "\"",
                                        lab + "/device_runner.cu",
                                        "-o",
                                        RINGLAB_TEST_NVCC_OUTPUT};
    const auto nvcc = run_binary(RINGLAB_TEST_NVCC, args, 300);
    INFO(nvcc.out << nvcc.err);
    CHECK(nvcc.status == 0);
  }
}
#endif

TEST_CASE("grader containment: endless loops time out, crashes and exceptions are reported", "[exercises][grader]") {
  const Graded loop =
      grade("03-ring-forward", kFixtures + "/lab03_endless_loop.cpp", {"--only", "p2", "--timeout", "3"});
  CHECK(loop.status_of("p2") == "timeout");
  // The criterion's own run (the compile, which a loaded machine can stretch, is not part of it):
  // killed at the --timeout asked for, not at a default; the kill itself takes milliseconds, so
  // the upper bound is a hang detector only.
  CHECK(loop.criterion("p2")["limit_seconds"].get<double>() == 3);
  CHECK(loop.criterion("p2")["seconds"].get<double>() >= 3);
  CHECK(loop.criterion("p2")["seconds"].get<double>() < 3 + 30);
  const Graded crash = grade("03-ring-forward", kFixtures + "/lab03_segfault.cpp", {"--only", "p2"});
  CHECK(crash.status_of("p2") == "failed");
  CHECK(crash.criterion("p2")["message"].get<std::string>().find("SIGSEGV") != std::string::npos);
  // The same crash with its descriptor to the judge closed half a second before: the judge is done
  // first, and the grader must wait for the process's own end to report it (under load the kernel's
  // release order alone made that window; a grader that stopped the process there lost the line).
  const Graded late = grade("03-ring-forward", kFixtures + "/lab03_segfault_after_close.cpp", {"--only", "p2"});
  CHECK(late.criterion("p2")["message"].get<std::string>().find("SIGSEGV") != std::string::npos);
  const Graded thrown = grade("03-ring-forward", kFixtures + "/lab03_throws.cpp", {"--only", "p2"});
  CHECK(thrown.criterion("p2")["message"].get<std::string>().find("rank 1 threw: boom on purpose") !=
        std::string::npos);
  const Graded broken_build = grade("03-ring-forward", kFixtures + "/lab03_compile_error.cpp");
  CHECK(broken_build.status == 1);
  CHECK(broken_build.report["compiled"] == false);
  CHECK(broken_build.status_of("compiles") == "failed");
  CHECK_FALSE(broken_build.report["compile_output"].get<std::string>().empty());
}

TEST_CASE("grader text report: error vs tolerance, first divergence, reproduce line", "[exercises][grader]") {
  setenv("RINGLAB_GRADE_CACHE", RINGLAB_GRADE_CACHE_DIR, 1);
  const auto rescale = run_binary(kBinary, {"grade", "03-ring-forward", "broken/missing_rescale", "--only", "p2"}, 600);
  CHECK(rescale.status == 1);
  CHECK(rescale.out.find("p2             FAILED") != std::string::npos);
  CHECK(rescale.out.find("observed error ") != std::string::npos);
  CHECK(rescale.out.find(" vs tolerance ") != std::string::npos);
  CHECK(rescale.out.find("reproduce: ringlab grade 03-ring-forward broken/missing_rescale --only p2") !=
        std::string::npos);
  const auto mask = run_binary(kBinary, {"grade", "03", "broken/offset_mask", "--only", "p4-causal"}, 600);
  CHECK(mask.out.find("first diverging: rank 0, step 0, block 0: block 0 was computed without the causal mask") !=
        std::string::npos);
  const auto list = run_binary(kBinary, {"grade", "--list"});
  CHECK(list.status == 0);
  // 07-block-kernel is listed either way: as a lab, or as "not in this build" without CUDA.
  for (const char* lab : {"01-softmax-merge", "02-layouts", "03-ring-forward", "04-ring-backward", "05-ulysses",
                          "06-causal-skip", "07-block-kernel", "08-window-ring"})
    CHECK(list.out.find(lab) != std::string::npos);
  CHECK(run_binary(kBinary, {"grade"}).status == 2);
  const auto unknown = run_binary(kBinary, {"grade", "99-nothing"});
  CHECK(unknown.status == 2);
  CHECK(unknown.err_lines().size() == 1);
  const auto bad_file = run_binary(kBinary, {"grade", "03", "no_such_file.cpp"});
  CHECK(bad_file.status == 2);
  // It names the lab's own files: the broken versions are its patches, sorted.
  CHECK(
      bad_file.err.find("starter, solution, broken/blocking_ring, broken/label_mismatch, broken/lse_starts_at_zero") !=
      std::string::npos);
  const auto bad_criterion = run_binary(kBinary, {"grade", "03", "solution", "--only", "p99"}, 600);
  CHECK(bad_criterion.status == 2);
}

// ---- [course infrastructure] -------------------------------------------------------------------

namespace {

std::filesystem::path scratch_dir(const std::string& name) {
  const std::filesystem::path dir = std::filesystem::path(RINGLAB_TEST_BROKEN_DIR) / name;
  std::filesystem::remove_all(dir);
  return dir;
}

}  // namespace

TEST_CASE("grade --format gradescope writes Gradescope's results.json, scored by the lab's points",
          "[exercises][grader]") {
  setenv("RINGLAB_GRADE_CACHE", RINGLAB_GRADE_CACHE_DIR, 1);
  const std::filesystem::path dir = scratch_dir("gradescope");
  std::filesystem::create_directories(dir);
  auto results_of = [&](const std::string& file, int status) {
    const std::string path = (dir / "results.json").string();
    std::filesystem::remove(path);
    const auto run =
        run_binary(kBinary, {"grade", "03-ring-forward", file, "--format", "gradescope", "--output", path}, 600);
    INFO(file << "\n" << run.err);
    CHECK(run.status == status);
    CHECK(run.out.empty());  // the report went to the file
    nlohmann::json j;
    REQUIRE_NOTHROW(j = nlohmann::json::parse(read(path)));
    // The fields Gradescope's autograder specification requires, with their types.
    REQUIRE(j.contains("score"));
    CHECK(j["score"].is_number());
    REQUIRE(j["tests"].is_array());
    REQUIRE_FALSE(j["tests"].empty());
    for (const auto& t : j["tests"]) {
      CHECK(t["name"].is_string());
      CHECK(t["score"].is_number());
      CHECK(t["max_score"].is_number());
      CHECK(t["output"].is_string());
      CHECK(std::set<std::string>{"visible", "hidden", "after_due_date", "after_published"}.count(t["visibility"]) ==
            1);
      CHECK(t["score"].get<double>() <= t["max_score"].get<double>());
    }
    return j;
  };
  auto max_total = [](const nlohmann::json& j) {
    double total = 0;
    for (const auto& t : j["tests"]) total += t["max_score"].get<double>();
    return total;
  };

  const nlohmann::json solution = results_of("solution", 0);
  const std::map<std::string, double> declared = readme_points("03-ring-forward");
  CHECK(solution["score"].get<double>() == max_total(solution));
  double declared_total = 0;
  for (const auto& [id, points] : declared) declared_total += points;
  CHECK(solution["score"].get<double>() == declared_total);
  for (const auto& t : solution["tests"]) {
    const std::string id = t["name"].get<std::string>().substr(0, t["name"].get<std::string>().find(':'));
    INFO(id);
    REQUIRE(declared.count(id) == 1);
    CHECK(t["max_score"].get<double>() == declared.at(id));  // the README's table is the lab's
  }

  // Correct but not overlapped: all but perf-overlap's point.
  const nlohmann::json no_overlap = results_of("broken/no_overlap", 1);
  CHECK(no_overlap["score"].get<double>() == max_total(no_overlap) - declared.at("perf-overlap"));
  // A wrong direction: the P = 3 and P = 8 rings deadlock, and performance is not graded.
  const nlohmann::json direction = results_of("broken/wrong_direction", 1);
  CHECK(direction["score"].get<double>() < solution["score"].get<double>());
  bool explained = false;
  for (const auto& t : direction["tests"])
    explained |=
        t["score"] == 0 && t["output"].get<std::string>().find("reproduce: ringlab grade") != std::string::npos;
  CHECK(explained);
  // A file that does not compile scores 0 and says why.
  std::ofstream(dir / "broken.cpp") << "this is not C++\n";
  const nlohmann::json broken = results_of((dir / "broken.cpp").string(), 1);
  CHECK(broken["score"] == 0);
  CHECK(broken["tests"][0]["output"].get<std::string>().find("compilation failed") != std::string::npos);

  // Bad input: exit 2, one line, nothing written.
  const auto nowhere = run_binary(kBinary, {"grade", "03", "solution", "--format", "gradescope", "--output",
                                            (dir / "missing" / "results.json").string()});
  CHECK(nowhere.status == 2);
  CHECK(nowhere.err_lines().size() == 1);
  CHECK_FALSE(std::filesystem::exists(dir / "missing"));
  const auto both = run_binary(kBinary, {"grade", "03", "solution", "--json", "--format", "gradescope"});
  CHECK(both.status == 2);
  CHECK(run_binary(kBinary, {"grade", "03", "solution", "--format", "xml"}).status == 2);
}

TEST_CASE("handout: a student folder with no solution, broken version or hidden test in it", "[exercises][grader]") {
  setenv("RINGLAB_GRADE_CACHE", RINGLAB_GRADE_CACHE_DIR, 1);
  const std::vector<std::string> labs = ringlab::test::labs_in_build(kBinary);
  REQUIRE(labs.size() >= 6);
  for (const std::string& lab : labs) {
    INFO(lab);
    const std::filesystem::path dir = scratch_dir("handout-" + lab);
    const auto run = run_binary(kBinary, {"handout", lab, dir.string()});
    INFO(run.err);
    REQUIRE(run.status == 0);
    const std::filesystem::path source = std::filesystem::path(RINGLAB_TEST_SOURCE_DIR) / "exercises" / "labs" / lab;
    const std::string solution = read(source / "solution.cpp");
    const std::string harness = read(source / "harness.cpp");
    std::set<std::string> names;
    for (const auto& entry : std::filesystem::recursive_directory_iterator(dir)) {
      const std::string relative = entry.path().lexically_relative(dir).generic_string();
      INFO(relative);
      names.insert(relative);
      CHECK(relative.find("solution") == std::string::npos);
      CHECK(relative.find("broken") == std::string::npos);
      CHECK(relative.find("harness.cpp") == std::string::npos);
      CHECK(entry.path().extension() != ".patch");
      if (entry.is_regular_file()) {
        const std::string text = read(entry.path());
        CHECK(text != solution);
        CHECK(text != harness);
      }
    }
    for (const char* needed : {"README.md", "starter.cpp", "lab.hpp", "Makefile"}) CHECK(names.count(needed) == 1);
    CHECK(read(dir / "starter.cpp") == read(source / "starter.cpp"));
    const std::string readme = read(dir / "README.md");
    CHECK(readme.find("## Learning objectives") != std::string::npos);
    CHECK(readme.find("## What the grader checks") != std::string::npos);
    CHECK(readme.find("solution.cpp") == std::string::npos);
    CHECK(readme.find("broken/") == std::string::npos);
    CHECK(readme.find("exercises/labs/") == std::string::npos);  // paths are the hand-out's own
    // Every header the starter includes is there, at the path the compiler looks for it.
    std::istringstream starter(read(dir / "starter.cpp") + read(dir / "lab.hpp"));
    for (std::string line; std::getline(starter, line);) {
      if (line.rfind("#include \"", 0) != 0) continue;
      const std::string header = line.substr(10, line.find('"', 10) - 10);
      INFO(header);
      CHECK((std::filesystem::exists(dir / header) || std::filesystem::exists(dir / "include" / header)));
    }
  }

  // The hand-out's starter is what a student grades: it compiles there and fails, as a starter does.
  const std::filesystem::path dir = std::filesystem::path(RINGLAB_TEST_BROKEN_DIR) / "handout-03-ring-forward";
  const Graded starter = grade("03-ring-forward", (dir / "starter.cpp").string());
  CHECK(starter.report["compiled"] == true);
  CHECK(starter.status == 1);

  // Bad input: exit 2, one line, and nothing created or changed.
  const auto again = run_binary(kBinary, {"handout", "03", dir.string()});
  CHECK(again.status == 2);
  CHECK(again.err_lines().size() == 1);
  const std::filesystem::path fresh = scratch_dir("handout-unknown");
  const auto unknown = run_binary(kBinary, {"handout", "99-nothing", fresh.string()});
  CHECK(unknown.status == 2);
  CHECK(unknown.err_lines().size() == 1);
  CHECK_FALSE(std::filesystem::exists(fresh));
}
