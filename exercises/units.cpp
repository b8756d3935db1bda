// Reading and printing answers with units (see units.hpp for the grammar).
// Sections: [unit tables] [number] [parse] [format]
#include "exercises/units.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <stdexcept>

#include "reference/error.hpp"

namespace ringlab::exercises {

namespace {

// ---- [unit tables] ---------------------------------------------------------------------------

struct UnitEntry {
  const char* name;
  double factor;
  int prefix_power = 0;  // bytes: 1 for K, 2 for M... (for the decimal <-> binary reading)
  bool binary = false;   // bytes: KiB, MiB...
};

const std::vector<UnitEntry>& byte_units() {
  static const std::vector<UnitEntry> units = {
      {"B", 1},
      {"byte", 1},
      {"bytes", 1},
      {"KB", 1e3, 1},
      {"MB", 1e6, 2},
      {"GB", 1e9, 3},
      {"TB", 1e12, 4},
      {"PB", 1e15, 5},
      {"KiB", 0x1p10, 1, true},
      {"MiB", 0x1p20, 2, true},
      {"GiB", 0x1p30, 3, true},
      {"TiB", 0x1p40, 4, true},
      {"PiB", 0x1p50, 5, true},
  };
  return units;
}

const std::vector<UnitEntry>& time_units() {
  static const std::vector<UnitEntry> units = {
      {"s", 1},
      {"sec", 1},
      {"secs", 1},
      {"second", 1},
      {"seconds", 1},
      {"ms", 1e-3},
      {"msec", 1e-3},
      {"us", 1e-6},
      {"\xC2\xB5s", 1e-6} /* µs */,
      {"\xCE\xBCs", 1e-6} /* μs */,
      {"ns", 1e-9},
      {"min", 60},
  };
  return units;
}

bool same_ignoring_case(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

// Exact spelling first ("MB" vs "mb" are the same; case only matters nowhere here), then any case.
const UnitEntry* find_unit(const std::vector<UnitEntry>& units, std::string_view name) {
  for (const UnitEntry& u : units)
    if (name == u.name) return &u;
  for (const UnitEntry& u : units)
    if (same_ignoring_case(name, u.name)) return &u;
  return nullptr;
}

std::string_view trim(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) text.remove_prefix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.remove_suffix(1);
  return text;
}

// What a quantity is called in messages, and examples of the answers it reads.
struct QuantityWords {
  const char* name;     // "a time"
  const char* example;  // "80 ms, 0.08 s or 80000 us"
};

QuantityWords words_of(Quantity quantity) {
  switch (quantity) {
    case Quantity::bytes: return {"bytes", "68.7 GB, 64 GiB or 68719476736 B"};
    case Quantity::seconds: return {"a time", "80 ms, 0.08 s or 80000 us"};
    case Quantity::ratio: return {"a ratio", "1.07x or 64"};
    case Quantity::fraction: return {"a fraction", "43.75% or 0.4375"};
    case Quantity::tokens: return {"a token count", "256K, 262144 or 262,144"};
    case Quantity::number: return {"a number", "3.5"};
    case Quantity::list: return {"a list of integers", "0,7,8,15"};
  }
  return {"?", ""};
}

[[noreturn]] void fail(std::string_view text, Quantity quantity, const std::string& what) {
  const QuantityWords words = words_of(quantity);
  throw UsageError("cannot read '" + std::string(text) + "' as " + words.name + ": " + what + "; write e.g. " +
                   words.example);
}

// ---- [number] --------------------------------------------------------------------------------

// Reads a leading decimal number ("1,048,576", "4.4", "4.4e12", "~80", "≈ 80"); the rest goes to
// `rest`. Commas are thousands separators only in groups of three ("262,144").
bool read_number(std::string_view text, double& value, std::string_view& rest) {
  for (std::string_view approx : {"~", "\xE2\x89\x88" /* ≈ */})
    if (text.substr(0, approx.size()) == approx) text = trim(text.substr(approx.size()));
  size_t i = 0;
  std::string integer, fraction;
  const bool negative = !text.empty() && text[0] == '-';
  if (!text.empty() && (text[0] == '+' || text[0] == '-')) ++i;
  for (; i < text.size(); ++i) {
    const char c = text[i];
    const bool digit_follows = i + 1 < text.size() && std::isdigit(static_cast<unsigned char>(text[i + 1]));
    if (std::isdigit(static_cast<unsigned char>(c)) || ((c == ',' || c == '_') && !integer.empty() && digit_follows)) {
      integer += c;
    } else {
      break;
    }
  }
  if (i < text.size() && text[i] == '.') {
    for (++i; i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])); ++i) fraction += text[i];
  }
  if (integer.empty() && fraction.empty()) return false;
  // Separators: groups of exactly three digits after the first.
  std::string digits;
  if (integer.find_first_of(",_") != std::string::npos) {
    size_t group = 0;
    bool first = true;
    for (char c : integer) {
      if (c == ',' || c == '_') {
        if ((first && (group == 0 || group > 3)) || (!first && group != 3)) return false;
        first = false, group = 0;
      } else {
        digits += c, ++group;
      }
    }
    if (group != 3) return false;
  } else {
    digits = integer;
  }
  std::string number =
      (negative ? "-" : "") + (digits.empty() ? "0" : digits) + "." + (fraction.empty() ? "0" : fraction);
  // Exponent: e12, E-3 (only when digits follow, so words starting with e are left alone).
  if (i + 1 < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    size_t j = i + 1;
    std::string exponent = "e";
    if (j < text.size() && (text[j] == '+' || text[j] == '-')) exponent += text[j++];
    const size_t first_digit = j;
    while (j < text.size() && std::isdigit(static_cast<unsigned char>(text[j]))) exponent += text[j++];
    if (j > first_digit) number += exponent, i = j;
  }
  try {
    value = std::stod(number);
  } catch (const std::exception&) {
    return false;
  }
  rest = trim(text.substr(i));
  return std::isfinite(value);
}

}  // namespace

const char* quantity_name(Quantity quantity) { return words_of(quantity).name; }

DisplayUnit display_unit_for(Quantity quantity, double value) {
  const double a = std::fabs(value);
  switch (quantity) {
    case Quantity::bytes:
      if (a >= 1e15) return {"PB", 1e15};
      if (a >= 1e12) return {"TB", 1e12};
      if (a >= 1e9) return {"GB", 1e9};
      if (a >= 1e6) return {"MB", 1e6};
      if (a >= 1e3) return {"KB", 1e3};
      return {"B", 1};
    case Quantity::seconds:
      if (a >= 1 || a == 0) return {"s", 1};
      if (a >= 1e-3) return {"ms", 1e-3};
      if (a >= 1e-6) return {"us", 1e-6};
      return {"ns", 1e-9};
    case Quantity::ratio: return {"x", 1};
    case Quantity::fraction: return {"%", 0.01};
    case Quantity::tokens: return {"tokens", 1};
    case Quantity::number:
    case Quantity::list: return {"", 1};
  }
  return {"", 1};
}

DisplayUnit named_unit(Quantity quantity, std::string_view name) {
  const std::vector<UnitEntry>* table = quantity == Quantity::bytes     ? &byte_units()
                                        : quantity == Quantity::seconds ? &time_units()
                                                                        : nullptr;
  if (table) {
    if (const UnitEntry* u = find_unit(*table, name)) return {u->name, u->factor};
  } else if (quantity == Quantity::fraction && name == "%") {
    return {"%", 0.01};
  } else if (quantity == Quantity::ratio && name == "x") {
    return {"x", 1};
  } else if (name.empty() || name == "tokens") {
    return {std::string(name), 1};
  }
  throw std::invalid_argument("no unit '" + std::string(name) + "' for " + quantity_name(quantity));
}

// ---- [parse] ---------------------------------------------------------------------------------

namespace {

// "[0, 7, 8, 15]", "(0 7 8 15)", "0;7;8;15": integers separated by commas, semicolons or spaces,
// optionally in one pair of brackets. `raw` is the whole answer, for the error message.
std::vector<int64_t> read_list(std::string_view raw, std::string_view text) {
  std::string_view body = text;
  if (body.front() == '[' || body.front() == '(' || body.front() == '{') {
    const char close = body.front() == '[' ? ']' : body.front() == '(' ? ')' : '}';
    if (body.back() != close) {
      fail(raw, Quantity::list, std::string("the opening bracket has no closing '") + close + "'");
    }
    body = trim(body.substr(1, body.size() - 2));
  }
  std::vector<int64_t> list;
  std::string item;
  auto flush = [&] {
    if (item.empty()) return;
    size_t used = 0;
    int64_t v = 0;
    try {
      v = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != item.size()) fail(raw, Quantity::list, "'" + item + "' is not an integer");
    list.push_back(v);
    item.clear();
  };
  for (char c : body) {
    if (c == ',' || c == ';' || std::isspace(static_cast<unsigned char>(c))) {
      flush();
    } else {
      item += c;
    }
  }
  flush();
  if (list.empty()) fail(raw, Quantity::list, "no integers found");
  return list;
}

// The readers of a number followed by its unit text (`unit`, trimmed; "" for a bare number), one per
// quantity: each gives the value in base units, or fails naming the units it takes.

// B, KB... (powers of 1000), KiB... (powers of 1024); a bare number is in `bare`. A prefixed unit
// also gives the value read with the other family of prefixes (GB <-> GiB).
void read_bytes(std::string_view raw, double number, std::string_view unit, const DisplayUnit& bare,
                ParsedAnswer& answer) {
  if (unit.empty()) {
    answer.value = number * bare.factor;
    return;
  }
  const UnitEntry* entry = find_unit(byte_units(), unit);
  if (!entry) {
    fail(raw, Quantity::bytes,
         "unknown unit '" + std::string(unit) +
             "' (bytes take B, KB, MB, GB, TB, PB as powers of 1000 or KiB, MiB, GiB, TiB, PiB as powers of 1024)");
  }
  answer.value = number * entry->factor;
  if (entry->prefix_power == 0) return;
  for (const UnitEntry& other : byte_units()) {
    if (other.prefix_power == entry->prefix_power && other.binary != entry->binary) {
      answer.other_prefix_value = number * other.factor;
      answer.other_prefix_unit = other.name;
    }
  }
}

// s, ms, us (µs), ns, min; a bare number is in `bare`.
double seconds_value(std::string_view raw, double number, std::string_view unit, const DisplayUnit& bare) {
  if (unit.empty()) return number * bare.factor;
  const UnitEntry* entry = find_unit(time_units(), unit);
  if (!entry)
    fail(raw, Quantity::seconds, "unknown unit '" + std::string(unit) + "' (times take s, ms, us, ns or min)");
  return number * entry->factor;
}

// "1.78x", "64×", "64 times" or a bare 64; a percentage is refused as such.
double ratio_value(std::string_view raw, double number, std::string_view unit) {
  if (unit.empty() || unit == "x" || unit == "X" || unit == "\xC3\x97" /* × */ || same_ignoring_case(unit, "times")) {
    return number;
  }
  if (unit == "%") fail(raw, Quantity::ratio, "a ratio is not a percentage (write 1.78x, not 178%)");
  fail(raw, Quantity::ratio, "unknown unit '" + std::string(unit) + "' (a ratio takes x, × or nothing)");
}

// "43.75%" (or "43.75 percent") or a bare fraction 0.4375.
double fraction_value(std::string_view raw, double number, std::string_view unit) {
  if (unit.empty()) return number;
  if (unit == "%" || same_ignoring_case(unit, "percent")) return number / 100;
  fail(raw, Quantity::fraction,
       "unknown unit '" + std::string(unit) + "' (a fraction takes % or nothing: 43.75% or 0.4375)");
}

// "256K", "1M" (K = 1024, M = 1024^2) or a bare count, each optionally followed by "tokens".
double tokens_value(std::string_view raw, double number, std::string_view unit) {
  for (std::string_view word : {"tokens", "token"}) {
    if (unit.size() >= word.size() && same_ignoring_case(unit.substr(unit.size() - word.size()), word)) {
      unit = trim(unit.substr(0, unit.size() - word.size()));
      break;
    }
  }
  if (unit.empty()) return number;
  if (unit == "K" || unit == "k") return number * 1024;
  if (unit == "M" || unit == "m") return number * (1024.0 * 1024);
  fail(raw, Quantity::tokens, "unknown unit '" + std::string(unit) + "' (token counts take K = 1024 or M = 1024^2)");
}

// A bare number, optionally followed by words ("3.5 steps").
double plain_value(std::string_view raw, double number, std::string_view words) {
  for (char c : words) {
    if (!std::isalpha(static_cast<unsigned char>(c)) && c != ' ' && c != '-') {
      fail(raw, Quantity::number, "'" + std::string(words) + "' after the number is not a word");
    }
  }
  return number;
}

}  // namespace

ParsedAnswer parse_answer(std::string_view raw, Quantity quantity, const DisplayUnit& bare) {
  const std::string_view text = trim(raw);
  if (text.empty()) fail(raw, quantity, "the answer is empty");
  ParsedAnswer answer;
  if (quantity == Quantity::list) {
    answer.list = read_list(raw, text);
    return answer;
  }

  double number = 0;
  std::string_view unit;
  if (!read_number(text, number, unit)) fail(raw, quantity, "it does not start with a number");
  answer.unit_written = std::string(unit);
  switch (quantity) {
    case Quantity::bytes: read_bytes(raw, number, unit, bare, answer); return answer;
    case Quantity::seconds: answer.value = seconds_value(raw, number, unit, bare); return answer;
    case Quantity::ratio: answer.value = ratio_value(raw, number, unit); return answer;
    case Quantity::fraction: answer.value = fraction_value(raw, number, unit); return answer;
    case Quantity::tokens: answer.value = tokens_value(raw, number, unit); return answer;
    case Quantity::number: answer.value = plain_value(raw, number, unit); return answer;
    case Quantity::list: break;  // read above
  }
  fail(raw, quantity, "unsupported quantity");
}

// ---- [format] --------------------------------------------------------------------------------

std::string format_number(double value, int significant) {
  if (value == 0) return "0";
  if (!std::isfinite(value)) return value > 0 ? "inf" : (value < 0 ? "-inf" : "nan");
  const double a = std::fabs(value);
  char text[64];
  if (a >= 1e7 || a < 1e-4) {
    std::snprintf(text, sizeof text, "%.*e", std::max(0, significant - 1), value);
    // drop trailing zeros of the mantissa: 1.200e+09 -> 1.2e+09
    std::string s = text;
    const size_t e = s.find('e');
    std::string mantissa = s.substr(0, e), exponent = s.substr(e);
    if (mantissa.find('.') != std::string::npos) {
      while (mantissa.back() == '0') mantissa.pop_back();
      if (mantissa.back() == '.') mantissa.pop_back();
    }
    return mantissa + exponent;
  }
  const int magnitude = static_cast<int>(std::floor(std::log10(a)));
  const int decimals = std::max(0, significant - 1 - magnitude);
  std::snprintf(text, sizeof text, "%.*f", decimals, value);
  std::string s = text;
  if (s.find('.') != std::string::npos) {
    while (s.back() == '0') s.pop_back();
    if (s.back() == '.') s.pop_back();
  }
  return s;
}

std::string group_thousands(int64_t value) {
  std::string digits = std::to_string(value < 0 ? -value : value);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return value < 0 ? "-" + out : out;
}

std::string tokens_text(int64_t tokens) {
  if (tokens >= 1024 * 1024 && tokens % (1024 * 1024) == 0)
    return std::to_string(tokens / (1024 * 1024)) + "M (" + group_thousands(tokens) + ")";
  if (tokens >= 1024 && tokens % 1024 == 0)
    return std::to_string(tokens / 1024) + "K (" + group_thousands(tokens) + ")";
  return group_thousands(tokens);
}

std::string format_list(const std::vector<int64_t>& list) {
  std::string out;
  for (size_t i = 0; i < list.size(); ++i) out += (i ? ", " : "") + std::to_string(list[i]);
  return out;
}

std::string format_quantity(double value, Quantity quantity, const DisplayUnit& unit, int significant) {
  switch (quantity) {
    case Quantity::tokens:
      if (std::fabs(value - std::round(value)) < 1e-9 && std::fabs(value) < 9e15)
        return group_thousands(static_cast<int64_t>(std::llround(value))) + " tokens";
      return format_number(value, significant) + " tokens";
    case Quantity::ratio: return format_number(value, significant) + "x";
    case Quantity::fraction: return format_number(value * 100, significant) + "%";
    case Quantity::number:
    case Quantity::list: return format_number(value, significant);
    case Quantity::bytes:
    case Quantity::seconds: {
      const std::string number = format_number(value / unit.factor, significant);
      return unit.name.empty() ? number : number + " " + unit.name;
    }
  }
  return format_number(value, significant);
}

}  // namespace ringlab::exercises
