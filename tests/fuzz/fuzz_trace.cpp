// libFuzzer target: the Chrome trace loader the viewer uses. Malformed text throws UsageError
// with one line; nothing crashes.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "reference/error.hpp"
#include "sim/pipeline/trace.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const auto events =
        ringlab::parse_chrome_trace(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.json");
    // What loads writes back and loads again.
    const std::string text = ringlab::chrome_trace_json(events, 1 + static_cast<int>(events.size() % 4));
    (void)ringlab::parse_chrome_trace(text, "again.json");
  } catch (const ringlab::UsageError&) {
  }
  return 0;
}
