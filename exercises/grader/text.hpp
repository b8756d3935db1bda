// Small text helpers the grader's files share: a whole file read as bytes, and the FNV-1a hash that
// names cached builds and grades.
#pragma once

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>

namespace ringlab::grader {

// The file's bytes; empty when it cannot be read (callers check existence where it matters).
inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// 64-bit FNV-1a over `text`, continuing from `hash` (so several parts hash as one).
inline uint64_t fnv1a(const std::string& text, uint64_t hash = 0xCBF29CE484222325ull) {
  for (unsigned char c : text) hash = (hash ^ c) * 0x100000001B3ull;
  return hash;
}

}  // namespace ringlab::grader
