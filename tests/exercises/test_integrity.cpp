// What a submission can and cannot do to its grade (issue: solutions out of students' reach).
//   compiling against the hand-out only: the cheating includes of every kind - a name next to a
//     solution, an absolute path, "..", a name built by a macro, include_next, a symbolic link,
//     a __has_include probe, inline assembly (.incbin) - each refused with score 0 and one line,
//     or never found; while a header of the student's own beside the file compiles;
//   the cache keyed on everything compiled: a fix in an included local header changes the grade;
//   a compile failure: every criterion listed at 0, not run, with the compiler's first error and
//     paths relative to the hand-out;
//   a verdict forged at run time (a constructor writing a passing result everywhere it can, then
//     exiting) is not believed: the judge runs in a process of its own, without the submission;
//   without --run-as (the submission runs as the grading user, with a warning): a submission that
//     replaces the cached judges scores 0 and later grades judge as before; a process it leaves
//     behind with setsid() is killed and fails its criterion;
//   under --run-as (root only): no grading while the sandbox's user can read the lab's answers;
//   lab 07 without a GPU: its device criterion out of the score, full marks reachable;
//   self-contained hand-outs: every path a README names is in the hand-out, no machine path in
//     the Makefile, lab 07's `make check` without the CUDA toolkit (and failing without the
//     hand-out's stand-ins, the negative control).
// The autograder package end to end is tests/exercises/autograder_e2e.sh.
#include <grp.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "exercises/labs/common/no-cuda/cuda_bf16.h"
#include "exercises/labs/common/no-cuda/cuda_fp16.h"
#include "tests/cli/run_binary.hpp"
#include "tests/exercises/grading_support.hpp"

using ringlab::test::run_binary;
namespace fs = std::filesystem;

namespace {

const std::string kBinary = RINGLAB_BINARY;
const std::string kSource = RINGLAB_TEST_SOURCE_DIR;
const std::string kLab03 = kSource + "/exercises/labs/03-ring-forward";

std::string read(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

fs::path scratch(const std::string& name) {
  const fs::path dir = fs::path(RINGLAB_TEST_BROKEN_DIR) / "integrity" / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

fs::path write(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

using Graded = ringlab::test::GradedReport;

Graded grade(const std::string& lab, const std::string& file, const std::vector<std::string>& extra = {}) {
  return ringlab::test::grade_json(kBinary, lab, file, extra);
}

// Refused: exit 1, nothing compiled or run, one line naming `what`.
void refused(const fs::path& file, const std::string& what) {
  INFO(file.string() << "\n" << read(file));
  const Graded g = grade("03-ring-forward", file.string(), {"--only", "p1"});
  INFO(g.report.dump(2));
  CHECK(g.status == 1);
  CHECK(g.report["compiled"] == false);
  const std::string refusal = g.report["refusal"];
  CHECK(refusal.rfind("refused: ", 0) == 0);
  CHECK(refusal.find('\n') == std::string::npos);
  CHECK(refusal.find(what) != std::string::npos);
  CHECK(g.criterion("p1")["status"] == "not-run");
  CHECK(g.report["score"]["correctness_passed"] == 0);
}

// Never found: it does not compile (the hand-out has no such file); score 0.
void not_found(const fs::path& file, const std::string& name) {
  INFO(file.string());
  const Graded g = grade("03-ring-forward", file.string(), {"--only", "p1"});
  CHECK(g.status == 1);
  CHECK(g.report["compiled"] == false);
  CHECK(g.report["refusal"] == "");
  CHECK(g.report["compile_output"].get<std::string>().find(name + ": No such file") != std::string::npos);
  CHECK(g.report["score"]["correctness_passed"] == 0);
}

std::string solution_with(const std::string& before) { return before + read(kLab03 + "/solution.cpp"); }

}  // namespace

TEST_CASE("integrity: a submission compiles against the hand-out's headers only", "[exercises][grader][integrity]") {
  const fs::path dir = scratch("includes");
  const std::string solution = kLab03 + "/solution.cpp";
  // The issue's file: it scored 14/14 when the lab's folder was on the include path.
  not_found(write(dir / "plain" / "cheat.cpp", "#include \"solution.cpp\"\n"), "solution.cpp");
  // include_next reaches only the folders after the one a file was found in: the hand-out's.
  not_found(write(dir / "next" / "cheat.cpp", "#include_next \"solution.cpp\"\n"), "solution.cpp");
  refused(write(dir / "absolute" / "cheat.cpp", "#include \"" + solution + "\"\n"), "one of the course's own files");
  write(dir / "up" / "ring.cpp", read(solution));
  write(dir / "up" / "solution.cpp", read(solution));
  refused(write(dir / "up" / "sub" / "cheat.cpp", "#include \"../solution.cpp\"\n"), "one of the course's own files");
  refused(write(dir / "up" / "sub" / "cheat2.cpp", "#include \"../ring.cpp\"\n"),
          "neither one of the hand-out's headers nor a file next to your submission");
  refused(write(dir / "macro" / "cheat.cpp",
                "#define STR(x) #x\n#define AT(d) STR(d/exercises/labs/03-ring-forward/solution.cpp)\n"
                "#include AT(" +
                    kSource + ")\n"),
          "one of the course's own files");
  fs::create_directories(dir / "link");
  fs::create_symlink(solution, dir / "link" / "merge.hpp");
  refused(write(dir / "link" / "cheat.cpp", "#include \"merge.hpp\"\n"), "one of the course's own files");
  refused(write(dir / "probe" / "cheat.cpp", "#if __has_include(\"" + solution + "\")\n#include \"" + solution +
                                                 "\"\n#else\n#include \"lab.hpp\"\n#endif\n"),
          "one of the course's own files");
  // .incbin reads a file at assembly time, where no line marker shows it: asm is refused, however spelled.
  refused(write(dir / "asm" / "cheat.cpp", solution_with("asm(\".incbin \\\"" + solution + "\\\"\");\n")),
          "inline assembly (asm)");
  refused(
      write(dir / "asm" / "cheat2.cpp",
            solution_with("#define GLUE(a, b) a##b\nGLUE(__as, m__)(\".inc\" \"bin \\\"" + solution + "\\\"\");\n")),
      "inline assembly (__asm__)");
  // What is not refused: a probe alone tells whether a file exists, never what it holds.
  const Graded probe = grade("03-ring-forward",
                             write(dir / "probe" / "ok.cpp", solution_with("#if __has_include(\"" + solution +
                                                                           "\")\nstatic int probed = 1;\n#endif\n"))
                                 .string(),
                             {"--only", "p1"});
  CHECK(probe.report["compiled"] == true);
}

TEST_CASE("integrity: a forged line marker cannot hide code from the check", "[exercises][grader][integrity]") {
  const fs::path dir = scratch("lines");
  const std::string harness = kLab03 + "/harness.cpp";
  const std::string incbin = "asm(\".incbin \\\"" + harness + "\\\"\");\n";
  // The reviewer's file: the asm looked like a line of the compiler's own <vector>.
  refused(write(dir / "line" / "cheat.cpp",
                solution_with("#line 1 \"/usr/include/c++/12/vector\"\n" + incbin + "#line 9 \"cheat.cpp\"\n")),
          "a line directive (#line) in cheat.cpp");
  // GNU's marker form, a digraph, a comment and a continuation between # and the number.
  refused(write(dir / "gnu" / "cheat.cpp", solution_with("# 1 \"/usr/include/c++/12/vector\" 1 3\n" + incbin)),
          "a line directive");
  refused(write(dir / "digraph" / "cheat.cpp", solution_with("%: /* */ line 1 \"/usr/include/stdio.h\"\n" + incbin)),
          "a line directive");
  refused(write(dir / "spliced" / "cheat.cpp", solution_with("#\\\n 7 \"/usr/include/stdio.h\"\n" + incbin)),
          "a line directive");
  // In a header of the student's own, which the compiler's list of opened files names.
  write(dir / "header" / "mine.hpp", "#line 1 \"/usr/include/c++/12/vector\"\n" + incbin);
  refused(write(dir / "header" / "cheat.cpp", solution_with("#include \"mine.hpp\"\n")),
          "a line directive (#line) in mine.hpp");
  // The negative control: the same asm without the forged marker is refused as assembly, and a
  // file that only mentions #line in a string compiles.
  refused(write(dir / "plain" / "cheat.cpp", solution_with(incbin)), "inline assembly (asm)");
  const Graded ok =
      grade("03-ring-forward",
            write(dir / "ok" / "ok.cpp", solution_with("static const char* note = \"#line 1\";\n")).string(),
            {"--only", "p1"});
  CHECK(ok.report["compiled"] == true);
}

TEST_CASE("integrity: the library's own answers are refused by name", "[exercises][grader][integrity]") {
  const fs::path dir = scratch("library");
  const std::string lab01 = kSource + "/exercises/labs/01-softmax-merge";
  auto refused_in = [&](const std::string& lab, const fs::path& file, const std::string& what) {
    INFO(file.string() << "\n" << read(file));
    const Graded g = grade(lab, file.string());
    INFO(g.report.dump(2));
    CHECK(g.status == 1);
    CHECK(g.report["compiled"] == false);
    const std::string refusal = g.report["refusal"];
    CHECK(refusal.rfind("refused: ", 0) == 0);
    CHECK(refusal.find(what) != std::string::npos);
    CHECK(g.report["score"]["correctness_passed"] == 0);
  };
  const std::string lab01_solution = read(lab01 + "/solution.cpp");
  auto lab01_with = [&](const std::string& from, const std::string& to) {
    std::string text = lab01_solution;
    const size_t at = text.find(from);
    REQUIRE(at != std::string::npos);
    return text.replace(at, from.size(), to);
  };
  // Lab 01 done by SoftmaxState's own members, however reached.
  const std::string merge_body = "State merge(const State& a, const State& b) {";
  refused_in("01-softmax-merge",
             write(dir / "member" / "m.cpp",
                   lab01_with(merge_body, merge_body + "\n  { State r = a; r.merge(b); return r; }")),
             "names merge");
  refused_in(
      "01-softmax-merge",
      write(dir / "pointer" / "m.cpp",
            lab01_with(merge_body, merge_body + "\n  { State r = a; (r.*&SoftmaxState<float>::merge)(b); return r; }")),
      "names merge");
  refused_in("01-softmax-merge",
             write(dir / "macro" / "m.cpp",
                   "#define GLUE(a, b) a##b\n" +
                       lab01_with(merge_body, merge_body + "\n  { State r = a; r.GLUE(mer, ge)(b); return r; }")),
             "names merge");
  // Lab 03 with exact attention declared by hand (no hand-out header declares it).
  refused_in("03-ring-forward",
             write(dir / "declared" / "r.cpp",
                   "namespace ringlab { template <class T> struct Tensor; }\n"
                   "namespace ringlab { void exact_attention(); }\n" +
                       read(kLab03 + "/solution.cpp")),
             "names exact_attention");
  // The negative control: the student's own free merge and a call of it, qualified by the lab's
  // namespace, compile and pass.
  const Graded own = grade(
      "01-softmax-merge",
      write(dir / "own" / "m.cpp", lab01_solution + "\nnamespace ringlab::lab01 {\n"
                                                    "State twice(const State& a) { return lab01::merge(a, a); }\n}\n")
          .string());
  INFO(own.report.dump(2));
  CHECK(own.report["compiled"] == true);
  CHECK(own.report["score"]["correctness_passed"] == own.report["score"]["correctness_total"]);
}

TEST_CASE("integrity: a forged verdict is not believed (the judge holds none of the submission)",
          "[exercises][grader][integrity]") {
  // A private cache, so that the binaries built for this grade can be found below.
  const fs::path dir = scratch("forged");
  setenv("RINGLAB_GRADE_CACHE", (dir / "cache").c_str(), 1);
  const auto run =
      run_binary(kBinary, {"grade", "03", RINGLAB_TEST_FIXTURES "/lab03_forged_verdict.cpp", "--json"}, 600);
  setenv("RINGLAB_GRADE_CACHE", RINGLAB_GRADE_CACHE_DIR, 1);
  INFO(run.out << run.err);
  nlohmann::json report;
  REQUIRE_NOTHROW(report = nlohmann::json::parse(run.out));
  CHECK(run.status == 1);
  CHECK(report["compiled"] == true);
  CHECK(report["score"]["correctness_passed"] == 1);  // "compiles" only
  int judged = 0;
  for (const auto& c : report["criteria"]) {
    if (c["id"] == "compiles" || c["status"] == "skipped") continue;
    CHECK(c["status"] == "failed");
    CHECK(c["judged"] == "outside");
    CHECK(c["message"].get<std::string>().find("the process running your code") != std::string::npos);
    ++judged;
  }
  CHECK(judged >= 8);
  // The negative control: the submission's own binary, asked in one process as lab binaries used
  // to be, reports the forged pass. The cache holds it and the judge (the starter, which does not).
  int forged = 0, binaries = 0;
  for (const auto& entry : fs::recursive_directory_iterator(dir / "cache")) {
    if (entry.path().filename() != "lab") continue;
    ++binaries;
    const fs::path result = dir / ("result" + std::to_string(binaries) + ".json");
    run_binary(entry.path().string(), {"--run", "p2", "--result", result.string()}, 60);
    const std::string text = read(result);
    INFO(entry.path().string() << ": " << text);
    REQUIRE(!text.empty());
    forged += nlohmann::json::parse(text)["passed"] == true ? 1 : 0;
  }
  CHECK(binaries == 2);
  CHECK(forged == 1);
}

namespace {

// `ringlab grade ARGS... --json` with the cache the caller set (RINGLAB_GRADE_CACHE).
Graded grade_with_cache(std::vector<std::string> args) {
  args.insert(args.begin(), "grade");
  args.emplace_back("--json");
  const auto run = run_binary(kBinary, args, 600);
  Graded g;
  g.status = run.status;
  g.err = run.err;
  INFO(args[1] << " " << args[2] << "\n" << run.err);
  REQUIRE_NOTHROW(g.report = nlohmann::json::parse(run.out));
  return g;
}

int lines_with(const std::string& text, const std::string& part) {
  int count = 0;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) count += line.find(part) != std::string::npos ? 1 : 0;
  return count;
}

const std::string kUnsandboxed = "warning: the submission runs as you (no --run-as), so it can tamper with the grader";

}  // namespace

TEST_CASE("integrity: a submission that replaces the cached judges scores 0 and poisons no later grade",
          "[exercises][grader][integrity]") {
  // A private cache: the submission rewrites every binary in it.
  const fs::path dir = scratch("poison");
  setenv("RINGLAB_GRADE_CACHE", (dir / "cache").c_str(), 1);
  // Another lab's binaries there first: a poisoner reaches every lab's judge, not only its own.
  const Graded lab01 = grade_with_cache({"01", "starter"});
  CHECK(lab01.status == 1);
  CHECK(lines_with(lab01.err, kUnsandboxed) == 1);  // one warning line: it ran the submission as you
  // A student's own text report is spared it (no grading pipeline reads it).
  CHECK(lines_with(run_binary(kBinary, {"grade", "01", "starter"}, 600).err, kUnsandboxed) == 0);

  const Graded poison = grade_with_cache({"03", RINGLAB_TEST_FIXTURES "/lab03_poison_cache.cpp"});
  INFO(poison.report.dump(2));
  CHECK(poison.status == 1);
  CHECK(poison.report["compiled"] == true);
  CHECK(poison.report["score"]["correctness_passed"] == 1);  // "compiles" only
  CHECK(poison.report["score"]["performance_passed"] == 0);
  CHECK(lines_with(poison.err, kUnsandboxed) == 1);
  int zeroed = 0;
  for (const auto& c : poison.report["criteria"]) {
    if (c["id"] == "compiles") continue;
    CHECK(c["status"] != "passed");
    CHECK(c["message"].get<std::string>().find("the submission modified the grader's files") != std::string::npos);
    ++zeroed;
  }
  CHECK(zeroed >= 8);
  // What it changed is gone: no cached binary is a script.
  for (const auto& entry : fs::recursive_directory_iterator(dir / "cache")) {
    if (entry.path().filename() != "lab") continue;
    INFO(entry.path().string());
    CHECK(read(entry.path()).rfind("#!", 0) != 0);
  }
  // Later grades with the same cache judge as before: the starters still fail.
  const Graded starter = grade_with_cache({"03", "starter", "--only", "p2"});
  CHECK(starter.status == 1);
  CHECK(starter.criterion("p2")["status"] == "failed");
  const Graded lab01_after = grade_with_cache({"01", "starter"});
  CHECK(lab01_after.status == 1);
  CHECK(lab01_after.report["score"] == lab01.report["score"]);
  setenv("RINGLAB_GRADE_CACHE", RINGLAB_GRADE_CACHE_DIR, 1);
}

TEST_CASE("integrity: a process the submission leaves behind with setsid() is killed and fails its criterion",
          "[exercises][grader][integrity]") {
  const fs::path dir = scratch("lingering");
  const fs::path flag = dir / "outlived-the-grader";
  setenv("RINGLAB_TEST_LINGER_FLAG", flag.c_str(), 1);
  // On criterion p2, a grandchild in a session of its own (out of the group the grader kills), its
  // parent gone at once: only a child subreaper's sweep reaches it. Alive 2 s later, it leaves a flag.
  const fs::path file = write(dir / "linger.cpp", solution_with(R"(#include <unistd.h>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
namespace {
struct Linger {
  Linger() {
    std::ifstream in("/proc/self/cmdline");
    bool p2 = false, student = false;
    for (std::string arg; std::getline(in, arg, '\0');) p2 |= arg == "p2", student |= arg == "--student";
    const char* flag = std::getenv("RINGLAB_TEST_LINGER_FLAG");
    if (!p2 || !student || !flag || fork() != 0) return;
    setsid();
    if (fork() == 0) {
      sleep(2);
      std::ofstream(flag) << "alive\n";
    }
    _exit(0);
  }
} linger;
}  // namespace
)"));
  const Graded g = grade("03-ring-forward", file.string(), {"--only", "p1", "--only", "p2"});
  unsetenv("RINGLAB_TEST_LINGER_FLAG");
  INFO(g.report.dump(2));
  CHECK(g.criterion("p1")["status"] == "passed");  // the compiler and the judge were left alone
  CHECK(g.criterion("p2")["status"] == "failed");
  CHECK(g.criterion("p2")["message"].get<std::string>().find("left 1 process running after it ended (killed)") !=
        std::string::npos);
  std::this_thread::sleep_for(std::chrono::seconds(3));
  CHECK_FALSE(fs::exists(flag));
}

namespace {

// Whether `uid`:`gid` (no supplementary groups) can read `path`: asked from a process that is it.
bool readable_as(int uid, int gid, const std::string& path) {
  const pid_t child = fork();
  if (child == 0) {
    const bool switched = setgroups(0, nullptr) == 0 && setresgid(gid, gid, gid) == 0 && setresuid(uid, uid, uid) == 0;
    _exit(switched && access(path.c_str(), R_OK) == 0 ? 0 : 1);
  }
  int status = 0;
  waitpid(child, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

}  // namespace

TEST_CASE("integrity: no grading under --run-as while the sandbox's user can read the lab's answers",
          "[exercises][grader][integrity]") {
  if (geteuid() != 0) {
    WARN("skipped: --run-as needs root");
    return;
  }
  // A uid with no account, so that nothing else runs as it (the grader kills its processes).
  const int uid = 61997;
  const std::string user = std::to_string(uid) + ":" + std::to_string(uid);
  const fs::path dir = scratch("sandbox-answers");
  fs::permissions(dir, fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec);
  setenv("RINGLAB_GRADE_CACHE", (dir / "cache").c_str(), 1);
  // A file that fails when it can read the lab's solution (as a file that runs the solution would pass).
  const fs::path file = write(dir / "reader.cpp", solution_with(R"(#include <cstdlib>
#include <fstream>
#include <string>
namespace {
struct Reader {
  Reader() {
    const char* source = std::getenv("RINGLAB_LAB_SOURCE_DIR");
    if (source && std::ifstream(std::string(source) + "/exercises/labs/03-ring-forward/solution.cpp")) std::_Exit(3);
  }
} reader;
}  // namespace
)"));
  const std::vector<std::string> args{"grade", "03", file.string(), "--run-as", user, "--only", "p1"};
  if (readable_as(uid, uid, kLab03 + "/solution.cpp")) {
    const auto refused = run_binary(kBinary, args, 600);
    INFO(refused.out << refused.err);
    CHECK(refused.status == 2);
    REQUIRE(refused.err_lines().size() == 1);
    CHECK(refused.err.find("can read " + kLab03 + "/solution.cpp") != std::string::npos);
    CHECK(refused.err.find("chmod -R o-rwx " + kSource + "/exercises/labs") != std::string::npos);
    CHECK(refused.out.empty());
  }
  // The positive control: the labs unreadable to others (a private copy mounted over them, in a
  // mount namespace of this test's own), the same grade runs, sandboxed and without the warning,
  // and the submission cannot read the solution.
  if (run_binary("/bin/sh", {"-c", "unshare -m true"}).status != 0) {
    WARN("skipped the positive control: unshare -m is not permitted here");
    setenv("RINGLAB_GRADE_CACHE", RINGLAB_GRADE_CACHE_DIR, 1);
    return;
  }
  const fs::path labs = dir / "labs";
  fs::copy(kSource + "/exercises/labs", labs, fs::copy_options::recursive);
  REQUIRE(run_binary("/bin/chmod", {"-R", "o-rwx", labs.string()}).status == 0);
  std::string command = "mount --bind " + labs.string() + " " + kSource + "/exercises/labs && exec " + kBinary;
  for (const std::string& arg : args) command += " " + arg;
  const auto run = run_binary("/usr/bin/unshare", {"-m", "/bin/sh", "-c", command + " --json"}, 600);
  setenv("RINGLAB_GRADE_CACHE", RINGLAB_GRADE_CACHE_DIR, 1);
  INFO(run.out << run.err);
  CHECK(run.status == 0);
  nlohmann::json report;
  REQUIRE_NOTHROW(report = nlohmann::json::parse(run.out));
  CHECK(report["environment"]["sandbox"] == true);
  for (const auto& c : report["criteria"]) CHECK(c["status"] == "passed");
  CHECK(run.err.find(kUnsandboxed) == std::string::npos);
}

TEST_CASE("integrity: the grade cache is keyed on every header compiled", "[exercises][grader][integrity]") {
  // The merge moved into a header of the student's own, beside the file: a fix there must regrade.
  const fs::path dir = scratch("local-header");
  std::string text = read(kLab03 + "/solution.cpp");
  const size_t begin = text.find("// acc <- acc (+) part");
  const size_t end = text.find("AttentionOutput<float> ring_forward(", begin);  // merge_into ends there
  REQUIRE(begin != std::string::npos);
  REQUIRE(end != std::string::npos);
  const std::string merge = text.substr(begin, end - begin);
  // A token of this run, so that the cache starts cold for these units whatever ran before.
  text.replace(begin, end - begin,
               "#include \"merge.hpp\"\n[[maybe_unused]] const char* kRun = \"" +
                   std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()) + "\";\n");
  write(dir / "ring.cpp", text);
  // Broken: the old state is not rescaled (wa = 1).
  std::string broken = merge;
  const size_t rescale = broken.find("wa * acc.out(b, i, h, d)");
  REQUIRE(rescale != std::string::npos);
  broken.replace(rescale, 2, "1.f");
  write(dir / "merge.hpp", broken);
  const Graded before = grade("03-ring-forward", (dir / "ring.cpp").string(), {"--only", "p2"});
  INFO(before.report.dump(2));
  CHECK(before.report["compiled"] == true);
  CHECK(before.report["cached"] == false);
  CHECK(before.criterion("p2")["status"] == "failed");
  write(dir / "merge.hpp", merge);  // the fix, in the header only
  const Graded after = grade("03-ring-forward", (dir / "ring.cpp").string(), {"--only", "p2"});
  INFO(after.report.dump(2));
  CHECK(after.report["cached"] == false);
  CHECK(after.criterion("p2")["status"] == "passed");
  const Graded again = grade("03-ring-forward", (dir / "ring.cpp").string(), {"--only", "p2"});
  CHECK(again.report["cached"] == true);  // nothing changed: the cache serves it
}

TEST_CASE("integrity: a compile failure lists every criterion at 0 with the first error",
          "[exercises][grader][integrity]") {
  setenv("RINGLAB_GRADE_CACHE", RINGLAB_GRADE_CACHE_DIR, 1);
  const fs::path dir = scratch("compile-failure");
  const fs::path file = write(dir / "typo.cpp", "#include \"lab.hpp\"\nint broken = ;\n");
  const std::string results = (dir / "results.json").string();
  const auto run = run_binary(
      kBinary, {"grade", "03-ring-forward", file.string(), "--format", "gradescope", "--output", results}, 600);
  CHECK(run.status == 1);
  const nlohmann::json j = nlohmann::json::parse(read(results));
  const Graded solution = grade("03-ring-forward", "solution");
  CHECK(j["score"] == 0);
  // compiles, plus every criterion the solution is graded on
  REQUIRE(j["tests"].size() == solution.report["criteria"].size());
  double most = 0;
  for (const auto& t : j["tests"]) {
    INFO(t.dump(2));
    CHECK(t["score"] == 0);
    most += t["max_score"].get<double>();
    const std::string output = t["output"];
    if (t["name"].get<std::string>().rfind("compiles", 0) == 0) {
      CHECK(output.find("typo.cpp:2:") != std::string::npos);
    } else {
      CHECK(output.find("not run: the submission did not compile") != std::string::npos);
      CHECK(output.find("first error: typo.cpp:2:14: error:") != std::string::npos);
    }
    // Paths relative to the hand-out and the student's folder: none of the grader's (the
    // reproduce line repeats the file as it was given).
    const std::string shown = output.substr(0, output.find("reproduce: "));
    CHECK(shown.find(RINGLAB_GRADE_CACHE_DIR) == std::string::npos);
    CHECK(shown.find(dir.string()) == std::string::npos);
    CHECK(shown.find("exercises/labs") == std::string::npos);
    CHECK(shown.find("handouts/") == std::string::npos);
  }
  CHECK(most > 0);
  const auto text = run_binary(kBinary, {"grade", "03-ring-forward", file.string()}, 600);
  CHECK(text.out.find("p2             not run") != std::string::npos);
  CHECK(text.out.find("reproduce: ringlab grade 03-ring-forward " + file.string()) != std::string::npos);
  CHECK(text.out.find(RINGLAB_GRADE_CACHE_DIR) == std::string::npos);
  // An empty file links nothing: its first error names what is missing, not collect2's summary.
  const fs::path empty = write(dir / "empty.cpp", "");
  const Graded nothing = grade("03-ring-forward", empty.string(), {"--only", "p1"});
  INFO(nothing.report.dump(2));
  const std::string why = nothing.criterion("p1")["details"].dump();
  CHECK(why.find("undefined reference to") != std::string::npos);
  CHECK(why.find("collect2") == std::string::npos);
}

#ifdef RINGLAB_WITH_LAB07
TEST_CASE("integrity: lab 07 reaches full marks without a GPU (the device criterion is not counted)",
          "[exercises][grader][integrity]") {
  setenv("RINGLAB_GRADE_CACHE", RINGLAB_GRADE_CACHE_DIR, 1);
  const fs::path dir = scratch("lab07");
  const std::string results = (dir / "results.json").string();
  const auto run =
      run_binary(kBinary, {"grade", "07-block-kernel", "solution", "--format", "gradescope", "--output", results}, 600);
  CHECK(run.status == 0);
  const nlohmann::json j = nlohmann::json::parse(read(results));
  double most = 0, device_max = -1;
  std::string device_output;
  for (const auto& t : j["tests"]) {
    most += t["max_score"].get<double>();
    if (t["name"].get<std::string>().rfind("device:", 0) == 0) {
      device_max = t["max_score"];
      device_output = t["output"];
    }
  }
  CHECK(j["score"].get<double>() == most);  // full marks
  CHECK(most > 0);
  const bool gpu = fs::exists("/dev/nvidiactl") || fs::exists("/dev/nvidia0");
  if (!gpu) {
    CHECK(device_max == 0);  // listed, out of nothing
    CHECK(device_output.find("not counted") != std::string::npos);
    const auto text = run_binary(kBinary, {"grade", "07-block-kernel", "solution"}, 600);
    CHECK(text.out.find("(1 not run: needs a GPU, not counted) -- PASSED") != std::string::npos);
  }
  // A kernel that fails the emulated criteria still scores less: the device criterion's absence
  // lowers the maximum, not the bar.
  const auto broken =
      run_binary(kBinary, {"grade", "07-block-kernel", "broken/nan_on_empty", "--format", "gradescope"}, 600);
  const nlohmann::json b = nlohmann::json::parse(broken.out);
  CHECK(b["score"].get<double>() < most);
}
#endif

namespace {

// The paths a README names in backticks: a file with an extension, or a folder ending in '/'.
std::vector<std::string> named_paths(const std::string& readme) {
  static const std::regex path("`([A-Za-z0-9_./-]+(\\.(cpp|hpp|h|cu|cuh|md|patch|py|json)|/))`");
  std::vector<std::string> names;
  for (auto it = std::sregex_iterator(readme.begin(), readme.end(), path); it != std::sregex_iterator(); ++it)
    names.push_back((*it)[1]);
  return names;
}

}  // namespace

TEST_CASE("integrity: every hand-out is self-contained", "[exercises][grader][integrity]") {
  const std::vector<std::string> labs = ringlab::test::labs_in_build(kBinary);
  REQUIRE(labs.size() >= 7);
  for (const std::string& lab : labs) {
    INFO(lab);
    const fs::path dir = scratch("handout-" + lab);
    fs::remove_all(dir);
    REQUIRE(run_binary(kBinary, {"handout", lab, dir.string()}).status == 0);
    const std::string readme = read(dir / "README.md");
    const std::vector<std::string> names = named_paths(readme);
    for (const std::string& name : names) {
      INFO(name);
      CHECK((fs::exists(dir / name) || fs::exists(dir / "include" / name)));
    }
    // Negative control of the scan: the repository's README names files the hand-out lacks.
    const std::vector<std::string> repository = named_paths(read(kSource + "/exercises/labs/" + lab + "/README.md"));
    CHECK(std::any_of(repository.begin(), repository.end(), [&](const std::string& name) {
      return !fs::exists(dir / name) && !fs::exists(dir / "include" / name);
    }));
    // No path of the machine that made it.
    for (const auto& entry : fs::recursive_directory_iterator(dir)) {
      if (!entry.is_regular_file()) continue;
      const std::string text = read(entry.path());
      INFO(entry.path().string());
      CHECK(text.find(kSource) == std::string::npos);
      CHECK(text.find("/usr/local/cuda") == std::string::npos);
    }
  }
}

#ifdef RINGLAB_WITH_LAB07
TEST_CASE("integrity: lab 07's hand-out passes make check without the CUDA toolkit", "[exercises][grader][integrity]") {
  const fs::path dir = scratch("lab07-make") / "lab07";
  REQUIRE(run_binary(kBinary, {"handout", "07-block-kernel", dir.string()}).status == 0);
  // The toolkit hidden: no CUDA folder on any include path (CPATH emptied; the compiler searches
  // none by default). -M lists every header the check reads: none of the toolkit's.
  const std::string make = "env -u CPATH -u CPLUS_INCLUDE_PATH make -s -C " + dir.string();
  const auto check = run_binary("/bin/sh", {"-c", make + " check 2>&1"}, 300);
  INFO(check.out);
  CHECK(check.status == 0);
  const auto deps = run_binary("/bin/sh", {"-c", make + " check CXXFLAGS='-std=c++20 -M' 2>&1"}, 300);
  CHECK(deps.status == 0);
  CHECK(deps.out.find("cuda_bf16.h") != std::string::npos);  // the hand-out's stand-in
  CHECK(deps.out.find("/usr/local/cuda") == std::string::npos);
  CHECK(deps.out.find("/cuda-") == std::string::npos);
  // Negative control: without the stand-ins the same check fails for want of the toolkit.
  fs::remove_all(dir / "include" / "no-cuda");
  const auto bare = run_binary("/bin/sh", {"-c", make + " check 2>&1"}, 300);
  CHECK(bare.status != 0);
  CHECK(bare.out.find("cuda_bf16.h") != std::string::npos);
}
#endif

TEST_CASE("integrity: the hand-outs' CUDA stand-ins convert as the toolkit does", "[exercises][grader][integrity]") {
  auto half = [](unsigned short bits) { return __half2float(__half(__half_raw{bits})); };
  CHECK(half(0x3C00) == 1.0f);
  CHECK(half(0xC000) == -2.0f);
  CHECK(half(0x7BFF) == 65504.0f);                  // the largest finite
  CHECK(half(0x0001) == std::ldexp(1.0f, -24));     // the smallest subnormal
  CHECK(half(0x03FF) == std::ldexp(1023.0f, -24));  // the largest subnormal
  CHECK(half(0x0400) == std::ldexp(1.0f, -14));     // the smallest normal
  CHECK(std::isinf(half(0xFC00)));
  CHECK(half(0xFC00) < 0);
  CHECK(std::isnan(half(0x7E00)));
  CHECK(std::signbit(half(0x8000)));
  auto bf16 = [](unsigned short bits) { return __bfloat162float(__nv_bfloat16(__nv_bfloat16_raw{bits})); };
  CHECK(bf16(0x3F80) == 1.0f);
  CHECK(bf16(0xC040) == -3.0f);
  CHECK(std::isinf(bf16(0x7F80)));
  CHECK(sizeof(__half) == 2);
  CHECK(sizeof(__nv_bfloat16) == 2);
}

TEST_CASE("integrity: kits and the sandbox refuse bad input with one line", "[exercises][grader][integrity]") {
  const fs::path dir = scratch("bad-input");
  write(dir / "taken" / "file.txt", "something\n");
  auto one_line = [](const ringlab::test::BinaryRun& run) {
    INFO(run.err);
    CHECK(run.status == 2);
    CHECK(run.err_lines().size() == 1);
  };
  one_line(run_binary(kBinary, {"autograder", "03", (dir / "taken").string()}));
  CHECK(read(dir / "taken" / "file.txt") == "something\n");
  one_line(run_binary(kBinary, {"autograder", "99-nothing", (dir / "fresh").string()}));
  one_line(run_binary(kBinary, {"student-kit", (dir / "taken").string()}));
  CHECK_FALSE(fs::exists(dir / "fresh"));
  one_line(run_binary(kBinary, {"grade", "03", "solution", "--memory-limit", "100"}));
  one_line(run_binary(kBinary, {"grade", "03", "solution", "--run-as", "no-such-user-of-ringlab"}));
  one_line(run_binary(kBinary, {"grade", "03", "solution", "--run-as", "root"}));
}
