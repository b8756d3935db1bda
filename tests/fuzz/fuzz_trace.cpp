// libFuzzer target: the Chrome trace loader the viewer uses (events and the run's spec). Malformed
// text throws UsageError with one line; nothing crashes. A spec that loads has passed the command
// line's checks, so its one-line description works (O(documents), whatever S says).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "reference/error.hpp"
#include "sim/pipeline/trace.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const ringlab::TraceFile file =
        ringlab::parse_trace_file(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.json");
    const auto& events = file.events;
    // A spec read back writes back the same.
    if (file.run &&
        ringlab::plan_spec_json(ringlab::plan_spec_from_json(ringlab::plan_spec_json(file.run->spec), "again.json")) !=
            ringlab::plan_spec_json(file.run->spec))
      __builtin_trap();
    if (file.run && file.run->spec.describe().empty()) __builtin_trap();
    // What loads writes back and loads again.
    const std::string text = ringlab::chrome_trace_json(events, 1 + static_cast<int>(events.size() % 4));
    (void)ringlab::parse_chrome_trace(text, "again.json");
  } catch (const ringlab::UsageError&) {
  }
  return 0;
}
