// Enumerator names (reference/names.hpp): read both ways, unknown names refused with the choices.
#include <catch2/catch.hpp>

#include "reference/attention.hpp"
#include "reference/error.hpp"
#include "reference/layout.hpp"
#include "reference/names.hpp"

using namespace ringlab;

namespace {

enum class Colour : uint8_t { red, green, blue, unnamed };
constexpr const char* kColourNames[] = {"red", "green", "blue"};

}  // namespace

TEST_CASE("a name table reads both ways and lists its choices", "[names]") {
  STATIC_REQUIRE(name_of(kColourNames, Colour::green) == std::string_view("green"));
  CHECK(std::string(name_of(kColourNames, Colour::unnamed)) == "?");
  CHECK(parse_named<Colour>(kColourNames, "blue", "colour", "--colour") == Colour::blue);
  CHECK(find_named<Colour>(kColourNames, "purple") == std::nullopt);
  CHECK(name_choices(kColourNames, 1) == "green or blue");
  CHECK(name_choices(kColourNames) == "red, green or blue");
  try {
    parse_named<Colour>(kColourNames, "purple", "colour", "--colour");
    FAIL("an unknown name must throw");
  } catch (const UsageError& error) {
    CHECK(std::string(error.what()) == "unknown colour 'purple'; use --colour red, green or blue");
  }
}

TEST_CASE("every layout and mask has a name that parses back", "[names]") {
  for (const LayoutKind kind :
       {LayoutKind::contiguous, LayoutKind::zigzag, LayoutKind::striped, LayoutKind::balanced}) {
    CHECK(parse_layout(layout_name(kind)) == kind);
  }
  CHECK_THROWS_WITH(parse_layout("diagonal"),
                    "unknown layout 'diagonal'; use --layout contiguous, zigzag, striped or balanced");
  CHECK(std::string(mask_name(MaskKind::none)) == "none");
  CHECK(std::string(mask_name(MaskKind::causal)) == "causal");
}
