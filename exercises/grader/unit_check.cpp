// The check of a submission's preprocessed unit (unit_check.hpp).
#include "exercises/grader/unit_check.hpp"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <set>
#include <sstream>

#include "exercises/grader/process.hpp"

namespace ringlab::grader {

namespace fs = std::filesystem;

namespace {

// A line marker `# 12 "path" 1 3`: the path, unescaped; "" for any other line.
std::string marker_file(const std::string& line) {
  if (line.size() < 5 || line[0] != '#' || line[1] != ' ' || !std::isdigit(static_cast<unsigned char>(line[2])))
    return "";
  const size_t open = line.find('"');
  if (open == std::string::npos) return "";
  std::string name;
  for (size_t i = open + 1; i < line.size(); ++i) {
    if (line[i] == '\\' && i + 1 < line.size()) {
      name += line[++i];
    } else if (line[i] == '"') {
      return name;
    } else {
      name += line[i];
    }
  }
  return "";
}

int marker_line(const std::string& line) { return std::atoi(line.c_str() + 2); }

std::string resolved(const std::string& path) {
  std::error_code error;
  const fs::path canonical = fs::weakly_canonical(fs::absolute(path), error);
  return (error ? fs::absolute(path).lexically_normal() : canonical).generic_string();
}

bool inside(const std::string& path, const std::string& folder) {
  if (folder.empty()) return false;
  const std::string prefix = folder.back() == '/' ? folder : folder + "/";
  return path.rfind(prefix, 0) == 0;
}

bool inside_any(const std::string& path, const std::vector<std::string>& folders) {
  return std::any_of(folders.begin(), folders.end(), [&](const std::string& f) { return inside(path, f); });
}

// A lab's answer files, by name: never a header of a student's own, wherever it is.
bool answer_name(const fs::path& path) {
  const std::string name = path.filename().string();
  for (const auto& part : path)
    if (part == "broken") return true;
  return name == "solution.cpp" || name == "harness.cpp" || name == "device_runner.cu" || path.extension() == ".patch";
}

// The identifiers of one preprocessed line outside string and character literals; `raw` carries a
// raw string literal's closing delimiter from one line to the next ("" when outside one).
std::vector<std::string> identifiers(const std::string& line, std::string& raw) {
  std::vector<std::string> names;
  size_t i = 0;
  if (!raw.empty()) {
    const size_t end = line.find(raw);
    if (end == std::string::npos) return names;
    i = end + raw.size();
    raw.clear();
  }
  while (i < line.size()) {
    const char c = line[i];
    if (c == 'R' && i + 1 < line.size() && line[i + 1] == '"' &&
        (i == 0 || !(std::isalnum(static_cast<unsigned char>(line[i - 1])) || line[i - 1] == '_'))) {
      const size_t paren = line.find('(', i + 2);
      if (paren == std::string::npos) return names;
      const std::string closing = ")" + line.substr(i + 2, paren - i - 2) + "\"";
      const size_t end = line.find(closing, paren);
      if (end == std::string::npos) {
        raw = closing;
        return names;
      }
      i = end + closing.size();
    } else if (c == '"' || c == '\'') {
      for (++i; i < line.size() && line[i] != c; ++i)
        if (line[i] == '\\') ++i;
      ++i;
    } else if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t end = i;
      while (end < line.size() && (std::isalnum(static_cast<unsigned char>(line[end])) || line[end] == '_')) ++end;
      names.push_back(line.substr(i, end - i));
      i = end;
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      while (i < line.size() &&
             (std::isalnum(static_cast<unsigned char>(line[i])) || line[i] == '.' || line[i] == '\'' || line[i] == '_'))
        ++i;
    } else {
      ++i;
    }
  }
  return names;
}

}  // namespace

std::vector<std::string> unit_files(const std::string& unit) {
  std::vector<std::string> files;
  std::set<std::string> seen;
  std::istringstream lines(unit);
  for (std::string line; std::getline(lines, line);) {
    const std::string file = marker_file(line);
    if (file.empty() || file.front() == '<') continue;
    if (seen.insert(file).second) files.push_back(file);
  }
  return files;
}

std::string check_unit(const std::string& unit, const UnitRules& rules) {
  const std::string submission = resolved(rules.submission);
  const std::string own_folder = fs::path(submission).parent_path().generic_string();
  std::vector<std::string> handout, system, forbidden;
  for (const std::string& d : rules.handout) handout.push_back(resolved(d));
  for (const std::string& d : rules.system) system.push_back(resolved(d));
  for (const std::string& d : rules.forbidden) forbidden.push_back(resolved(d));
  auto shown = [&](const std::string& spelled, const std::string& path) {
    return inside(path, own_folder) ? fs::path(path).lexically_relative(own_folder).generic_string() : spelled;
  };
  // What a file is: 0 the student's own (the submission, or a header next to it), 1 the hand-out's
  // or the compiler's, or a refusal.
  auto classify = [&](const std::string& spelled, std::string& refusal) {
    const std::string path = resolved(spelled);
    if (path == submission) return 0;
    if (inside_any(path, handout) || inside_any(path, system)) return 1;
    if (inside(path, own_folder) && !inside_any(path, forbidden) && !answer_name(path)) return 0;
    if (answer_name(path) || inside_any(path, forbidden))
      refusal = "refused: your file includes " + shown(spelled, path) +
                ", one of the course's own files (a solution, a broken version or a hidden test), not a "
                "hand-out header";
    else
      refusal = "refused: your file includes " + shown(spelled, path) +
                ", which is neither one of the hand-out's headers nor a file next to your submission; include "
                "\"lab.hpp\", the hand-out's include/ headers, the standard library and headers of your own "
                "beside your file (no absolute paths, no '..' out of its folder)";
    return 2;
  };
  std::istringstream lines(unit);
  std::string current, refusal, raw;
  int kind = 1, line_number = 0;
  for (std::string line; std::getline(lines, line);) {
    const std::string file = marker_file(line);
    if (!file.empty()) {
      current = file;
      line_number = marker_line(line);
      kind = file.front() == '<' ? 1 : classify(file, refusal);
      if (kind == 2) return refusal;
      raw.clear();
      continue;
    }
    const int this_line = line_number++;
    if (kind != 0) continue;
    for (const std::string& name : identifiers(line, raw))
      if (name == "asm" || name == "__asm" || name == "__asm__")
        return "refused: inline assembly (" + name + ") in " + shown(current, resolved(current)) + " line " +
               std::to_string(this_line) +
               ": the labs need none, and an asm statement can read files while compiling (.incbin)";
  }
  return "";
}

std::vector<std::string> compiler_include_dirs(const std::string& compiler, const std::vector<std::string>& flags) {
  std::vector<std::string> argv{compiler};
  argv.insert(argv.end(), flags.begin(), flags.end());
  for (const char* a : {"-xc++", "-E", "-v", "/dev/null", "-o", "/dev/null"}) argv.emplace_back(a);
  const ProcessResult run = run_process(argv, 60);
  std::vector<std::string> dirs;
  std::istringstream lines(run.output);
  bool listing = false;
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("#include <...> search starts here:", 0) == 0) {
      listing = true;
    } else if (line.rfind("End of search list.", 0) == 0) {
      listing = false;
    } else if (listing && !line.empty() && line[0] == ' ') {
      std::string dir = line.substr(1);
      if (const size_t note = dir.find(" (framework directory)"); note != std::string::npos) dir.resize(note);
      dirs.push_back(resolved(dir));
    }
  }
  return dirs;
}

}  // namespace ringlab::grader
