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
#include <sstream>
#include <thread>

#include "exercises/grader/grader_config.hpp"
#include "exercises/grader/patch.hpp"
#include "exercises/grader/process.hpp"
#include "exercises/grader/split.hpp"
#include "reference/error.hpp"

namespace ringlab::grader {

namespace fs = std::filesystem;

namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

uint64_t fnv1a(const std::string& text, uint64_t hash = 0xCBF29CE484222325ull) {
  for (unsigned char c : text) hash = (hash ^ c) * 0x100000001B3ull;
  return hash;
}

// Where compiled binaries (and the labs' broken versions, built from their patches) are kept.
std::string cache_root() {
  if (const char* dir = std::getenv("RINGLAB_GRADE_CACHE"); dir && *dir) return dir;
  return (fs::temp_directory_path() / ("ringlab-grade-" + std::to_string(getuid()))).string();
}

}  // namespace

// ---- [labs] ------------------------------------------------------------------------------------

std::vector<LabInfo> labs() {
  std::vector<LabInfo> result;
  for (const std::string& entry : split(config::kLabs, ';')) {
    const size_t eq = entry.find('=');
    if (eq == std::string::npos) continue;
    LabInfo lab;
    lab.id = entry.substr(0, eq);
    lab.harness = entry.substr(eq + 1);
    lab.directory = std::string(config::kSourceDir) + "/exercises/labs/" + lab.id;
    std::ifstream readme(lab.directory + "/README.md");
    for (std::string line; std::getline(readme, line);)
      if (line.rfind("# ", 0) == 0) {
        lab.title = line.substr(2);
        break;
      }
    result.push_back(lab);
  }
  return result;
}

std::vector<AbsentLab> absent_labs() {
  std::vector<AbsentLab> result;
  for (const std::string& entry : split(config::kAbsentLabs, ';')) {
    const size_t eq = entry.find('=');
    if (eq != std::string::npos) result.push_back({entry.substr(0, eq), entry.substr(eq + 1)});
  }
  return result;
}

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
  throw UsageError("unknown lab '" + name + "'; the labs are " + known + " (by id, number or name)");
}

namespace {

// The text of broken/NAME: solution.cpp with broken/NAME.patch applied.
std::string broken_version(const LabInfo& lab, const std::string& name) {
  const std::string patch = lab.directory + "/broken/" + name + ".patch";
  try {
    return apply_patch(read_file(lab.directory + "/solution.cpp"), read_file(patch));
  } catch (const PatchError& e) {
    throw UsageError(patch + " no longer applies to the lab's solution.cpp: " + e.what());
  }
}

// broken/NAME as a file to compile: the patched solution, under the grader's cache folder. Written
// to a fresh name and moved into place, so concurrent graders never read half a file; its path
// stays the same, so the compiled binary is cached like any other file's.
std::string write_broken_version(const LabInfo& lab, const std::string& name) {
  const std::string text = broken_version(lab, name);
  const fs::path folder = fs::path(cache_root()) / "broken" / lab.id;
  const fs::path path = folder / (name + ".cpp");
  if (fs::is_regular_file(path) && read_file(path.string()) == text) return path.string();
  std::error_code error;
  fs::create_directories(folder, error);
  std::string scratch = (folder / (name + ".cpp.XXXXXX")).string();
  const int fd = mkstemp(scratch.data());
  if (fd < 0)
    throw UsageError("cannot write under " + folder.string() + "; set RINGLAB_GRADE_CACHE to a writable folder");
  close(fd);
  std::ofstream(scratch, std::ios::binary) << text;
  fs::permissions(scratch,
                  fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read | fs::perms::others_read,
                  error);  // as a file written by hand: mkstemp made it private
  fs::rename(scratch, path, error);
  if (error) {
    fs::remove(scratch, error);
    throw UsageError("cannot write " + path.string() + "; set RINGLAB_GRADE_CACHE to a writable folder");
  }
  return path.string();
}

// The lab's broken versions: the names of its broken/NAME.patch, sorted.
std::vector<std::string> broken_versions(const LabInfo& lab) {
  std::vector<std::string> names;
  if (fs::is_directory(lab.directory + "/broken"))
    for (const auto& entry : fs::directory_iterator(lab.directory + "/broken"))
      if (entry.path().extension() == ".patch") names.push_back(entry.path().stem().string());
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

std::string resolve_student_file(const LabInfo& lab, const std::string& file) {
  if (file.empty()) return lab.directory + "/starter.cpp";
  if (fs::is_regular_file(file)) return fs::absolute(file).string();
  for (const std::string& candidate : {file, file + ".cpp"}) {
    std::string path = lab.directory + "/" + candidate;
    if (fs::is_regular_file(path)) return path;
  }
  std::string name = file;  // broken/NAME: "broken/", ".cpp" and ".patch" optional
  if (name.starts_with("broken/")) name.erase(0, std::strlen("broken/"));
  for (const std::string suffix : {".cpp", ".patch"})
    if (name.size() > suffix.size() && name.ends_with(suffix)) name.resize(name.size() - suffix.size());
  const std::vector<std::string> broken = broken_versions(lab);
  if (std::find(broken.begin(), broken.end(), name) != broken.end()) return write_broken_version(lab, name);
  std::string known;
  for (const std::string& b : broken) known += ", broken/" + b;
  throw UsageError("no file '" + file + "'; give the path of your .cpp, or one of the lab's own: starter, solution" +
                   known);
}

// ---- [compiling] -------------------------------------------------------------------------------

namespace {

struct Compiled {
  bool ok = false;
  bool cached = false;
  double seconds = 0;
  std::string binary;
  std::string command;  // as shown to the student
  std::string output;
};

std::string file_stamp(const std::string& path) {
  struct stat info {};
  if (stat(path.c_str(), &info) != 0) return path + ":missing";
  return path + ":" + std::to_string(info.st_size) + ":" + std::to_string(info.st_mtime);
}

std::vector<std::string> compile_argv(const LabInfo& lab, const std::string& source, const std::string& binary) {
  std::vector<std::string> argv{config::kCompiler};
  for (const std::string& flag : split(config::kCompileFlags, ';')) argv.push_back(flag);
  argv.push_back("-I" + std::string(config::kSourceDir));
  argv.push_back("-I" + lab.directory);
  argv.push_back(source);
  argv.push_back("-o");
  argv.push_back(binary);
  argv.push_back(lab.harness);
  for (const std::string& library : split(config::kLinkLibraries, ';')) argv.push_back(library);
  for (const std::string& flag : split(config::kLinkFlags, ';')) argv.push_back(flag);
  return argv;
}

std::string shown_command(const std::vector<std::string>& argv) {
  std::string text;
  for (const std::string& a : argv) text += (text.empty() ? "" : " ") + a;
  return text;
}

Compiled compile(const LabInfo& lab, const std::string& source, bool use_cache) {
  Compiled compiled;
  const std::vector<std::string> probe = compile_argv(lab, source, "BINARY");
  compiled.command = shown_command(probe);
  uint64_t key = fnv1a(read_file(source));
  key = fnv1a(compiled.command, key);
  key = fnv1a(file_stamp(lab.harness), key);
  for (const std::string& library : split(config::kLinkLibraries, ';')) key = fnv1a(file_stamp(library), key);
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(key));
  const fs::path root = cache_root();
  const fs::path entry = root / (lab.id + "-" + hex);
  const fs::path binary = entry / "lab";
  std::error_code error;
  if (use_cache && fs::is_regular_file(binary, error)) {
    compiled.ok = compiled.cached = true;
    compiled.binary = binary.string();
    compiled.output = read_file((entry / "compile.log").string());  // the warnings, if any
    return compiled;
  }
  fs::create_directories(root, error);
  // Build in a fresh directory, then move it into place: concurrent graders never see half a binary.
  std::string scratch_template = (root / (lab.id + "-build-XXXXXX")).string();
  if (!mkdtemp(scratch_template.data()))
    throw UsageError("cannot create a build directory under " + root.string() +
                     "; set RINGLAB_GRADE_CACHE to a writable folder");
  const fs::path scratch = scratch_template;
  const ProcessResult run = run_process(compile_argv(lab, source, (scratch / "lab").string()), 300);
  compiled.seconds = run.seconds;
  compiled.output = run.output;
  compiled.ok = !run.timed_out && run.exit_status == 0 && fs::is_regular_file(scratch / "lab");
  if (run.timed_out) compiled.output += "\n(the compiler ran past 300 s and was stopped)";
  if (!compiled.ok) {
    fs::remove_all(scratch, error);
    return compiled;
  }
  if (!use_cache) {
    compiled.binary = (scratch / "lab").string();
    return compiled;
  }
  std::ofstream((scratch / "compile.log").string()) << compiled.output;
  fs::rename(scratch, entry, error);
  if (error) fs::remove_all(scratch, error);  // another grader got there first: use its copy
  compiled.binary = binary.string();
  return compiled;
}

// ---- [criteria] --------------------------------------------------------------------------------

struct Listed {
  std::string id, title;
  double timeout = 20;
  bool performance = false, needs_gpu = false;
  double points = 1;
};

std::vector<Listed> list_criteria(const std::string& binary, std::string& problem) {
  const ProcessResult run = run_process({binary, "--list"}, 30);
  std::vector<Listed> listed;
  if (run.timed_out || run.exit_status != 0) {
    problem = run.timed_out ? "listing the criteria timed out (does a global constructor of your file loop?)"
                            : "listing the criteria failed: " + (run.signal ? signal_text(run.signal) : run.output);
    return listed;
  }
  std::istringstream lines(run.output);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] != '{') continue;
    try {
      const nlohmann::json j = nlohmann::json::parse(line);
      listed.push_back(
          {j.at("id"), j.at("title"), j.at("timeout"), j.at("performance"), j.at("needs_gpu"), j.value("points", 1.0)});
    } catch (const nlohmann::json::exception&) {
      // a line your file printed at start-up; ignore it
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

CriterionReport run_criterion(const Listed& c, const std::string& binary, const std::string& source,
                              const std::string& scratch, double limit) {
  CriterionReport report;
  report.id = c.id;
  report.title = c.title;
  report.performance = c.performance;
  report.limit_seconds = limit;
  const std::string result_file = scratch + "/" + c.id + ".json";
  std::error_code error;
  fs::remove(result_file, error);
  const ProcessResult run = run_process({binary, "--run", c.id, "--result", result_file}, limit,
                                        {"OMP_NUM_THREADS=1", "RINGLAB_GRADE_SOURCE=" + source});
  report.seconds = run.seconds;
  std::string text = read_file(result_file);
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

GradeReport grade(const GradeOptions& options) {
  const LabInfo lab = find_lab(options.lab);
  const std::string source = resolve_student_file(lab, options.file);
  GradeReport report;
  report.lab = lab.id;
  report.file = source;
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  report.environment = {{"ringlab", config::kVersion},
                        {"compiler", config::kCompilerVersion},
                        {"host", host},
                        {"cores", std::thread::hardware_concurrency()},
                        {"gpu", gpu_present()},
                        {"time", static_cast<int64_t>(std::chrono::duration_cast<std::chrono::seconds>(
                                                          std::chrono::system_clock::now().time_since_epoch())
                                                          .count())}};

  const Compiled compiled = compile(lab, source, options.use_cache);
  report.compiled = compiled.ok;
  report.cached = compiled.cached;
  report.compile_seconds = compiled.seconds;
  report.compile_command = compiled.command;
  report.compile_output = compiled.output;
  CriterionReport compiles;
  compiles.id = "compiles";
  compiles.title = "your file compiles and links against the lab";
  compiles.status = compiled.ok ? Status::passed : Status::failed;
  compiles.seconds = compiled.seconds;
  if (!compiled.ok) {
    compiles.message = "compilation failed; the compiler's first lines are below";
    compiles.output = compiled.output;
    compiles.hint = "keep the function signatures of lab.hpp; include \"lab.hpp\"";
  }
  compiles.reproduce = compiled.command;
  report.criteria.push_back(compiles);
  if (!compiled.ok) return report;

  std::string problem;
  const std::vector<Listed> listed = list_criteria(compiled.binary, problem);
  if (!problem.empty()) {
    report.criteria.front().status = Status::failed;
    report.criteria.front().message = problem;
    return report;
  }
  for (const std::string& id : options.only) {
    if (std::none_of(listed.begin(), listed.end(), [&](const Listed& c) { return c.id == id; }) && id != "compiles") {
      std::string known;
      for (const Listed& c : listed) known += (known.empty() ? "" : ", ") + c.id;
      throw UsageError("no criterion '" + id + "' in lab " + lab.id + "; its criteria are " + known);
    }
  }
  std::string scratch_template = (fs::temp_directory_path() / "ringlab-grade-run-XXXXXX").string();
  if (!mkdtemp(scratch_template.data())) throw UsageError("cannot create a temporary directory; check $TMPDIR");
  const bool gpu = gpu_present();
  bool correctness_ok = true;
  const std::string file_argument = quote(options.file.empty() ? "starter" : options.file);
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
    if (c.needs_gpu && !gpu) {
      r.id = c.id, r.title = c.title, r.performance = c.performance;
      r.status = Status::needs_gpu;
      r.message = "needs a GPU; none on this machine";
    } else if (c.performance && !correctness_ok && options.only.empty()) {
      r.id = c.id, r.title = c.title, r.performance = true;
      r.status = Status::skipped;
      r.message = "performance is graded once every correctness criterion passes";
    } else {
      r = run_criterion(c, compiled.binary, source, scratch_template,
                        options.timeout_seconds > 0 ? options.timeout_seconds : c.timeout);
      if (!c.performance && r.status != Status::passed && r.status != Status::needs_gpu) correctness_ok = false;
    }
    r.points = c.points;
    r.reproduce = "ringlab grade " + lab.id + " " + file_argument + " --only " + c.id;
    report.criteria.push_back(r);
  }
  std::error_code error;
  fs::remove_all(scratch_template, error);
  if (!options.use_cache) fs::remove_all(fs::path(compiled.binary).parent_path(), error);
  return report;
}

}  // namespace ringlab::grader
