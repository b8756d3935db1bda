// The check of a submission's preprocessed unit (unit_check.hpp).
#include "exercises/grader/unit_check.hpp"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <set>
#include <sstream>

#include "exercises/grader/process.hpp"
#include "exercises/grader/text.hpp"

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

// One identifier of a preprocessed line and what came just before it: `member` after `.` or `->`,
// `qualifier` the token before a `::` that precedes it ("" when no `::` does).
struct Name {
  std::string text;
  bool member = false;
  std::string qualifier;
};

// The identifiers of one preprocessed line outside string and character literals. `raw` carries a
// raw string literal's closing delimiter from one line to the next ("" when outside one), and
// `last` / `before` the two tokens before the line's first, so a name's context may span lines.
std::vector<Name> identifiers(const std::string& line, std::string& raw, std::string& last, std::string& before) {
  std::vector<Name> names;
  auto token = [&](std::string t) {
    before = std::move(last);
    last = std::move(t);
  };
  size_t i = 0;
  if (!raw.empty()) {
    const size_t end = line.find(raw);
    if (end == std::string::npos) return names;
    i = end + raw.size();
    raw.clear();
    token("literal");
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
      token("literal");
    } else if (c == '"' || c == '\'') {
      for (++i; i < line.size() && line[i] != c; ++i)
        if (line[i] == '\\') ++i;
      ++i;
      token("literal");
    } else if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t end = i;
      while (end < line.size() && (std::isalnum(static_cast<unsigned char>(line[end])) || line[end] == '_')) ++end;
      if (line.compare(i, end - i, "template") == 0 && (last == "." || last == "->" || last == "::")) {
        i = end;  // x.template f<T>(): f is still x's member
        continue;
      }
      Name name{line.substr(i, end - i), last == "." || last == "->", last == "::" ? before : ""};
      token(name.text);
      names.push_back(std::move(name));
      i = end;
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      while (i < line.size() &&
             (std::isalnum(static_cast<unsigned char>(line[i])) || line[i] == '.' || line[i] == '\'' || line[i] == '_'))
        ++i;
      token("literal");
    } else if (std::isspace(static_cast<unsigned char>(c))) {
      ++i;
    } else if (line.compare(i, 2, "::") == 0 || line.compare(i, 2, "->") == 0) {
      token(line.substr(i, 2));
      i += 2;
    } else {
      token(std::string(1, c));
      ++i;
    }
  }
  return names;
}

// Whether `name` is one the lab refuses: `name` anywhere, or `.name` used as a member (after `.`,
// `->`, or `X::` where X is not the lab's own namespace `labNN`, in which the student defines it).
bool refused_name(const Name& name, const std::vector<std::string>& refused) {
  for (const std::string& r : refused) {
    if (r == name.text) return true;
    if (r.size() > 1 && r[0] == '.' && r.compare(1, std::string::npos, name.text) == 0) {
      if (name.member) return true;
      const std::string& q = name.qualifier;
      const bool lab_namespace = q.size() > 3 && q.rfind("lab", 0) == 0 &&
                                 std::all_of(q.begin() + 3, q.end(), [](char d) { return std::isdigit(d) != 0; });
      if (!q.empty() && !lab_namespace) return true;
    }
  }
  return false;
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
  // The files the compiler opened, whatever the line markers say, and the student's own among
  // them: none may hold a line directive, so the markers below tell the truth.
  std::string refusal;
  std::vector<std::string> own{submission};
  for (const std::string& file : rules.opened) {
    const int kind = classify(file, refusal);
    if (kind == 2) return refusal;
    if (kind == 0 && resolved(file) != submission) own.push_back(resolved(file));
  }
  for (const std::string& file : own)
    if (has_line_directive(read_file(file)))
      return "refused: a line directive (#line) in " + shown(file, file) +
             ": it would make your code look like another file's to this check; remove it";
  std::istringstream lines(unit);
  std::string current, raw, last, before;
  int kind = 1, line_number = 0;
  for (std::string line; std::getline(lines, line);) {
    const std::string file = marker_file(line);
    if (!file.empty()) {
      current = file;
      line_number = marker_line(line);
      kind = file.front() == '<' ? 1 : classify(file, refusal);
      if (kind == 2) return refusal;
      raw.clear();
      last.clear();
      before.clear();
      continue;
    }
    const int this_line = line_number++;
    if (kind != 0) continue;
    for (const Name& name : identifiers(line, raw, last, before)) {
      const std::string where = shown(current, resolved(current)) + " line " + std::to_string(this_line);
      if (name.text == "asm" || name.text == "__asm" || name.text == "__asm__")
        return "refused: inline assembly (" + name.text + ") in " + where +
               ": the labs need none, and an asm statement can read files while compiling (.incbin)";
      if (refused_name(name, rules.refused))
        return "refused: " + where + " names " + name.text +
               ", which does this lab's work for you (lab.hpp's grader-refuses lines list what is not yours to "
               "call here); write that part yourself";
    }
  }
  return "";
}

std::vector<std::string> refused_names(const std::string& lab_header) {
  std::vector<std::string> names;
  std::istringstream lines(lab_header);
  const std::string tag = "// grader-refuses:";
  for (std::string line; std::getline(lines, line);) {
    const size_t at = line.find(tag);
    if (at == std::string::npos) continue;
    std::istringstream words(line.substr(at + tag.size()));
    for (std::string word; words >> word;) {
      while (!word.empty() && (word.back() == ',' || word.back() == '.')) word.pop_back();
      if (!word.empty()) names.push_back(word);
    }
  }
  return names;
}

std::vector<std::string> opened_files(const std::string& output, std::string* rest) {
  std::vector<std::string> files;
  std::istringstream lines(output);
  bool guards = false;  // "Multiple include guards may be useful for:" and its list of paths
  for (std::string line; std::getline(lines, line);) {
    size_t dots = 0;
    while (dots < line.size() && line[dots] == '.') ++dots;
    if (dots > 0 && dots + 1 < line.size() && line[dots] == ' ') {
      files.push_back(line.substr(dots + 1));
      continue;
    }
    if (line.rfind("Multiple include guards may be useful for:", 0) == 0) {
      guards = true;
      continue;
    }
    if (guards && !line.empty() && line[0] == '/') continue;
    guards = false;
    if (rest) *rest += line + "\n";
  }
  return files;
}

bool has_line_directive(const std::string& text) {
  std::string spliced;  // backslash-newline joins lines before directives are recognised
  spliced.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\\' && i + 1 < text.size() && text[i + 1] == '\n') {
      ++i;
    } else if (text[i] == '\\' && i + 2 < text.size() && text[i + 1] == '\r' && text[i + 2] == '\n') {
      i += 2;
    } else {
      spliced += text[i];
    }
  }
  std::istringstream lines(spliced);
  for (std::string line; std::getline(lines, line);) {
    size_t i = 0;
    auto skip_blank = [&] {
      for (;;) {
        while (i < line.size() && std::isspace(static_cast<unsigned char>(line[i]))) ++i;
        if (line.compare(i, 2, "/*") != 0) return;
        const size_t end = line.find("*/", i + 2);
        i = end == std::string::npos ? line.size() : end + 2;
      }
    };
    skip_blank();
    if (line.compare(i, 1, "#") == 0) {
      i += 1;
    } else if (line.compare(i, 2, "%:") == 0) {
      i += 2;
    } else {
      continue;
    }
    skip_blank();
    if (i < line.size() && std::isdigit(static_cast<unsigned char>(line[i]))) return true;
    if (line.compare(i, 4, "line") == 0 &&
        (i + 4 == line.size() || !(std::isalnum(static_cast<unsigned char>(line[i + 4])) || line[i + 4] == '_')))
      return true;
  }
  return false;
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
