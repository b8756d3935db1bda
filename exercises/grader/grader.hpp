// The grader behind `ringlab grade LAB [FILE]`: compiles a student's file against the lab's
// prebuilt harness, runs every criterion as two processes under a wall-clock limit - the student's
// side and a judge built from the lab's starter, which holds none of the submission and alone
// gives the verdict (exercises/labs/common/harness.hpp) - and
// reports like a course autograder (CMU 11-868's model): per criterion passed / failed / timeout /
// needs-GPU, the observed error against its tolerance, the first diverging (rank, step, block),
// the deadlock report, and the command that reproduces one criterion; performance criteria are
// graded only once every correctness criterion passes.
//
// Nothing a student writes can hang the grader: deadlocks come back from the simulator's watchdog
// inside the criterion, and anything else (an endless loop, a crash) costs that criterion's
// process, killed with its whole group at the limit.
// Sections: [labs] [reports] [grading] [printing]
#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "exercises/grader/process.hpp"

namespace ringlab::grader {

// ---- [labs] ------------------------------------------------------------------------------------

struct LabInfo {
  std::string id;           // "03-ring-forward"
  std::string directory;    // the instructor's lab folder (exercises/labs/03-ring-forward); "" in a kit
  std::string harness;      // the prebuilt harness library
  std::string title;        // the README's first heading
  std::string headers;      // a kit's folder of the hand-out's headers; "" = made from `directory`
  nlohmann::json criteria;  // a kit's listing of the criteria (array); null = list a compiled starter
  std::string judge;        // a kit's copy of the hand-out's starter, which the judge is built from;
                            // "" = the starter `resolve` names
};

// Labs of the source tree this build left out (a GPU lab without the CUDA toolkit's headers):
// id and why.
struct AbsentLab {
  std::string id, reason;
};

// How a submission is compiled and linked.
struct Toolchain {
  std::string compiler;  // a path, or a name looked up in PATH
  std::string compiler_version;
  std::vector<std::string> compile_flags, libraries, link_flags;
};

// Where the grader finds its compiler, labs and headers: this build (build_setup.hpp: the
// instructor's tree, with the labs' own starter, solution and broken versions), or a kit folder
// (kit.hpp: an autograder package or a student distribution, which holds none of them).
struct Setup {
  Toolchain toolchain;
  std::vector<LabInfo> labs;
  std::vector<AbsentLab> absent;
  std::vector<std::string> forbidden;    // folders no submission may include from (the labs' sources)
  std::vector<std::string> environment;  // added to every criterion's environment ("NAME=value")
  bool kit = false;
  std::string command = "ringlab grade";  // how a student runs this grader (reproduce lines)
  std::string sanitize;                   // the sanitizers this build's libraries carry ("" = none)
  // The folder of a lab's hand-out headers (lab.hpp, include/...): what a submission compiles against.
  std::function<std::string(const LabInfo&)> headers;
  // FILE as a user names it: a path, or one of the lab's own files (nullptr in a kit: paths only).
  std::function<std::string(const LabInfo&, const std::string&)> resolve;
  // The lab's answers as files a submission's process must not read: its solution, broken versions
  // and harness, and the copies of them the grader wrote (nullptr in a kit, which holds none).
  // Under --run-as, grade() refuses to run when the sandbox's user can read one.
  std::function<std::vector<std::string>(const LabInfo&)> answers;
};
// The setup grade() uses; install one before grading (ringlab installs build_setup()).
void install_setup(Setup setup);
const Setup& setup();

// The labs of the installed setup, in order.
std::vector<LabInfo> labs();
std::vector<AbsentLab> absent_labs();
// By id, number ("03") or name ("ring-forward"); throws UsageError naming the labs otherwise.
LabInfo find_lab(const std::string& name);
// FILE as given: a path, or (in this build) one of the lab's own files: starter, solution (".cpp"
// optional), or broken/NAME, a negative control: the lab's solution.cpp with broken/NAME.patch
// applied (patch.hpp), written under the grader's cache folder. Empty means the starter. Throws
// UsageError when there is no such file, or when the lab's patch no longer applies to its solution.
std::string resolve_student_file(const LabInfo& lab, const std::string& file);
// Where compiled binaries and hand-out headers are kept: $RINGLAB_GRADE_CACHE, or a folder of the
// system's temporary directory.
std::string cache_root();

// ---- [reports] ---------------------------------------------------------------------------------

// not_run: the submission did not compile, or was refused, so nothing ran.
enum class Status : uint8_t { passed, failed, timeout, needs_gpu, skipped, not_run };
const char* status_name(Status status);

struct Divergence {
  int64_t rank = -1, step = -1, block = -1;
  std::string what;
};

struct CriterionReport {
  std::string id, title;
  bool performance = false;
  Status status = Status::skipped;
  double seconds = 0;
  double limit_seconds = 0;
  std::string message;
  std::string hint;
  double observed_error = -1, tolerance = -1;  // -1: no numeric comparison
  std::optional<Divergence> divergence;
  std::string deadlock;
  std::vector<std::string> details;
  std::string output;     // the tail of what the criterion printed (failures only)
  std::string reproduce;  // the command that runs this criterion alone
  double points = 0;      // what passing it is worth (the lab declares it; "compiles" is worth 0)
  // Where it was judged: "outside" (by a judge process that holds none of the submission, beside
  // the process that runs it), "" (it did not run).
  std::string judged;
};

struct GradeReport {
  std::string lab;
  std::string file;  // as given: a path, or starter / solution / broken/NAME
  bool compiled = false;
  bool cached = false;  // the binary came from the grader's cache
  double compile_seconds = 0;
  std::string compile_command;
  std::string compile_output;  // errors and warnings, paths relative to the hand-out and your folder
  std::string refusal;         // why the submission was not compiled at all ("" when it was)
  std::vector<CriterionReport> criteria;
  nlohmann::json environment;

  int correctness_passed() const;
  int correctness_total() const;
  int performance_passed() const;
  int performance_total() const;
  int needs_gpu() const;  // criteria not run for want of a GPU
  // Compiled, and every criterion that ran passed, none timed out or skipped. A criterion reported
  // needs-GPU did not run: it neither passes nor fails the grade (needs_gpu() counts them).
  bool passed() const;
};

// ---- [grading] ---------------------------------------------------------------------------------

struct GradeOptions {
  std::string lab;
  std::string file;               // see resolve_student_file
  std::vector<std::string> only;  // criterion ids; empty = all
  double timeout_seconds = 0;     // > 0 overrides every criterion's own limit
  bool use_cache = true;
  Sandbox sandbox;  // the criteria (and the listing) run as this user, under these limits
  // Say on standard error when there is no sandbox. The command line says it for the reports a
  // grading pipeline reads (--format json or gradescope), not for a student's own text report.
  bool warn_unsandboxed = true;
};

// Throws UsageError for an unknown lab, file or criterion id, and, under a sandbox, when its user
// can read one of the lab's answers (Setup::answers). Each criterion's process gets the graded
// file's path in RINGLAB_GRADE_SOURCE (a GPU lab's device criterion compiles it with nvcc).
// Without a sandbox the submission runs as the grading user, who owns the grader's cache: grade()
// says so in one warning line on standard error (GradeOptions::warn_unsandboxed), checks after each criterion that the cached
// binaries and hand-outs it found (the judge's among them) are unchanged, and grades a submission
// that changed one 0, removing what it changed. Under a sandbox the cache is not its user's to write.
GradeReport grade(const GradeOptions& options);

// The lab's criteria as its binary lists them (one JSON object each): the hand-out's starter
// compiled and asked. For kits, which carry the list.
nlohmann::json list_lab_criteria(const LabInfo& lab);

// ---- [printing] --------------------------------------------------------------------------------

void print_report(std::ostream& out, const GradeReport& report);
nlohmann::json to_json(const GradeReport& report);
// Gradescope's autograder results.json: "score" (the points of the criteria passed), and per
// criterion a test with name, score, max_score, output and visibility. A criterion that did not
// run scores 0 and says why (performance before correctness passed; every criterion when the
// submission did not compile or was refused); one that needs a GPU where there is none is listed
// with max_score 0: it neither passes nor fails, and the score is out of the others.
nlohmann::json to_gradescope(const GradeReport& report);

}  // namespace ringlab::grader
