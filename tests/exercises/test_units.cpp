// The answer parser and the quantity printer (exercises/units.hpp): every form the contract
// promises reads to the right base value, and what cannot be read is a UsageError of one line.
#include <catch2/catch.hpp>

#include "exercises/exercise.hpp"
#include "exercises/units.hpp"
#include "reference/error.hpp"

using namespace ringlab;
using namespace ringlab::exercises;

namespace {

double read(const std::string& text, Quantity q, DisplayUnit bare = {"", 1}) {
  return parse_answer(text, q, bare).value;
}

}  // namespace

TEST_CASE("bytes read with decimal and binary prefixes", "[units]") {
  CHECK(read("4.4 TB", Quantity::bytes) == Approx(4.4e12));
  CHECK(read("68.7GB", Quantity::bytes) == Approx(68.7e9));
  CHECK(read("64 GiB", Quantity::bytes) == Approx(68719476736.0));
  CHECK(read("2 KiB", Quantity::bytes) == Approx(2048));
  CHECK(read("1,048,576 B", Quantity::bytes) == Approx(1048576));
  CHECK(read("4.4e12", Quantity::bytes) == Approx(4.4e12));
  CHECK(read("68.7", Quantity::bytes, {"GB", 1e9}) == Approx(68.7e9));  // a bare number in the part's unit
  CHECK(read("~200 MB", Quantity::bytes) == Approx(2e8));
  const ParsedAnswer gb = parse_answer("32 GB", Quantity::bytes, {"GB", 1e9});
  CHECK(gb.other_prefix_unit == "GiB");
  CHECK(gb.other_prefix_value == Approx(32.0 * 0x1p30));
}

TEST_CASE("times, ratios, fractions, tokens, numbers and lists", "[units]") {
  CHECK(read("80 ms", Quantity::seconds) == Approx(0.08));
  CHECK(read("0.08 s", Quantity::seconds) == Approx(0.08));
  CHECK(read("80000us", Quantity::seconds) == Approx(0.08));
  CHECK(read("80000 \xC2\xB5s", Quantity::seconds) == Approx(0.08));
  CHECK(read("80", Quantity::seconds, {"ms", 1e-3}) == Approx(0.08));
  CHECK(read("1.78x", Quantity::ratio) == Approx(1.78));
  CHECK(read("64\xC3\x97", Quantity::ratio) == Approx(64));
  CHECK(read("64", Quantity::ratio) == Approx(64));
  CHECK(read("43.75%", Quantity::fraction) == Approx(0.4375));
  CHECK(read("0.4375", Quantity::fraction) == Approx(0.4375));
  CHECK(read("256K", Quantity::tokens) == Approx(262144));
  CHECK(read("1M tokens", Quantity::tokens) == Approx(1048576));
  CHECK(read("262,144", Quantity::tokens) == Approx(262144));
  CHECK(read("3.5 steps", Quantity::number) == Approx(3.5));
  CHECK(parse_answer("[0, 7, 8, 15]", Quantity::list, {}).list == std::vector<int64_t>{0, 7, 8, 15});
  CHECK(parse_answer("0 7 8 15", Quantity::list, {}).list == std::vector<int64_t>{0, 7, 8, 15});
}

TEST_CASE("what cannot be read is one line naming it", "[units]") {
  const std::vector<std::pair<std::string, Quantity>> bad = {
      {"4.4 TX", Quantity::bytes},       {"fast", Quantity::seconds}, {"178%", Quantity::ratio},
      {"12 apples", Quantity::fraction}, {"", Quantity::number},      {"1,23", Quantity::number},
      {"[1, 2", Quantity::list},         {"1, two", Quantity::list},  {"5 parsecs", Quantity::seconds}};
  for (const auto& [text, quantity] : bad) {
    INFO(text);
    try {
      parse_answer(text, quantity, {"", 1});
      FAIL("accepted");
    } catch (const UsageError& e) {
      const std::string message = e.what();
      CHECK(message.find('\n') == std::string::npos);
      CHECK(message.find("cannot read") == 0);
      CHECK(message.find("write e.g.") != std::string::npos);
    }
  }
}

TEST_CASE("quantities print in readable units with the significant digits asked", "[units]") {
  CHECK(format_quantity(68719476736.0, Quantity::bytes, display_unit_for(Quantity::bytes, 68719476736.0)) ==
        "68.72 GB");
  CHECK(format_quantity(0.08, Quantity::seconds, display_unit_for(Quantity::seconds, 0.08)) == "80 ms");
  CHECK(format_quantity(0.4375, Quantity::fraction, {"%", 0.01}) == "43.75%");
  CHECK(format_quantity(1.0666, Quantity::ratio, {"x", 1}) == "1.067x");
  CHECK(format_quantity(262144, Quantity::tokens, {"tokens", 1}) == "262,144 tokens");
  CHECK(tokens_text(262144) == "256K (262,144)");
  CHECK(format_number(4.398e12) == "4.398e+12");
  CHECK(format_number(0) == "0");
}

TEST_CASE("judging: tolerance, GB read as GiB, fractions written bare", "[units]") {
  Part part;
  part.name = "ring";
  part.quantity = Quantity::bytes;
  part.unit = {"GB", 1e9};
  part.expected = 68719476736.0;  // 64 GiB
  part.tolerance = {0.01, 0};
  CHECK(judge(part, "68.7 GB").right);
  CHECK(judge(part, "64 GiB").right);
  const Verdict as_gib = judge(part, "64 GB");  // the author meant GiB: right, with a note
  CHECK(as_gib.right);
  CHECK(as_gib.note.find("GiB") != std::string::npos);
  CHECK_FALSE(judge(part, "70 GB").right);
  CHECK(judge(part, "68.7 GB").tolerance == "\xC2\xB1 1%");
  // A bare byte count is no number of GB anyone means: right as bytes, accepted with the unit to write.
  const Verdict count = judge(part, std::to_string(static_cast<int64_t>(part.expected)));
  CHECK(count.right);
  CHECK(count.read_as == format_quantity(part.expected, Quantity::bytes, part.unit, 4));
  CHECK(count.note.find("byte count") != std::string::npos);
  CHECK_FALSE(judge(part, "70000000000").right);  // a wrong byte count stays wrong
  CHECK(judge(part, "70000000000").note == "a bare number is read in GB");

  Part fraction;
  fraction.name = "work";
  fraction.quantity = Quantity::fraction;
  fraction.unit = {"%", 0.01};
  fraction.expected = 0.4375;
  fraction.tolerance = {0, 0.001};
  CHECK(judge(fraction, "43.75%").right);
  CHECK(judge(fraction, "0.4375").right);
  const Verdict bare = judge(fraction, "43.75");
  CHECK_FALSE(bare.right);
  CHECK(bare.note.find("43.75%") != std::string::npos);
}
