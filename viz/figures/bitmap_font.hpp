// A small bitmap font for the PNG figures: printable ASCII, 5 x 7 pixels on a 6-pixel advance and
// a 9-row cell (two rows below the baseline for g, j, p, q, y and the comma), drawn for ringlab.
// No font file is needed, so every build that writes PNG writes its text. Other characters are
// mapped to a near ASCII one (× to x, the dashes to -, → to >, ± to +) or drawn as '?'.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace ringlab::viz {

struct BitmapFont {
  static constexpr int kColumns = 5;         // glyph width, in font pixels
  static constexpr int kAdvance = 6;         // glyph advance: one blank column
  static constexpr int kAscent = 7;          // rows above the baseline
  static constexpr int kRows = 9;            // with the descender
  using Glyph = std::array<uint8_t, kRows>;  // row r: bit 4 is the leftmost column
};

// The glyph of an ASCII character (32..126); '?' for any other.
const BitmapFont::Glyph& bitmap_glyph(char32_t c);
// The characters of UTF-8 text as the font draws them (one per code point, mapped to ASCII).
std::vector<char32_t> bitmap_characters(const std::string& utf8);

}  // namespace ringlab::viz
