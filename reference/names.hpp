// Names of enumerators, written once as a table and read both ways: the name of a value (tables,
// JSON, traces) and the value of a name (command-line flags), with one message for an unknown
// name that lists the choices. A table is an array of the names of enumerators 0, 1, 2, ... in
// declaration order (every enum named this way is a plain 0-based enumeration):
//
//   enum class LayoutKind : uint8_t { contiguous, zigzag, striped };
//   constexpr const char* kLayoutNames[] = {"contiguous", "zigzag", "striped"};
//   name_of(kLayoutNames, LayoutKind::zigzag)                               -> "zigzag"
//   parse_named<LayoutKind>(kLayoutNames, "zigzag", "layout", "--layout")   -> LayoutKind::zigzag
//   parse_named<LayoutKind>(kLayoutNames, "diagonal", ...)  throws UsageError
//       "unknown layout 'diagonal'; use --layout contiguous, zigzag or striped"
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "reference/error.hpp"

namespace ringlab {

// The name of `value`, or "?" when the table is shorter.
template <class Enum, size_t N>
constexpr const char* name_of(const char* const (&names)[N], Enum value) {
  const auto index = static_cast<size_t>(value);
  return index < N ? names[index] : "?";
}

// The table's names from `first` on, as a list for a message: "a, b or c".
template <size_t N>
std::string name_choices(const char* const (&names)[N], size_t first = 0) {
  std::string text;
  for (size_t i = first; i < N; ++i) {
    if (i > first) text += i + 1 == N ? " or " : ", ";
    text += names[i];
  }
  return text;
}

// The value named `name`, if the table has it.
template <class Enum, size_t N>
constexpr std::optional<Enum> find_named(const char* const (&names)[N], std::string_view name) {
  for (size_t i = 0; i < N; ++i)
    if (name == names[i]) return static_cast<Enum>(i);
  return std::nullopt;
}

// The value named `name`; throws UsageError "unknown <what> '<name>'; use <flag> <choices>", the
// choices being the names from `first` on.
template <class Enum, size_t N>
Enum parse_named(const char* const (&names)[N], std::string_view name, const char* what, const char* flag,
                 size_t first = 0) {
  if (const std::optional<Enum> value = find_named<Enum>(names, name)) return *value;
  throw UsageError("unknown " + std::string(what) + " '" + std::string(name) + "'; use " + flag + " " +
                   name_choices(names, first));
}

}  // namespace ringlab
