// libFuzzer target: the .npy reader. Any input either parses or throws UsageError — never
// crashes, reads out of bounds, or allocates what the bytes cannot back.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "reference/error.hpp"
#include "reference/npy.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  try {
    const ringlab::NpyArray array = ringlab::parse_npy(bytes, "fuzz.npy");
    // A parsed array re-serialises to a file that parses to the same values.
    const ringlab::NpyArray again = ringlab::parse_npy(ringlab::npy_bytes(array.values), "again.npy");
    if (!(again.values == array.values) && array.values.size() == again.values.size()) {
      bool same = true;  // NaN payloads compare unequal; compare bits instead
      for (int64_t i = 0; i < array.values.size(); ++i)
        same &= std::memcmp(&array.values[i], &again.values[i], sizeof(double)) == 0;
      if (!same) __builtin_trap();
    }
  } catch (const ringlab::UsageError&) {
  }
  return 0;
}
