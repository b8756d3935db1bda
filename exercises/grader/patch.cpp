// Applying a unified diff strictly (patch.hpp).
// Sections: [reading] [applying]
#include "exercises/grader/patch.hpp"

#include <cstdint>
#include <optional>
#include <regex>
#include <vector>

namespace ringlab::grader {

namespace {

// Lines without their '\n'; `final_newline` says whether the text ended with one.
std::vector<std::string> split_lines(const std::string& text, bool& final_newline) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < text.size()) {
    const size_t end = text.find('\n', start);
    if (end == std::string::npos) {
      lines.push_back(text.substr(start));
      break;
    }
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  final_newline = !text.empty() && text.back() == '\n';
  return lines;
}

// ---- [reading] ---------------------------------------------------------------------------------

struct Hunk {
  int64_t old_start = 0, old_count = 0, new_start = 0, new_count = 0;  // as the header says
  std::string header;                                                  // "@@ -45,3 +45,3 @@"
  int64_t patch_line = 0;                                              // where the header stands in the patch, from 1
  std::vector<std::string> old_lines;  // context and removed lines, in order: what must match
  std::vector<std::string> new_lines;  // context and added lines: what replaces them
  // Index in the original where the header puts old_lines (from 0).
  int64_t stated_index() const { return old_count == 0 ? old_start : old_start - 1; }
};

struct Diff {
  std::vector<Hunk> hunks;
  std::optional<bool> new_final_newline;  // set by a "\ No newline at end of file" marker
};

std::string where(int64_t patch_line) { return "line " + std::to_string(patch_line) + " of the patch"; }

Hunk read_hunk_header(const std::string& line, int64_t patch_line) {
  static const std::regex header(R"(^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@.*$)");
  std::smatch m;
  if (!std::regex_match(line, m, header)) throw PatchError(where(patch_line) + " is not a hunk header: '" + line + "'");
  Hunk hunk;
  hunk.old_start = std::stoll(m[1]);
  hunk.old_count = m[2].matched ? std::stoll(m[2]) : 1;
  hunk.new_start = std::stoll(m[3]);
  hunk.new_count = m[4].matched ? std::stoll(m[4]) : 1;
  hunk.header = line.substr(0, line.find("@@", 2) + 2);
  hunk.patch_line = patch_line;
  return hunk;
}

Diff read_diff(const std::vector<std::string>& lines) {
  Diff diff;
  size_t i = 0;
  while (i < lines.size() && lines[i].rfind("--- ", 0) != 0) ++i;  // a description may come first
  if (i + 1 >= lines.size() || lines[i + 1].rfind("+++ ", 0) != 0) {
    throw PatchError("not a unified diff: no '--- FILE' line followed by '+++ FILE'");
  }
  i += 2;
  while (i < lines.size()) {
    if (lines[i].empty()) {  // blank lines after the last hunk
      ++i;
      continue;
    }
    if (lines[i].rfind("--- ", 0) == 0 || lines[i].rfind("diff ", 0) == 0) {
      throw PatchError(where(int64_t(i) + 1) + " starts another file; a lab's patch changes solution.cpp only");
    }
    Hunk hunk = read_hunk_header(lines[i], int64_t(i) + 1);
    ++i;
    int64_t old_left = hunk.old_count, new_left = hunk.new_count;
    char previous = 0;
    while (old_left > 0 || new_left > 0 || (i < lines.size() && lines[i].rfind('\\', 0) == 0)) {
      if (i >= lines.size()) throw PatchError("the patch ends inside hunk " + hunk.header);
      const std::string& line = lines[i];
      const char kind = line.empty() ? ' ' : line[0];
      const std::string text = line.empty() ? "" : line.substr(1);
      if (kind == '\\') {  // "\ No newline at end of file", about the line before
        if (previous == '+' || previous == ' ') diff.new_final_newline = false;
        if (previous == '-' && !diff.new_final_newline) diff.new_final_newline = true;
        ++i;
        continue;
      }
      if (kind != ' ' && kind != '-' && kind != '+') {
        throw PatchError(where(int64_t(i) + 1) + " is not a context, removed or added line of hunk " + hunk.header);
      }
      if (kind != '+') {
        if (--old_left < 0) throw PatchError("hunk " + hunk.header + " has more old lines than its header counts");
        hunk.old_lines.push_back(text);
      }
      if (kind != '-') {
        if (--new_left < 0) throw PatchError("hunk " + hunk.header + " has more new lines than its header counts");
        hunk.new_lines.push_back(text);
      }
      previous = kind;
      ++i;
    }
    if (!diff.hunks.empty() && hunk.stated_index() < diff.hunks.back().stated_index() + diff.hunks.back().old_count) {
      throw PatchError("hunk " + hunk.header + " overlaps or comes before the hunk above it");
    }
    diff.hunks.push_back(std::move(hunk));
  }
  if (diff.hunks.empty()) throw PatchError("the patch has no hunks");
  return diff;
}

// ---- [applying] --------------------------------------------------------------------------------

bool matches_at(const std::vector<std::string>& original, const Hunk& hunk, int64_t at) {
  if (at < 0 || at + int64_t(hunk.old_lines.size()) > int64_t(original.size())) return false;
  for (size_t k = 0; k < hunk.old_lines.size(); ++k)
    if (original[size_t(at) + k] != hunk.old_lines[k]) return false;
  return true;
}

// Why the hunk does not match at `at`: its first line that differs.
std::string mismatch(const std::vector<std::string>& original, const Hunk& hunk, int64_t at) {
  for (size_t k = 0; k < hunk.old_lines.size(); ++k) {
    const int64_t line = at + int64_t(k);
    if (line < 0 || line >= int64_t(original.size())) {
      return "the original has no line " + std::to_string(line + 1) + " where the patch expects '" + hunk.old_lines[k] +
             "'";
    }
    if (original[size_t(line)] != hunk.old_lines[k]) {
      return "line " + std::to_string(line + 1) + " reads '" + original[size_t(line)] + "' where the patch expects '" +
             hunk.old_lines[k] + "'";
    }
  }
  return "it matches";
}

// Where the hunk goes: the stated place (moved as the hunks above it moved) if its lines match
// there, else the one place at or below `from` where they do.
int64_t locate(const std::vector<std::string>& original, const Hunk& hunk, int64_t from, int64_t shift) {
  const int64_t stated = hunk.stated_index() + shift;
  if (stated >= from && matches_at(original, hunk, stated)) return stated;
  std::vector<int64_t> found;
  for (int64_t at = from; at + int64_t(hunk.old_lines.size()) <= int64_t(original.size()); ++at)
    if (matches_at(original, hunk, at)) found.push_back(at);
  if (found.size() == 1) return found.front();
  const std::string hunk_name = "hunk " + hunk.header + " (" + where(hunk.patch_line) + ")";
  if (found.empty()) throw PatchError(hunk_name + " does not apply: " + mismatch(original, hunk, stated));
  throw PatchError(hunk_name + " does not apply where it says (" + mismatch(original, hunk, stated) +
                   "), and its lines match " + std::to_string(found.size()) + " other places: give it more context");
}

}  // namespace

std::string apply_patch(const std::string& original, const std::string& patch) {
  bool original_newline = false, patch_newline = false;
  const std::vector<std::string> lines = split_lines(original, original_newline);
  const Diff diff = read_diff(split_lines(patch, patch_newline));
  std::vector<std::string> result;
  int64_t next = 0;   // the first line of the original not yet copied
  int64_t shift = 0;  // how far the hunk above moved from its stated place
  for (const Hunk& hunk : diff.hunks) {
    const int64_t at = locate(lines, hunk, next, shift);
    result.insert(result.end(), lines.begin() + next, lines.begin() + at);
    result.insert(result.end(), hunk.new_lines.begin(), hunk.new_lines.end());
    next = at + int64_t(hunk.old_lines.size());
    shift = at - hunk.stated_index();
  }
  result.insert(result.end(), lines.begin() + next, lines.end());
  std::string text;
  for (size_t k = 0; k < result.size(); ++k) text += result[k] + (k + 1 < result.size() ? "\n" : "");
  if (!result.empty() && diff.new_final_newline.value_or(original_newline)) text += "\n";
  return text;
}

}  // namespace ringlab::grader
