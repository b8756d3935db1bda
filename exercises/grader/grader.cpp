// The grader: labs, compiling a student's file, running the criteria (grader.hpp).
// Sections: [labs] [compiling] [criteria] [grading]
#include "exercises/grader/grader.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "exercises/grader/process.hpp"
#include "exercises/grader/text.hpp"
#include "exercises/grader/unit_check.hpp"
#include "reference/error.hpp"

namespace ringlab::grader {

namespace fs = std::filesystem;

namespace {

Setup& installed() {
  static Setup setup;
  return setup;
}

}  // namespace

std::string cache_root() {
  if (const char* dir = std::getenv("RINGLAB_GRADE_CACHE"); dir && *dir) return dir;
  return (fs::temp_directory_path() / ("ringlab-grade-" + std::to_string(getuid()))).string();
}

// ---- [labs] ------------------------------------------------------------------------------------

void install_setup(Setup setup) { installed() = std::move(setup); }
const Setup& setup() { return installed(); }

std::vector<LabInfo> labs() { return setup().labs; }
std::vector<AbsentLab> absent_labs() { return setup().absent; }

namespace {

bool names_lab(const std::string& id, const std::string& name) {
  const std::string number = id.substr(0, id.find('-'));
  const std::string words = id.substr(id.find('-') + 1);
  return name == id || name == number || name == words || (name.size() == 1 && "0" + name == number);
}

}  // namespace

LabInfo find_lab(const std::string& name) {
  const std::vector<LabInfo> all = labs();
  for (const LabInfo& lab : all)
    if (names_lab(lab.id, name)) return lab;
  for (const AbsentLab& absent : absent_labs())
    if (names_lab(absent.id, name))
      throw UsageError("lab " + absent.id + " is not in this build (" + absent.reason +
                       "); configure ringlab where the CUDA toolkit is installed");
  std::string known;
  for (const LabInfo& lab : all) known += (known.empty() ? "" : ", ") + lab.id;
  if (all.empty())
    throw UsageError("this grader has no labs; make it again with 'ringlab autograder' or 'ringlab student-kit'");
  throw UsageError("unknown lab '" + name + "'; the labs are " + known + " (by id, number or name)");
}

std::string resolve_student_file(const LabInfo& lab, const std::string& file) {
  if (setup().resolve) return setup().resolve(lab, file);
  if (!file.empty() && fs::is_regular_file(file)) return fs::absolute(file).string();
  throw UsageError(file.empty() ? "grade needs your file: ringlab-grade LAB FILE.cpp"
                                : "no file '" + file + "'; give the path of your .cpp");
}

// ---- [compiling] -------------------------------------------------------------------------------

namespace {

struct Compiled {
  bool ok = false;
  bool cached = false;
  double seconds = 0;
  std::string binary;
  std::string command;  // as shown to the student: relative to the hand-out
  std::string output;   // paths relative to the hand-out and the submission's folder
  std::string refusal;  // the unit check's one line, when it refused the submission
};

std::string file_stamp(const std::string& path) {
  struct stat info {};
  if (stat(path.c_str(), &info) != 0) return path + ":missing";
  return path + ":" + std::to_string(info.st_size) + ":" + std::to_string(info.st_mtime);
}

// The compiler as a path: a bare name is looked up in PATH.
std::string compiler_path() {
  const std::string& name = setup().toolchain.compiler;
  if (name.find('/') != std::string::npos) return name;
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path ? path : "/usr/bin:/bin");
  for (std::string dir; std::getline(dirs, dir, ':');)
    if (!dir.empty() && access((dir + "/" + name).c_str(), X_OK) == 0) return dir + "/" + name;
  throw UsageError("the grader's compiler " + name + " is not installed; install it (apt-get install " + name +
                   ", as the autograder's setup.sh does)");
}

const std::vector<std::string>& system_include_dirs() {
  static const std::vector<std::string> dirs = compiler_include_dirs(compiler_path(), setup().toolchain.compile_flags);
  return dirs;
}

// The -I flags of a submission: the hand-out's folder, its include/ and, for a GPU lab, its
// stand-ins for the CUDA toolkit's type headers (include/no-cuda).
std::vector<std::string> include_flags(const std::string& headers) {
  std::vector<std::string> flags{"-I" + headers, "-I" + headers + "/include"};
  if (fs::is_directory(headers + "/include/no-cuda")) flags.push_back("-I" + headers + "/include/no-cuda");
  return flags;
}

// `text` with every `prefixes` folder cut from the paths in it ("/x/handout/lab.hpp" -> "lab.hpp").
std::string relative_paths(std::string text, const std::vector<std::string>& prefixes) {
  for (const std::string& prefix : prefixes) {
    if (prefix.empty() || prefix == "/") continue;
    const std::string folder = prefix.back() == '/' ? prefix : prefix + "/";
    for (size_t at = text.find(folder); at != std::string::npos; at = text.find(folder, at))
      text.erase(at, folder.size());
  }
  return text;
}

// Makes `binary` runnable by a sandbox's user: every folder from the cache root down traversable.
void open_for_sandbox(const fs::path& entry) {
  std::error_code error;
  for (const fs::path& folder : {fs::path(cache_root()), entry})
    fs::permissions(folder, fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec, error);
}

// Preprocesses the submission against the hand-out's headers, checks the unit (unit_check.hpp),
// and compiles that unit: what was checked is what runs. The cache key is the unit itself (every
// header's content, as compiled), the flags, and the libraries' stamps.
Compiled compile(const LabInfo& lab, const std::string& source, bool use_cache, const std::string& headers,
                 bool for_sandbox) {
  Compiled compiled;
  const Toolchain& tc = setup().toolchain;
  const std::string compiler = compiler_path();
  const std::string own_folder = fs::path(source).parent_path().string();
  std::vector<std::string> prefixes{headers, own_folder};
  for (const std::string& library : tc.libraries) prefixes.push_back(fs::path(library).parent_path().string());
  prefixes.push_back(fs::path(lab.harness).parent_path().string());
  std::string shown = fs::path(compiler).filename().string();
  for (const std::string& flag : tc.compile_flags) shown += " " + flag;
  shown += " -I. -Iinclude" + std::string(fs::is_directory(headers + "/include/no-cuda") ? " -Iinclude/no-cuda" : "") +
           " " + fs::path(source).filename().string() + " (linked with the lab's harness)";
  compiled.command = shown;

  const fs::path root = cache_root();
  std::error_code error;
  fs::create_directories(root, error);
  std::string scratch_template = (root / (lab.id + "-build-XXXXXX")).string();
  if (!mkdtemp(scratch_template.data()))
    throw UsageError("cannot create a build directory under " + root.string() +
                     "; set RINGLAB_GRADE_CACHE to a writable folder");
  const fs::path scratch = scratch_template;
  struct Cleanup {
    fs::path path;
    bool keep = false;
    ~Cleanup() {
      std::error_code e;
      if (!keep) fs::remove_all(path, e);
    }
  } cleanup{scratch};

  // 1. The unit: the submission preprocessed against the hand-out's headers only.
  std::vector<std::string> argv{compiler};
  argv.insert(argv.end(), tc.compile_flags.begin(), tc.compile_flags.end());
  for (const std::string& flag : include_flags(headers)) argv.push_back(flag);
  for (const char* a : {"-E", "-H", "-o"}) argv.emplace_back(a);  // -H: every file it opens, on stderr
  argv.push_back((scratch / "unit.ii").string());
  argv.push_back(source);
  const ProcessResult pre = run_process(argv, 120);
  compiled.seconds = pre.seconds;
  std::string pre_output;  // what the preprocessor said, without -H's list
  const std::vector<std::string> opened = opened_files(pre.output, &pre_output);
  if (pre.timed_out || pre.exit_status != 0) {
    compiled.output = relative_paths(pre_output, prefixes);
    if (pre.timed_out) compiled.output += "\n(the preprocessor ran past 120 s and was stopped)";
    return compiled;
  }
  const std::string unit = read_file((scratch / "unit.ii").string());

  // 2. What it may include.
  UnitRules rules;
  rules.submission = source;
  rules.handout = {headers};
  rules.system = system_include_dirs();
  rules.forbidden = setup().forbidden;
  rules.opened = opened;
  rules.refused = refused_names(read_file(headers + "/lab.hpp"));
  compiled.refusal = check_unit(unit, rules);
  if (!compiled.refusal.empty()) return compiled;

  // 3. The cache.
  uint64_t key = fnv1a(unit);
  for (const std::string& flag : tc.compile_flags) key = fnv1a(flag + ";", key);
  for (const std::string& flag : tc.link_flags) key = fnv1a(flag + ";", key);
  key = fnv1a(file_stamp(lab.harness), key);
  for (const std::string& library : tc.libraries) key = fnv1a(file_stamp(library), key);
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(key));
  const fs::path entry = root / (lab.id + "-" + hex);
  const fs::path binary = entry / "lab";
  if (use_cache && fs::is_regular_file(binary, error)) {
    compiled.ok = compiled.cached = true;
    compiled.binary = binary.string();
    compiled.output = read_file((entry / "compile.log").string());  // the warnings, if any
    if (for_sandbox) open_for_sandbox(entry);
    return compiled;
  }

  // 4. Compile the checked unit and link it with the lab's harness.
  std::vector<std::string> link{compiler};
  link.insert(link.end(), tc.compile_flags.begin(), tc.compile_flags.end());
  link.push_back((scratch / "unit.ii").string());
  link.push_back("-o");
  link.push_back((scratch / "lab").string());
  link.push_back(lab.harness);
  link.insert(link.end(), tc.libraries.begin(), tc.libraries.end());
  link.insert(link.end(), tc.link_flags.begin(), tc.link_flags.end());
  const ProcessResult run = run_process(link, 300);
  compiled.seconds += run.seconds;
  compiled.output = relative_paths(run.output, prefixes);
  compiled.ok = !run.timed_out && run.exit_status == 0 && fs::is_regular_file(scratch / "lab");
  if (run.timed_out) compiled.output += "\n(the compiler ran past 300 s and was stopped)";
  if (!compiled.ok) return compiled;
  fs::remove(scratch / "unit.ii", error);
  if (!use_cache) {
    cleanup.keep = true;
    compiled.binary = (scratch / "lab").string();
    if (for_sandbox) open_for_sandbox(scratch);
    return compiled;
  }
  std::ofstream((scratch / "compile.log").string()) << compiled.output;
  fs::rename(scratch, entry, error);
  if (!error) cleanup.keep = true;  // else another grader got there first: use its copy
  compiled.binary = binary.string();
  if (for_sandbox) open_for_sandbox(entry);
  return compiled;
}

// The compiler's first error line ("my.cpp:12:3: error: ..."), or its first line.
std::string first_error(const std::string& output) {
  std::istringstream lines(output);
  std::string first;
  for (std::string line; std::getline(lines, line);) {
    if (first.empty() && !line.empty()) first = line;
    // The linker's own line names what is missing; its closing "collect2: error: ld returned 1
    // exit status" does not (an empty file's first error).
    if (line.find("undefined reference to") != std::string::npos) return line;
    if (line.find("error:") != std::string::npos || line.find("fatal error") != std::string::npos) return line;
  }
  return first;
}

// ---- [criteria] --------------------------------------------------------------------------------

struct Listed {
  std::string id, title;
  double timeout = 20;
  bool performance = false, needs_gpu = false;
  double points = 1;
};

Listed listed_from(const nlohmann::json& j) {
  return {j.at("id"), j.at("title"), j.at("timeout"), j.at("performance"), j.at("needs_gpu"), j.value("points", 1.0)};
}

// A folder for one sandboxed run, owned by the sandbox's user; "" without a sandbox.
std::string sandbox_folder(const std::string& parent, const Sandbox& sandbox) {
  if (!sandbox.active()) return "";
  std::string folder = parent + "/run-XXXXXX";
  if (!mkdtemp(folder.data()) || chown(folder.c_str(), sandbox.uid, sandbox.gid) != 0)
    throw UsageError("cannot prepare a work folder for the sandbox's user under " + parent +
                     " (the grader must run as root to use --run-as)");
  return folder;
}

// The criteria a judge (the lab's starter linked with its harness: no student code) lists.
std::vector<Listed> list_criteria(const std::string& binary, std::string& problem) {
  const ProcessResult run = run_process({binary, "--list"}, 30);
  std::vector<Listed> listed;
  if (run.timed_out || run.exit_status != 0) {
    problem = run.timed_out ? "listing the criteria timed out"
                            : "listing the criteria failed: " + (run.signal ? signal_text(run.signal) : run.output);
    return listed;
  }
  std::istringstream lines(run.output);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] != '{') continue;
    try {
      listed.push_back(listed_from(nlohmann::json::parse(line)));
    } catch (const nlohmann::json::exception&) {
      // not a criterion's line; ignore it
    }
  }
  if (listed.empty()) problem = "the lab binary listed no criteria";
  return listed;
}

std::string format_seconds(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, seconds < 10 ? "%.1f s" : "%.0f s", seconds);
  return text;
}

bool gpu_present() { return fs::exists("/dev/nvidiactl") || fs::exists("/dev/nvidia0"); }

std::string quote(const std::string& text) {
  if (text.find_first_of(" \t'\"$") == std::string::npos) return text;
  std::string quoted = "'";
  for (char c : text) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

// In a sanitizer build the student's file is instrumented too (RINGLAB_GRADER_COMPILE_FLAGS), so a
// crash ends in the sanitizer's report and exit status 1 (or SIGABRT) instead of SIGSEGV. Returns the
// report's headline ("AddressSanitizer: SEGV on unknown address ..."), or "" when there is none.
std::string sanitizer_headline(const std::string& output) {
  for (const char* marker : {"ERROR: AddressSanitizer: ", "ERROR: LeakSanitizer: ", "WARNING: ThreadSanitizer: ",
                             "ERROR: ThreadSanitizer: ", ": runtime error: "}) {
    const size_t at = output.find(marker);
    if (at == std::string::npos) continue;
    const size_t start = marker[0] == ':' ? output.rfind('\n', at) + 1 : at + std::string(marker).find(' ') + 1;
    return output.substr(start, output.find('\n', at) - start);
  }
  return "";
}

// The verdict of a criterion judged from outside (Listed::isolated): the judge's standard output,
// and the student's side as `run` (what it printed, how it ended). A student's side that ended by
// itself with a signal or a non-zero status fails the criterion, whatever the judge concluded.
std::string judged_verdict(const std::string& student, const std::string& judge, const Listed& c, double limit,
                           const std::vector<std::string>& environment, const Sandbox& sandbox, ProcessResult& run) {
  JudgedResult judged = run_judged({student, "--run", c.id, "--student", "3"}, {judge, "--run", c.id, "--judge", "3"},
                                   limit, environment, 64 * 1024, sandbox);
  run = judged.student;
  if (judged.student_killed) run.exit_status = 0, run.signal = 0;  // stopped by the grader once judged
  if (run.timed_out) return "";
  if (run.signal || run.exit_status != 0) return "";  // reported from `run` below, as a crash or an exit
  if (judged.judge.exit_status != 0 || judged.judge.output.empty()) {
    nlohmann::json failed = {
        {"passed", false},
        {"message", "the judge could not finish (" +
                        (judged.judge.signal ? signal_text(judged.judge.signal)
                                             : "status " + std::to_string(judged.judge.exit_status)) +
                        "): " + judged.judge_errors.substr(0, 400)}};
    return failed.dump();
  }
  return judged.judge.output;
}

CriterionReport run_criterion(const Listed& c, const std::string& binary, const std::string& judge,
                              const std::string& source, const std::string& headers, const std::string& scratch,
                              double limit, Sandbox sandbox) {
  CriterionReport report;
  report.id = c.id;
  report.title = c.title;
  report.performance = c.performance;
  report.limit_seconds = limit;
  // Under a sandbox, a fresh folder of the student's user for each criterion: nothing one
  // criterion's process leaves there can stand for the next one's result.
  sandbox.directory = sandbox_folder(scratch, sandbox);
  std::vector<std::string> environment{"OMP_NUM_THREADS=1", "RINGLAB_GRADE_SOURCE=" + source,
                                       "RINGLAB_LAB_HEADERS=" + headers};
  environment.insert(environment.end(), setup().environment.begin(), setup().environment.end());
  ProcessResult run;  // the student's side
  const std::string text = judged_verdict(binary, judge, c, limit, environment, sandbox, run);
  report.seconds = run.seconds;
  report.judged = "outside";
  if (run.timed_out) {
    report.status = Status::timeout;
    report.message = "still running after " + format_seconds(limit) +
                     ": killed with its whole process group "
                     "(an endless loop, or a wait the watchdog cannot see, such as polling test() forever)";
  } else if (!text.empty()) {
    try {
      const nlohmann::json j = nlohmann::json::parse(text);
      report.status = j.at("passed").get<bool>() ? Status::passed : Status::failed;
      report.message = j.value("message", "");
      report.hint = j.value("hint", "");
      report.details = j.value("details", std::vector<std::string>{});
      if (j.contains("observed_error")) {
        report.observed_error = j["observed_error"].is_number() ? j["observed_error"].get<double>() : INFINITY;
        report.tolerance = j.value("tolerance", -1.0);
      }
      if (j.contains("divergence")) {
        const auto& d = j["divergence"];
        report.divergence = Divergence{d.value("rank", int64_t{-1}), d.value("step", int64_t{-1}),
                                       d.value("block", int64_t{-1}), d.value("what", std::string())};
      }
      report.deadlock = j.value("deadlock", "");
    } catch (const nlohmann::json::exception& e) {
      report.status = Status::failed;
      report.message = std::string("the criterion's result could not be read: ") + e.what();
    }
  } else if (const std::string found = sanitizer_headline(run.output); !found.empty()) {
    // Before the signal: with abort_on_error the sanitizer ends the process with SIGABRT.
    report.status = Status::failed;
    report.message = found.find("SEGV on") != std::string::npos ? "crashed with SIGSEGV (" + found + ")"
                                                                : "stopped by a sanitizer: " + found;
  } else if (run.signal) {
    report.status = Status::failed;
    report.message = "crashed with " + signal_text(run.signal);
  } else {
    report.status = Status::failed;
    report.message = "exited with status " + std::to_string(run.exit_status) + " before reporting a result";
  }
  if (sandbox.memory_bytes > 0 && report.status == Status::failed &&
      (report.message.find("bad_alloc") != std::string::npos || run.output.find("bad_alloc") != std::string::npos ||
       run.output.find("out of memory") != std::string::npos)) {
    report.details.insert(report.details.begin(), "(was: " + report.message + ")");
    report.message =
        "ran out of memory: the limit is " + std::to_string(sandbox.memory_bytes >> 20) + " MiB per criterion";
  }
  if (run.lingering > 0) {
    if (!report.message.empty()) report.details.insert(report.details.begin(), "(and: " + report.message + ")");
    report.status = Status::failed;
    report.message = "left " + std::to_string(run.lingering) + (run.lingering == 1 ? " process" : " processes") +
                     " running after it ended (killed): a submission must not outlive its test";
  }
  if (report.status != Status::passed) report.output = run.output;
  return report;
}

}  // namespace

// ---- [grading] ---------------------------------------------------------------------------------

int GradeReport::correctness_passed() const {
  return static_cast<int>(std::count_if(criteria.begin(), criteria.end(),
                                        [](const auto& c) { return !c.performance && c.status == Status::passed; }));
}
int GradeReport::correctness_total() const {
  return static_cast<int>(
      std::count_if(criteria.begin(), criteria.end(), [](const auto& c) { return !c.performance; }));
}
int GradeReport::performance_passed() const {
  return static_cast<int>(std::count_if(criteria.begin(), criteria.end(),
                                        [](const auto& c) { return c.performance && c.status == Status::passed; }));
}
int GradeReport::performance_total() const {
  return static_cast<int>(std::count_if(criteria.begin(), criteria.end(), [](const auto& c) { return c.performance; }));
}
int GradeReport::needs_gpu() const {
  return static_cast<int>(
      std::count_if(criteria.begin(), criteria.end(), [](const auto& c) { return c.status == Status::needs_gpu; }));
}
bool GradeReport::passed() const {
  if (!compiled || criteria.empty()) return false;
  return std::all_of(criteria.begin(), criteria.end(),
                     [](const auto& c) { return c.status == Status::passed || c.status == Status::needs_gpu; });
}

namespace {

// The lab's criteria when the submission gave none to ask: a kit's listing, or the lab's starter
// compiled and listed (cached like any file).
std::vector<Listed> lab_listing(const LabInfo& lab, const std::string& headers) {
  std::vector<Listed> listed;
  if (lab.criteria.is_array()) {
    for (const nlohmann::json& j : lab.criteria) listed.push_back(listed_from(j));
    return listed;
  }
  const std::string file = setup().resolve ? setup().resolve(lab, "") : headers + "/starter.cpp";
  const Compiled starter = compile(lab, file, true, headers, false);
  if (!starter.ok) return listed;
  std::string problem;
  return list_criteria(starter.binary, problem);
}

// Every criterion at 0, not run, when there is no binary to run them with.
void not_run(GradeReport& report, const LabInfo& lab, const std::string& headers, const std::string& why,
             const std::string& detail, const std::vector<std::string>& only) {
  for (const Listed& c : lab_listing(lab, headers)) {
    if (!only.empty() && std::find(only.begin(), only.end(), c.id) == only.end()) continue;
    CriterionReport r;
    r.id = c.id, r.title = c.title, r.performance = c.performance, r.points = c.points;
    r.status = Status::not_run;
    r.message = why;
    if (!detail.empty()) r.details.push_back(detail);
    report.criteria.push_back(r);
  }
}

// The size and 64-bit FNV-1a of a file's bytes ("" when it cannot be read).
std::string file_digest(const std::string& path) {
  if (!std::ifstream(path, std::ios::binary)) return "";
  const std::string bytes = read_file(path);
  char text[40];
  std::snprintf(text, sizeof text, "%zu:%016llx", bytes.size(), static_cast<unsigned long long>(fnv1a(bytes)));
  return text;
}

// What a later grading trusts in the cache without compiling it again: each cached build's binary
// (ENTRY/lab) and the hand-outs' headers (handouts/LAB-KEY/...). A submission that runs as the
// grading user can write them. A binary is known by its inode, size and times (nothing else
// changes one; a rewrite or a rename over it does), a header by its bytes (two graders writing the
// same hand-out at once give the same bytes). Each with the cache entry that holds it.
struct CachedFile {
  std::string path, entry, digest;
  struct stat info {};
};

std::vector<CachedFile> trusted_cache_files() {
  std::vector<CachedFile> files;
  std::error_code error;
  const fs::path root = cache_root();
  for (const auto& entry : fs::directory_iterator(root, error)) {
    const std::string name = entry.path().filename().string();
    if (!entry.is_directory(error) || name == "lab-files" || name == "broken" ||
        name.find("-build-") != std::string::npos)
      continue;  // the lab's own files are written again at each use; a build folder is one grader's
    if (name == "handouts") {
      for (const auto& handout : fs::directory_iterator(entry.path(), error)) {
        if (!handout.is_directory(error)) continue;
        for (const auto& file : fs::recursive_directory_iterator(handout.path(), error))
          if (file.is_regular_file(error))
            files.push_back({file.path().string(), handout.path().string(), file_digest(file.path().string())});
      }
      continue;
    }
    CachedFile binary{(entry.path() / "lab").string(), entry.path().string(), ""};
    if (lstat(binary.path.c_str(), &binary.info) == 0) files.push_back(binary);
  }
  return files;
}

// The entries of `before` whose file changed since (one removed meanwhile does not count: that
// poisons nothing, and a grader removes its own).
std::vector<std::string> changed_entries(const std::vector<CachedFile>& before) {
  std::vector<std::string> changed;
  for (const CachedFile& file : before) {
    struct stat now {};
    if (lstat(file.path.c_str(), &now) != 0) continue;
    const bool same =
        file.digest.empty()
            ? now.st_dev == file.info.st_dev && now.st_ino == file.info.st_ino && now.st_size == file.info.st_size &&
                  now.st_mtim.tv_sec == file.info.st_mtim.tv_sec && now.st_mtim.tv_nsec == file.info.st_mtim.tv_nsec &&
                  now.st_ctim.tv_sec == file.info.st_ctim.tv_sec && now.st_ctim.tv_nsec == file.info.st_ctim.tv_nsec
            : file_digest(file.path) == file.digest;
    if (!same && std::find(changed.begin(), changed.end(), file.entry) == changed.end()) changed.push_back(file.entry);
  }
  return changed;
}

// Removes a cache entry (a folder under the cache root, never the root itself).
void remove_cache_entry(const std::string& entry) {
  const fs::path root = fs::weakly_canonical(cache_root());
  const fs::path path = fs::weakly_canonical(entry);
  const std::string inside = path.lexically_relative(root).string();
  if (inside.empty() || inside == "." || inside.rfind("..", 0) == 0) return;
  std::error_code error;
  fs::remove_all(path, error);
}

// Under --run-as: refuses (UsageError) when the sandbox's user can read one of the lab's answers.
void check_answers_unreadable(const LabInfo& lab, const Sandbox& sandbox) {
  if (!sandbox.active() || !setup().answers) return;
  const std::string readable = first_readable(sandbox, setup().answers(lab));
  if (readable.empty()) return;
  // The folder whose permissions keep others out: the labs' folder, or the cache's copy of them.
  const fs::path root = cache_root(), path = readable;
  std::string folder = fs::path(lab.directory).parent_path().string();
  if (const std::string inside = path.lexically_relative(root).string(); !inside.empty() && inside.rfind("..", 0) != 0)
    folder = (root / *path.lexically_relative(root).begin()).string();
  const std::string user = sandbox.user.empty() ? std::to_string(sandbox.uid) : sandbox.user;
  throw UsageError("the sandbox's user " + user + " can read " + readable +
                   ", one of the lab's answers, so a submission could run the solution: make the folder "
                   "unreadable to others (chmod -R o-rwx " +
                   folder +
                   "), or grade with the autograder or a student kit, which hold no answers (ringlab autograder "
                   "LAB DIR)");
}

}  // namespace

nlohmann::json list_lab_criteria(const LabInfo& lab) {
  nlohmann::json list = nlohmann::json::array();
  for (const Listed& c : lab_listing(lab, setup().headers(lab)))
    list.push_back({{"id", c.id},
                    {"title", c.title},
                    {"timeout", c.timeout},
                    {"performance", c.performance},
                    {"needs_gpu", c.needs_gpu},
                    {"points", c.points}});
  if (list.empty())
    throw UsageError("lab " + lab.id + ": its starter does not compile, so its criteria cannot be listed");
  return list;
}

GradeReport grade(const GradeOptions& options) {
  const LabInfo lab = find_lab(options.lab);
  const std::string source = fs::weakly_canonical(fs::absolute(resolve_student_file(lab, options.file))).string();
  GradeReport report;
  report.lab = lab.id;
  report.file = options.file.empty() ? "starter" : options.file;  // as the student named it
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  report.environment = {{"ringlab", setup().kit ? "kit" : "build"},
                        {"compiler", setup().toolchain.compiler_version},
                        {"host", host},
                        {"cores", std::thread::hardware_concurrency()},
                        {"gpu", gpu_present()},
                        {"sandbox", options.sandbox.active()},
                        {"time", static_cast<int64_t>(std::chrono::duration_cast<std::chrono::seconds>(
                                                          std::chrono::system_clock::now().time_since_epoch())
                                                          .count())}};
  if (options.sandbox.active() && geteuid() != 0)
    throw UsageError("--run-as needs the grader to run as root (it switches to that user for each criterion)");
  check_answers_unreadable(lab, options.sandbox);
  const std::string headers = setup().headers(lab);
  const std::string file_argument = quote(options.file.empty() ? "starter" : options.file);

  const Compiled compiled = compile(lab, source, options.use_cache, headers, options.sandbox.active());
  report.compiled = compiled.ok;
  report.cached = compiled.cached;
  report.compile_seconds = compiled.seconds;
  report.compile_command = compiled.command;
  report.compile_output = compiled.output;
  report.refusal = compiled.refusal;
  CriterionReport compiles;
  compiles.id = "compiles";
  compiles.title = "your file compiles and links against the lab";
  compiles.status = compiled.ok ? Status::passed : Status::failed;
  compiles.seconds = compiled.seconds;
  compiles.reproduce = setup().command + " " + lab.id + " " + file_argument;
  if (!compiled.refusal.empty()) {
    compiles.message = compiled.refusal;
  } else if (!compiled.ok) {
    compiles.message = "compilation failed; the compiler's first lines are below";
    compiles.output = compiled.output;
    compiles.hint = "keep the function signatures of lab.hpp; include \"lab.hpp\"";
  }
  report.criteria.push_back(compiles);
  if (!compiled.refusal.empty()) {
    not_run(report, lab, headers, "not run: the submission was refused (see compiles)", "", options.only);
    return report;
  }
  if (!compiled.ok) {
    not_run(report, lab, headers, "not run: the submission did not compile",
            "first error: " + first_error(compiled.output), options.only);
    return report;
  }

  std::string scratch_template = (fs::temp_directory_path() / "ringlab-grade-run-XXXXXX").string();
  if (!mkdtemp(scratch_template.data())) throw UsageError("cannot create a temporary directory; check $TMPDIR");
  std::error_code error;
  if (options.sandbox.active())  // the sandbox's user enters only its own folders below
    fs::permissions(scratch_template, fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec, error);
  // The judge: the lab's starter (trusted code, no line of the submission) linked with the harness.
  // It lists the criteria and judges those its lab runs from outside.
  const std::string starter = !lab.judge.empty() ? lab.judge : setup().resolve(lab, "");
  const Compiled judge = compile(lab, starter, true, headers, false);
  if (!judge.ok) {
    fs::remove_all(scratch_template, error);
    throw UsageError("lab " + lab.id +
                     ": its starter does not compile, so the grader has no judge: " + first_error(judge.output));
  }
  // The judge as it is now, before its first use: checked again before each criterion and after
  // each run of the submission, which (without a sandbox) could replace it.
  const std::string judge_digest = file_digest(judge.binary);
  std::string problem;
  const std::vector<Listed> listed = list_criteria(judge.binary, problem);
  if (!problem.empty()) {
    fs::remove_all(scratch_template, error);
    report.criteria.front().status = Status::failed;
    report.criteria.front().message = problem;
    not_run(report, lab, headers, "not run: the criteria could not be listed (see compiles)", "", options.only);
    return report;
  }
  for (const std::string& id : options.only) {
    if (std::none_of(listed.begin(), listed.end(), [&](const Listed& c) { return c.id == id; }) && id != "compiles") {
      std::string known;
      for (const Listed& c : listed) known += (known.empty() ? "" : ", ") + c.id;
      fs::remove_all(scratch_template, error);
      throw UsageError("no criterion '" + id + "' in lab " + lab.id + "; its criteria are " + known);
    }
  }
  const bool gpu = gpu_present() && !setup().kit;  // a kit has no nvcc nor the device runner
  if (!options.sandbox.active() && options.warn_unsandboxed)
    std::cerr << setup().command
              << ": warning: the submission runs as you (no --run-as), so it can tamper with "
                 "the grader; use --run-as USER (or the autograder) for marks that count\n";
  bool correctness_ok = true;
  std::string tampered;  // what the submission changed of the grader's files ("" = nothing)
  // Correctness first, then performance (graded only when every correctness criterion passed).
  std::vector<Listed> ordered;
  for (const Listed& c : listed)
    if (!c.performance) ordered.push_back(c);
  for (const Listed& c : listed)
    if (c.performance) ordered.push_back(c);
  for (const Listed& c : ordered) {
    const bool selected =
        options.only.empty() || std::find(options.only.begin(), options.only.end(), c.id) != options.only.end();
    if (!selected) continue;
    CriterionReport r;
    if (!tampered.empty()) {
      r.id = c.id, r.title = c.title, r.performance = c.performance;
      r.status = Status::not_run;
      r.message = "not run: " + tampered;
    } else if (c.needs_gpu && !gpu) {
      r.id = c.id, r.title = c.title, r.performance = c.performance;
      r.status = Status::needs_gpu;
      r.message = setup().kit ? "needs a GPU and the CUDA toolkit; not run here, and not counted in the score"
                              : "needs a GPU; none on this machine, so it is not counted in the score";
    } else if (c.performance && !correctness_ok && options.only.empty()) {
      r.id = c.id, r.title = c.title, r.performance = true;
      r.status = Status::skipped;
      r.message = "performance is graded once every correctness criterion passes";
    } else {
      if (file_digest(judge.binary) != judge_digest) {
        // Changed before this submission's code ran again: not by it (another grading that shares the
        // cache). Nothing is graded with a judge that is not the one built.
        remove_cache_entry(fs::path(judge.binary).parent_path().string());
        fs::remove_all(scratch_template, error);
        throw UsageError("the judge's program " + judge.binary +
                         " changed while grading, before this submission ran: a submission graded with this "
                         "cache at the same time changed it (the entry is removed); grade again, with --run-as "
                         "USER for marks that count");
      }
      const std::vector<CachedFile> trusted = trusted_cache_files();
      r = run_criterion(c, compiled.binary, judge.binary, source, headers, scratch_template,
                        options.timeout_seconds > 0 ? options.timeout_seconds : c.timeout, options.sandbox);
      if (!c.performance && r.status != Status::passed && r.status != Status::needs_gpu) correctness_ok = false;
      std::vector<std::string> changed = changed_entries(trusted);
      const bool judge_changed = file_digest(judge.binary) != judge_digest;
      if (judge_changed) changed.push_back(fs::path(judge.binary).parent_path().string());
      if (!changed.empty()) {
        for (const std::string& entry : changed) remove_cache_entry(entry);
        tampered = "the submission modified the grader's files while criterion " + c.id + " ran (" +
                   (judge_changed ? "the judge's program" : "a cached program or hand-out header") +
                   "): it is graded 0, and the grader removed what it changed";
      }
    }
    r.points = c.points;
    r.reproduce = setup().command + " " + lab.id + " " + file_argument + " --only " + c.id;
    report.criteria.push_back(r);
  }
  if (!tampered.empty()) {
    // 0 for every criterion: what passed before the change was judged by what the submission could reach.
    for (CriterionReport& r : report.criteria) {
      const bool ran = r.status == Status::passed || r.status == Status::failed || r.status == Status::timeout;
      if (r.id == "compiles" || !ran) continue;
      r.details.insert(r.details.begin(), "(was: " + (r.message.empty() ? status_name(r.status) : r.message) + ")");
      r.status = Status::failed;
      r.message = tampered;
      r.hint.clear();
      r.divergence.reset();
      r.deadlock.clear();
      r.observed_error = r.tolerance = -1;
    }
  }
  fs::remove_all(scratch_template, error);
  if (!options.use_cache) fs::remove_all(fs::path(compiled.binary).parent_path(), error);
  return report;
}

}  // namespace ringlab::grader
