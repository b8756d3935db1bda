// A lab's hand-out (handout.hpp).
#include "exercises/grader/handout.hpp"

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "exercises/grader/grader_config.hpp"
#include "exercises/grader/split.hpp"
#include "reference/error.hpp"
#include "sim/pipeline/output_files.hpp"

namespace ringlab::grader {

namespace fs = std::filesystem;

namespace {

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UsageError("cannot read " + path.string() + "; is the ringlab source tree complete?");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// The `#include "..."` names of a file, in order.
std::vector<std::string> quoted_includes(const std::string& text) {
  static const std::regex include(R"re(^\s*#\s*include\s*"([^"]+)")re");
  std::vector<std::string> names;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    std::smatch match;
    if (std::regex_search(line, match, include)) names.push_back(match[1]);
  }
  return names;
}

// The repository headers reachable from `roots` through quoted includes, as repository paths.
// A name is looked up next to the including file first, then at the repository root, as the
// compiler does with the grader's -I flags.
std::vector<std::string> reachable_headers(const fs::path& source_dir, const fs::path& lab_dir,
                                           const std::vector<fs::path>& roots) {
  std::set<std::string> seen;
  std::vector<std::string> order;
  std::vector<fs::path> pending(roots.begin(), roots.end());
  while (!pending.empty()) {
    const fs::path file = pending.back();
    pending.pop_back();
    for (const std::string& name : quoted_includes(read_text(file))) {
      fs::path found;
      for (const fs::path& base : {file.parent_path(), source_dir, lab_dir})
        if (fs::exists(base / name)) {
          found = fs::weakly_canonical(base / name);
          break;
        }
      if (found.empty()) continue;  // a system header in quotes, or one the build generates
      const fs::path relative = found.lexically_relative(fs::weakly_canonical(source_dir));
      if (relative.empty() || *relative.begin() == "..") continue;
      if (found.parent_path() == fs::weakly_canonical(lab_dir)) continue;  // lab.hpp itself: copied at the top
      if (seen.insert(relative.generic_string()).second) {
        order.push_back(relative.generic_string());
        pending.push_back(found);
      }
    }
  }
  return order;
}

// The lab README for a student: paths into the repository's lab folder become the hand-out's own,
// and the "## Files" section lists what the hand-out holds.
std::string student_readme(const LabInfo& lab, const std::string& readme) {
  std::string text = std::regex_replace(readme, std::regex("exercises/labs/" + lab.id + "/"), "");
  const size_t files = text.find("\n## Files");
  if (files != std::string::npos) {
    const size_t next = text.find("\n## ", files + 1);
    text = text.substr(0, files) + (next == std::string::npos ? "\n" : text.substr(next));
  }
  while (!text.empty() && text.back() == '\n') text.pop_back();
  text +=
      "\n\n## Files\n\n"
      "- `starter.cpp` - your starting point: it compiles, and fails the grader until you fill in its TODOs.\n"
      "- `lab.hpp` - what you implement and what you may call.\n"
      "- `include/` - the ringlab headers that `lab.hpp` and `starter.cpp` use, to read (the grader compiles\n"
      "  against the same ones).\n"
      "- `Makefile` - `make check` compiles your file alone; `make grade` runs the grader on it\n"
      "  (`make grade FILE=my.cpp`, `RINGLAB=/path/to/ringlab` when ringlab is not on your PATH).\n\n"
      "Grade with `ringlab grade " +
      lab.id +
      " starter.cpp` (or your copy of it). `--only ID` runs one criterion, as each failure's\n"
      "\"reproduce\" line says.\n";
  return text;
}

std::string makefile(const LabInfo& lab, bool no_cuda) {
  std::string flags;
  for (const std::string& flag : split(config::kCompileFlags, ';')) flags += (flags.empty() ? "" : " ") + flag;
  return "# " + lab.id +
         ": build and grade your file with ringlab.\n"
         "#   make check               compile FILE alone (syntax and types; no hidden tests)\n"
         "#   make grade               grade FILE: with ../ringlab-grade in a student kit, else ringlab\n"
         "#   make grade FILE=my.cpp RINGLAB=/path/to/build/ringlab\n"
         "RINGLAB ?= ringlab\n"
         "GRADE ?= $(if $(wildcard ../ringlab-grade),../ringlab-grade,$(RINGLAB) grade)\n"
         "FILE ?= starter.cpp\n"
         "CXX ?= c++\n"
         "CXXFLAGS ?= " +
         flags + "\n" +
         (no_cuda ? "# The kernel compiles as host C++ under the warp emulator: the CUDA toolkit is not needed\n"
                    "# (include/no-cuda stands in for the two type headers the emulator names).\n"
                    "INCLUDES = -I. -Iinclude -Iinclude/no-cuda\n"
                  : "INCLUDES = -I. -Iinclude\n") +
         "\n"
         ".PHONY: check grade\n"
         "check:\n"
         "\t$(CXX) $(CXXFLAGS) -fsyntax-only $(INCLUDES) $(FILE)\n"
         "grade:\n"
         "\t$(GRADE) " +
         lab.id + " $(FILE)\n";
}

// The repository headers a README names (`reference/compare.hpp`): part of the hand-out, so that
// every file it names is there to read.
std::vector<std::string> cited_headers(const fs::path& source_dir, const std::string& readme) {
  static const std::regex cited("`([A-Za-z0-9_./-]+\\.(hpp|h|cuh))`");
  std::vector<std::string> found;
  for (auto it = std::sregex_iterator(readme.begin(), readme.end(), cited); it != std::sregex_iterator(); ++it) {
    const std::string path = (*it)[1];
    if (path.find('/') != std::string::npos && fs::is_regular_file(source_dir / path) && !is_answer_file(path))
      found.push_back(path);
  }
  return found;
}

}  // namespace

bool is_answer_file(const std::string& relative_path) {
  const fs::path path(relative_path);
  const std::string name = path.filename().string();
  for (const auto& part : path)
    if (part == "broken") return true;
  return name == "solution.cpp" || name == "harness.cpp" || name == "device_runner.cu" || path.extension() == ".patch";
}

std::vector<HandoutFile> handout_files(const LabInfo& lab) {
  const fs::path source_dir(config::kSourceDir), lab_dir(lab.directory);
  std::vector<HandoutFile> files;
  const std::string readme = read_text(lab_dir / "README.md");
  files.push_back({"README.md", student_readme(lab, readme)});
  files.push_back({"starter.cpp", read_text(lab_dir / "starter.cpp")});
  files.push_back({"lab.hpp", read_text(lab_dir / "lab.hpp")});
  std::vector<fs::path> roots{lab_dir / "lab.hpp", lab_dir / "starter.cpp"};
  std::set<std::string> headers;
  for (const std::string& header : cited_headers(source_dir, readme)) {
    roots.push_back(source_dir / header);
    if (headers.insert(header).second) files.push_back({"include/" + header, read_text(source_dir / header)});
  }
  for (const std::string& header : reachable_headers(source_dir, lab_dir, roots))
    if (headers.insert(header).second) files.push_back({"include/" + header, read_text(source_dir / header)});
  // A GPU lab's kernel compiles as host C++ under the warp emulator, which names CUDA's bf16 and
  // fp16 type headers: the hand-out brings small stand-ins, so neither students nor the grader
  // need the CUDA toolkit.
  const bool no_cuda = headers.count("gpu/emulation/warp_emulator.hpp") > 0;
  if (no_cuda)
    for (const char* name : {"cuda_bf16.h", "cuda_fp16.h"})
      files.push_back({std::string("include/no-cuda/") + name,
                       read_text(source_dir / "exercises" / "labs" / "common" / "no-cuda" / name)});
  files.push_back({"Makefile", makefile(lab, no_cuda)});
  for (const HandoutFile& file : files)
    if (is_answer_file(file.path)) throw std::logic_error("a hand-out must not hold " + file.path);
  return files;
}

std::vector<std::string> write_handout(const LabInfo& lab, const std::string& directory) {
  check_output_directory(directory, "handout");
  const std::vector<HandoutFile> files = handout_files(lab);
  StagedDirectory staged(directory, "handout");
  std::vector<std::string> written;
  for (const HandoutFile& file : files) {
    const fs::path path = staged.path(file.path);
    fs::create_directories(path.parent_path());
    std::ofstream out(path, std::ios::binary);
    out << file.content;
    if (!out.flush())
      throw UsageError("handout " + directory + ": write failed (disk full?); free space and run again");
    written.push_back(file.path);
  }
  staged.commit();
  return written;
}

}  // namespace ringlab::grader
