// Byte counts printed for people carry a unit (reference/bytes_text.hpp).
#include <catch2/catch.hpp>

#include "reference/bytes_text.hpp"

using ringlab::bytes_text;
using ringlab::bytes_text_exact;

TEST_CASE("byte counts are printed with decimal units, exact counts kept where asked", "[reference]") {
  CHECK(bytes_text(0) == "0 B");
  CHECK(bytes_text(512) == "512 B");
  CHECK(bytes_text(1572864) == "1.573 MB");
  CHECK(bytes_text(int64_t{1} << 42) == "4.398 TB");  // the count a reader took for TB
  CHECK(bytes_text(2000000000) == "2 GB");
  CHECK(bytes_text_exact(512) == "512 B");
  CHECK(bytes_text_exact(1572864) == "1.573 MB (1,572,864 B)");
  CHECK(bytes_text_exact(1572868) == "1.573 MB (1,572,868 B)");  // two sizes the rounding would merge
}
