// Names of enumerators, written once as a table and read both ways: the name of a value (tables,
// JSON, traces) and the value of a name (command-line flags), with one message for an unknown
// name that lists the choices. A table is a plain array of (value, name) pairs:
//
//   constexpr NamedValue<LayoutKind> kLayoutNames[] = {
//       {LayoutKind::contiguous, "contiguous"}, {LayoutKind::zigzag, "zigzag"}, ...};
//   name_of(kLayoutNames, kind)                                  -> "zigzag"
//   parse_named(kLayoutNames, "zigzag", "layout", "--layout")   -> LayoutKind::zigzag
//   parse_named(kLayoutNames, "diagonal", ...)  throws UsageError
//       "unknown layout 'diagonal'; use --layout contiguous, zigzag or striped"
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "reference/error.hpp"

namespace ringlab {

template <class Enum>
struct NamedValue {
  Enum value;
  const char* name;
};

// The name of `value`, or "?" when the table does not list it.
template <class Enum, size_t N>
constexpr const char* name_of(const NamedValue<Enum> (&table)[N], Enum value) {
  for (const NamedValue<Enum>& entry : table)
    if (entry.value == value) return entry.name;
  return "?";
}

// The table's names as a list for a message: "a, b or c".
template <class Enum, size_t N>
std::string name_choices(const NamedValue<Enum> (&table)[N]) {
  std::string text;
  for (size_t i = 0; i < N; ++i) {
    if (i > 0) text += i + 1 == N ? " or " : ", ";
    text += table[i].name;
  }
  return text;
}

// The value named `name`, if the table has it.
template <class Enum, size_t N>
constexpr std::optional<Enum> find_named(const NamedValue<Enum> (&table)[N], std::string_view name) {
  for (const NamedValue<Enum>& entry : table)
    if (name == entry.name) return entry.value;
  return std::nullopt;
}

// The value named `name`; throws UsageError "unknown <what> '<name>'; use <flag> <choices>".
template <class Enum, size_t N>
Enum parse_named(const NamedValue<Enum> (&table)[N], std::string_view name, const char* what, const char* flag) {
  if (const std::optional<Enum> value = find_named(table, name)) return *value;
  throw UsageError("unknown " + std::string(what) + " '" + std::string(name) + "'; use " + flag + " " +
                   name_choices(table));
}

}  // namespace ringlab
