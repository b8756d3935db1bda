// This build's grader setup (build_setup.hpp).
#include "exercises/grader/build_setup.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "exercises/grader/grader_config.hpp"
#include "exercises/grader/handout.hpp"
#include "exercises/grader/patch.hpp"
#include "exercises/grader/split.hpp"
#include "exercises/grader/text.hpp"
#include "reference/error.hpp"

namespace ringlab::grader {

namespace fs = std::filesystem;

namespace {

// Writes `text` at `path` through a fresh name and a rename: concurrent graders never read half a file.
void write_whole(const fs::path& path, const std::string& text) {
  if (fs::is_regular_file(path) && read_file(path.string()) == text) return;
  std::error_code error;
  fs::create_directories(path.parent_path(), error);
  std::string scratch = path.string() + ".XXXXXX";
  const int fd = mkstemp(scratch.data());
  if (fd < 0)
    throw UsageError("cannot write under " + path.parent_path().string() +
                     "; set RINGLAB_GRADE_CACHE to a writable folder");
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
}

// The lab's hand-out, written once per content under the cache folder; the folder a submission
// compiles against.
std::string handout_headers(const LabInfo& lab) {
  const std::vector<HandoutFile> files = handout_files(lab);
  uint64_t key = 0xCBF29CE484222325ull;
  for (const HandoutFile& file : files) key = fnv1a(file.content, fnv1a(file.path + "\n", key));
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(key));
  const fs::path folder = fs::path(cache_root()) / "handouts" / (lab.id + "-" + hex);
  if (fs::is_regular_file(folder / ".complete")) return folder.string();
  for (const HandoutFile& file : files) write_whole(folder / file.path, file.content);
  write_whole(folder / ".complete", "");
  return folder.string();
}

// The cache's folders of the lab's own files (lab-files/, broken/) hold answers: the grader's
// alone, so that a sandbox's user, which may traverse the cache root, cannot read them.
void keep_private(const fs::path& folder) {
  std::error_code error;
  fs::permissions(folder, fs::perms::owner_all, error);
}

// broken/NAME as a file to compile: the patched solution, under the grader's cache folder.
std::string write_broken_version(const LabInfo& lab, const std::string& name) {
  const std::string patch = lab.directory + "/broken/" + name + ".patch";
  std::string text;
  try {
    text = apply_patch(read_file(lab.directory + "/solution.cpp"), read_file(patch));
  } catch (const PatchError& e) {
    throw UsageError(patch + " no longer applies to the lab's solution.cpp: " + e.what());
  }
  const fs::path path = fs::path(cache_root()) / "broken" / lab.id / (name + ".cpp");
  write_whole(path, text);
  keep_private(fs::path(cache_root()) / "broken");
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

// The lab's own files are graded from a copy under the cache folder, away from the lab's folder:
// a submission is compiled against the hand-out, never next to the solution.
std::string own_copy(const LabInfo& lab, const std::string& name) {
  const fs::path path = fs::path(cache_root()) / "lab-files" / lab.id / name;
  write_whole(path, read_file(lab.directory + "/" + name));
  keep_private(fs::path(cache_root()) / "lab-files");
  return path.string();
}

// What a submission's process must not read: the lab's solution, harness and broken versions (the
// folder and each patch), and the grader's copies of them in the cache (whose folders it makes
// private first: they are its own).
std::vector<std::string> answers(const LabInfo& lab) {
  std::vector<std::string> paths{lab.directory + "/solution.cpp", lab.directory + "/harness.cpp",
                                 lab.directory + "/broken"};
  for (const std::string& name : broken_versions(lab)) paths.push_back(lab.directory + "/broken/" + name + ".patch");
  const fs::path cache = cache_root();
  keep_private(cache / "lab-files");  // a cache written before they were kept private
  keep_private(cache / "broken");
  std::error_code error;
  paths.push_back((cache / "lab-files" / lab.id / "solution.cpp").string());
  for (const auto& entry : fs::directory_iterator(cache / "broken" / lab.id, error))
    paths.push_back(entry.path().string());
  return paths;
}

std::string resolve(const LabInfo& lab, const std::string& file) {
  if (file.empty()) return own_copy(lab, "starter.cpp");
  if (fs::is_regular_file(file)) return fs::absolute(file).string();
  for (const std::string& candidate : {file, file + ".cpp"})
    if ((candidate == "starter.cpp" || candidate == "solution.cpp") &&
        fs::is_regular_file(lab.directory + "/" + candidate))
      return own_copy(lab, candidate);
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

}  // namespace

Setup build_setup() {
  Setup setup;
  setup.toolchain.compiler = config::kCompiler;
  setup.toolchain.compiler_version = config::kCompilerVersion;
  setup.toolchain.compile_flags = split(config::kCompileFlags, ';');
  setup.toolchain.libraries = split(config::kLinkLibraries, ';');
  setup.toolchain.link_flags = split(config::kLinkFlags, ';');
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
    setup.labs.push_back(lab);
  }
  for (const std::string& entry : split(config::kAbsentLabs, ';')) {
    const size_t eq = entry.find('=');
    if (eq != std::string::npos) setup.absent.push_back({entry.substr(0, eq), entry.substr(eq + 1)});
  }
  // The labs' sources: solutions, broken versions and hidden tests live there.
  setup.forbidden = {std::string(config::kSourceDir) + "/exercises", std::string(config::kSourceDir) + "/tests"};
  setup.environment = {std::string("RINGLAB_LAB_SOURCE_DIR=") + config::kSourceDir,
                       std::string("RINGLAB_LAB_NVCC=") + config::kNvcc};
  setup.sanitize = config::kSanitize;
  setup.headers = handout_headers;
  setup.resolve = resolve;
  setup.answers = answers;
  return setup;
}

std::string runner_binary() { return config::kRunner; }

}  // namespace ringlab::grader
