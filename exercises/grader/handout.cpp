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

std::string makefile(const LabInfo& lab) {
  std::string flags;
  for (const std::string& flag : split(config::kCompileFlags, ';')) flags += (flags.empty() ? "" : " ") + flag;
  return "# " + lab.id +
         ": build and grade your file with ringlab.\n"
         "#   make check               compile FILE alone (syntax and types; no hidden tests)\n"
         "#   make grade               ringlab grade " +
         lab.id +
         " FILE\n"
         "#   make grade FILE=my.cpp RINGLAB=/path/to/build/ringlab\n"
         "RINGLAB ?= ringlab\n"
         "FILE ?= starter.cpp\n"
         "CXX ?= c++\n"
         "CXXFLAGS ?= " +
         flags +
         "\n\n"
         ".PHONY: check grade\n"
         "check:\n"
         "\t$(CXX) $(CXXFLAGS) -fsyntax-only -I. -Iinclude $(FILE)\n"
         "grade:\n"
         "\t$(RINGLAB) grade " +
         lab.id + " $(FILE)\n";
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
  files.push_back({"README.md", student_readme(lab, read_text(lab_dir / "README.md"))});
  files.push_back({"starter.cpp", read_text(lab_dir / "starter.cpp")});
  files.push_back({"lab.hpp", read_text(lab_dir / "lab.hpp")});
  for (const std::string& header :
       reachable_headers(source_dir, lab_dir, {lab_dir / "lab.hpp", lab_dir / "starter.cpp"}))
    files.push_back({"include/" + header, read_text(source_dir / header)});
  files.push_back({"Makefile", makefile(lab)});
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
