// Answers with units: reading what a student types ("4.4 TB", "68.7GB", "80 ms", "1.07x",
// "43.75%", "256K") and printing quantities the same way, for the exercise checker.
//
// Every quantity is held in a base unit: bytes, seconds, a plain ratio, a fraction (0.4375 for
// 43.75%), a token count, a plain number, or a list of integers. What a bare number means is
// stated per quantity (and printed with every exercise part):
//   bytes     B; KB MB GB TB PB are powers of 1000, KiB MiB GiB TiB PiB powers of 1024;
//             a bare number is read in the part's display unit ("68.7" for a GB part is 68.7 GB)
//   seconds   s, ms, us (or µs), ns, min; a bare number is read in the part's display unit
//   ratio     "1.78x", "64×", "64 times" or a bare "64"
//   fraction  "43.75%" or a bare fraction "0.4375"
//   tokens    "256K" (K = 1024, M = 1024^2, as the source material writes sequence lengths),
//             "262144" or "262,144"; an optional word "tokens"
//   number    a bare number, optionally followed by a word ("3.5 steps")
//   list      integers separated by commas or spaces, optionally in brackets: "[0, 7, 8, 15]"
// A text that cannot be read throws UsageError with one line saying what was not understood.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ringlab::exercises {

enum class Quantity : uint8_t { bytes, seconds, ratio, fraction, tokens, number, list };

const char* quantity_name(Quantity quantity);

// The unit a quantity is shown in, and what a bare number means: value = number * factor.
struct DisplayUnit {
  std::string name;   // "GB", "ms", "x", "%", "" (none)
  double factor = 1;  // base units per display unit: 1e9 for GB, 1e-3 for ms, 0.01 for %
};

// A readable unit for the value: bytes in B/KB/MB/GB/TB/PB, seconds in s/ms/us/ns, "x" for
// ratios, "%" for fractions, none otherwise.
DisplayUnit display_unit_for(Quantity quantity, double value);
// A named unit ("GiB", "ms", "%"...) of the quantity; throws std::invalid_argument if unknown.
DisplayUnit named_unit(Quantity quantity, std::string_view name);

struct ParsedAnswer {
  double value = 0;           // base units (bytes, seconds, ratio, fraction, tokens, number)
  std::vector<int64_t> list;  // Quantity::list
  std::string unit_written;   // as typed, "" for a bare number
  // Bytes written with a prefix: the same number read with the other family of prefixes
  // (GB <-> GiB), for the checker's "you wrote GB but meant GiB" acceptance. 0 when none.
  double other_prefix_value = 0;
  std::string other_prefix_unit;  // "GiB" when "GB" was written, and the other way round
};

// Reads an answer; `bare` says what a bare number means for bytes and seconds.
// Throws UsageError: "cannot read '<text>' as <quantity>: <what>; write e.g. <example>".
ParsedAnswer parse_answer(std::string_view text, Quantity quantity, const DisplayUnit& bare);

// "68.72 GB", "80 ms", "1.067x", "43.75%", "262,144 tokens", "3.5": `significant` digits,
// trailing zeros dropped.
std::string format_quantity(double value, Quantity quantity, const DisplayUnit& unit, int significant = 4);
std::string format_list(const std::vector<int64_t>& list);     // "0, 7, 8, 15"
std::string format_number(double value, int significant = 4);  // "68.72", "1.2e-05"
// "262,144"
std::string group_thousands(int64_t value);
// "256K (262,144)" for multiples of 1024, else "262,145"
std::string tokens_text(int64_t tokens);

}  // namespace ringlab::exercises
