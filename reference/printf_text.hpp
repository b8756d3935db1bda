// printf's formatting into a std::string, whatever its length: the fixed-width columns of the
// tables (dry report, compare) and the numbers of the viewer's labels and the book's figures.
#pragma once

#include <cstdio>
#include <string>

namespace ringlab {

template <typename... Values>
std::string printf_text(const char* pattern, Values... values) {
  const int length = std::snprintf(nullptr, 0, pattern, values...);
  if (length <= 0) return {};
  std::string text(static_cast<size_t>(length), '\0');
  std::snprintf(text.data(), text.size() + 1, pattern, values...);
  return text;
}

}  // namespace ringlab
