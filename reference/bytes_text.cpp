#include "reference/bytes_text.hpp"

#include <cstdio>
#include <cstdlib>

namespace ringlab {

namespace {

std::string grouped(int64_t value) {
  std::string digits = std::to_string(value < 0 ? -value : value), text;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) text += ',';
    text += digits[i];
  }
  return value < 0 ? "-" + text : text;
}

}  // namespace

std::string bytes_text(int64_t bytes) {
  static const char* const kUnits[] = {"B", "KB", "MB", "GB", "TB", "PB", "EB"};
  double value = static_cast<double>(bytes);
  size_t unit = 0;
  while (unit + 1 < std::size(kUnits) && std::abs(value) >= 1000) value /= 1000, ++unit;
  if (unit == 0) return std::to_string(bytes) + " B";
  char text[32];
  std::snprintf(text, sizeof text, "%.4g", value);
  return std::string(text) + " " + kUnits[unit];
}

std::string bytes_text_exact(int64_t bytes) {
  if (bytes > -1000 && bytes < 1000) return bytes_text(bytes);
  return bytes_text(bytes) + " (" + grouped(bytes) + " B)";
}

}  // namespace ringlab
