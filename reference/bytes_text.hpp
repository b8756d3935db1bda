// Byte counts for people: "1.573 MB" rather than 1572864. Decimal prefixes (1 MB = 10^6 B), as
// every table of ringlab prints them; machine-readable output (--json) keeps the exact count.
#pragma once

#include <cstdint>
#include <string>

namespace ringlab {

// "512 B", "1.573 MB", "4.398 TB": four significant digits, trailing zeros dropped.
std::string bytes_text(int64_t bytes);
// "1.573 MB (1,572,864 B)": both, where the exact count matters (two sizes that differ by a few
// bytes); just "512 B" below 1000.
std::string bytes_text_exact(int64_t bytes);

}  // namespace ringlab
