// Exercises: variant draws and answer judging (exercise.hpp; the catalog is exercises/catalog/).
#include "exercises/exercise.hpp"

#include <cmath>
#include <initializer_list>
#include <stdexcept>
#include <utility>

namespace ringlab::exercises {

namespace {

bool within(const Part& part, double value) {
  return std::fabs(value - part.expected) <= part.tolerance.abs + part.tolerance.rel * std::fabs(part.expected);
}

}  // namespace

Part& Part::mistake(double value, std::string origin, std::string why) {
  if (!within(*this, value)) {
    mistakes.push_back({value, {}, std::move(origin), std::move(why)});
  } else if (std::fabs(value - expected) > 1e-6 * std::fabs(expected)) {
    accepted_mistakes.push_back({value, {}, std::move(origin), std::move(why)});
  }
  return *this;
}

Part& Part::mistake(std::vector<int64_t> list, std::string origin, std::string why) {
  mistakes.push_back({0, std::move(list), std::move(origin), std::move(why)});
  return *this;
}

const Part* Exercise::find_part(const std::string& name) const {
  for (const Part& part : parts)
    if (part.name == name) return &part;
  return nullptr;
}

double Exercise::number(const std::string& name) const {
  for (const auto& [key, value] : numbers)
    if (key == name) return value;
  throw std::out_of_range("exercise " + id + " has no number '" + name + "'");
}

// ---- variants --------------------------------------------------------------------------------

namespace {

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t fnv1a(const std::string& text) {
  uint64_t hash = 0xCBF29CE484222325ull;
  for (unsigned char c : text) hash = (hash ^ c) * 0x100000001B3ull;
  return hash;
}

}  // namespace

VariantDraw::VariantDraw(const std::string& id, int64_t variant)
    : variant_(variant), state_(fnv1a(id) ^ (static_cast<uint64_t>(variant) * 0xD1B54A32D192ED03ull)) {}

uint64_t VariantDraw::next() { return splitmix64(state_); }

int64_t VariantDraw::integer(int64_t lo, int64_t hi) {
  const uint64_t span = static_cast<uint64_t>(hi - lo) + 1;
  return lo + static_cast<int64_t>(next() % span);
}

// ---- checking --------------------------------------------------------------------------------

std::string expected_text(const Part& part) {
  if (part.quantity == Quantity::list) return format_list(part.expected_list);
  return format_quantity(part.expected, part.quantity, part.unit, 4);
}

std::string tolerance_text(const Part& part) {
  if (part.quantity == Quantity::list) return "exact";
  std::string text;
  if (part.tolerance.rel > 0) text = "± " + format_number(part.tolerance.rel * 100, 3) + "%";
  if (part.tolerance.abs > 0) {
    std::string abs;
    if (part.quantity == Quantity::fraction) {
      abs = format_number(part.tolerance.abs * 100, 3) + " percentage points";
    } else {
      abs = format_quantity(part.tolerance.abs, part.quantity, part.unit, 3);
    }
    text += text.empty() ? "± " + abs : " + " + abs;
  }
  return text.empty() ? "exact" : text;
}

namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_word(char c) { return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }

// `token` in `text` as a whole number: not inside a longer number or a name.
bool contains_number(const std::string& text, const std::string& token) {
  for (size_t at = text.find(token); at != std::string::npos; at = text.find(token, at + 1)) {
    const size_t end = at + token.size();
    const bool glued_before = at > 0 && (is_word(text[at - 1]) || text[at - 1] == '.' || text[at - 1] == ',');
    const bool glued_after =
        end < text.size() && (is_digit(text[end]) || ((text[end] == '.' || text[end] == ',') && end + 1 < text.size() &&
                                                      is_digit(text[end + 1])));
    if (!glued_before && !glued_after) return true;
  }
  return false;
}

}  // namespace

bool mentions_expected(const std::string& text, const Part& part) {
  if (part.quantity == Quantity::list) {
    std::string compact;
    for (int64_t x : part.expected_list) compact += (compact.empty() ? "" : ",") + std::to_string(x);
    return contains_number(text, format_list(part.expected_list)) || contains_number(text, compact);
  }
  // (value in a unit, the unit's name): the part's own unit first, where a bare number counts.
  std::vector<std::pair<double, std::string>> scaled{{part.expected / part.unit.factor, part.unit.name}};
  auto add_units = [&](Quantity quantity, std::initializer_list<const char*> names) {
    for (const char* name : names) scaled.emplace_back(part.expected / named_unit(quantity, name).factor, name);
  };
  switch (part.quantity) {
    case Quantity::bytes:
      add_units(Quantity::bytes, {"B", "KB", "MB", "GB", "TB", "PB", "KiB", "MiB", "GiB", "TiB"});
      break;
    case Quantity::seconds: add_units(Quantity::seconds, {"s", "ms", "us"}); break;
    case Quantity::fraction:
      scaled.emplace_back(part.expected * 100, "%"), scaled.emplace_back(part.expected, "");
      break;
    case Quantity::tokens:
      if (contains_number(text, group_thousands(std::llround(part.expected)))) return true;
      break;
    default: break;
  }
  for (size_t i = 0; i < scaled.size(); ++i) {
    const auto& [value, unit] = scaled[i];
    if (!(std::fabs(value) >= 1e-3 && std::fabs(value) < 1e9)) continue;
    for (int digits = 3; digits <= 6; ++digits) {
      const std::string number = format_number(value, digits);
      // A small whole number, as the value is or as a rounding shows it ("2" for 1.9996).
      const bool small_whole = number.find_first_not_of("0123456789-") == std::string::npos && std::fabs(value) < 100;
      const bool bare_counts = !small_whole && (i == 0 || unit.empty() || unit == "%");
      if (bare_counts && contains_number(text, number)) return true;
      if (!unit.empty() &&
          (text.find(number + " " + unit) != std::string::npos || text.find(number + unit) != std::string::npos)) {
        if (contains_number(text, number)) return true;
      }
    }
  }
  return false;
}

Verdict judge(const Part& part, const std::string& answer) {
  Verdict verdict;
  verdict.part = part.name;
  verdict.answer = answer;
  verdict.expected = expected_text(part);
  verdict.tolerance = tolerance_text(part);
  const ParsedAnswer parsed = parse_answer(answer, part.quantity, part.unit);

  if (part.quantity == Quantity::list) {
    verdict.read_as = format_list(parsed.list);
    verdict.right = parsed.list == part.expected_list;
    for (const KnownMistake& mistake : part.mistakes)
      if (!verdict.right && !mistake.list.empty() && mistake.list == parsed.list) verdict.mistake = &mistake;
    return verdict;
  }

  verdict.read_as = format_quantity(parsed.value, part.quantity, part.unit, 4);
  verdict.right = within(part, parsed.value);
  if (!verdict.right && parsed.other_prefix_value > 0 && within(part, parsed.other_prefix_value)) {
    verdict.right = true;
    verdict.note =
        "accepted as " +
        format_number(parsed.other_prefix_value / named_unit(Quantity::bytes, parsed.other_prefix_unit).factor, 4) +
        " " + parsed.other_prefix_unit + ": you wrote " + parsed.unit_written + "; this exercise counts " +
        (part.unit.name.find('i') == std::string::npos ? "1 GB = 10^9 B" : "1 GiB = 2^30 B");
  }
  if (parsed.unit_written.empty() && (part.quantity == Quantity::bytes || part.quantity == Quantity::seconds)) {
    verdict.note = "a bare number is read in " + part.unit.name;
    // A bare byte count ("4398046511104" for 4.398 TB) is no amount of TB anyone means: accepted
    // as bytes when it is right as bytes, with the unit to write next time.
    const double as_bytes = parsed.value / part.unit.factor;
    if (!verdict.right && part.quantity == Quantity::bytes && part.unit.factor > 1 && within(part, as_bytes)) {
      verdict.right = true;
      verdict.read_as = format_quantity(as_bytes, part.quantity, part.unit, 4);
      verdict.note = "accepted as a byte count (" + group_thousands(std::llround(as_bytes)) +
                     " B = " + verdict.read_as + "); a bare number is read in " + part.unit.name +
                     ", so write the unit";
    }
  }
  if (!verdict.right && part.quantity == Quantity::fraction && parsed.unit_written.empty() && parsed.value > 1 &&
      within(part, parsed.value / 100)) {
    verdict.note = "a bare number is a fraction; write " + format_number(parsed.value, 4) + "% for a percentage";
  }
  if (!verdict.right) {
    for (const KnownMistake& mistake : part.mistakes) {
      const double tolerance = part.tolerance.abs + part.tolerance.rel * std::fabs(mistake.value);
      if (std::fabs(parsed.value - mistake.value) <= tolerance) {
        verdict.mistake = &mistake;
        break;
      }
    }
  }
  return verdict;
}

}  // namespace ringlab::exercises
