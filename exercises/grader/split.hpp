// The grader's ';'-separated lists (grader_config.hpp): one splitter for the grader and hand-outs.
#pragma once

#include <sstream>
#include <string>
#include <vector>

namespace ringlab::grader {

// The non-empty parts of `text` between separators.
inline std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> parts;
  std::string part;
  std::istringstream stream(text);
  while (std::getline(stream, part, separator))
    if (!part.empty()) parts.push_back(part);
  return parts;
}

}  // namespace ringlab::grader
