// libFuzzer target: the exercise-answer parser. The first byte picks the quantity (bytes,
// seconds, ratio, fraction, tokens, number, list), the rest is the answer text; it either parses
// or throws UsageError — and what parses formats and parses back to the same value.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "exercises/units.hpp"
#include "reference/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  using namespace ringlab::exercises;
  const Quantity quantity = static_cast<Quantity>(data[0] % 7);
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  try {
    const ParsedAnswer answer = parse_answer(text, quantity, display_unit_for(quantity, 1.0));
    if (quantity != Quantity::list && std::isfinite(answer.value) && std::fabs(answer.value) < 1e300) {
      const DisplayUnit unit = display_unit_for(quantity, answer.value);
      const std::string printed = format_quantity(answer.value, quantity, unit, 17);
      (void)parse_answer(printed, quantity, unit);  // what we print, we read
    }
  } catch (const ringlab::UsageError&) {
  }
  return 0;
}
