// Exercises with answer checkers: what an exercise is, how its variants draw parameters, and how
// an answer is judged.
//
// An exercise is built from its parameters by a function (exercises/catalog/<id>.cpp): the function
// computes every expected answer with ringlab's formulas, layouts and plans (never a typed-in
// number), writes the statement and the worked solution around those values, and names the
// source material's answers that are wrong, each with why. Variant 0 uses the source material's
// parameters; variant N > 0 draws other parameters deterministically from (exercise id, N), so
// every student of a course can get different numbers and the same N always gives the same ones.
//
// Judging: a part has a quantity (units.hpp), an expected value and a tolerance
// |answer - expected| <= abs + rel |expected| (the library's compare convention); list parts must
// match exactly. Bytes written with decimal prefixes that are only right when read as binary ones
// (or the other way round) are accepted with a note saying so.
//
// Sections: [parts] [exercise] [variants] [catalog] [checking]
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "exercises/units.hpp"

namespace ringlab::exercises {

// ---- [parts] ---------------------------------------------------------------------------------

struct PartTolerance {
  double rel = 0.01;
  double abs = 0;  // in base units (bytes, seconds, fraction 0.005 = half a percentage point)
};

// An answer the source material gives (or a mistake students make) that is wrong, and why.
struct KnownMistake {
  double value = 0;           // base units; matched with the part's tolerance
  std::vector<int64_t> list;  // list parts
  std::string origin;         // "the source material's answer (exercise 3)"
  std::string why;            // one or two sentences
};

struct Part {
  std::string name;      // "full" — what students type before '='
  std::string question;  // "memory of the full attention matrix, all heads"
  Quantity quantity = Quantity::number;
  DisplayUnit unit;     // how the expected value prints, and what a bare number means
  double expected = 0;  // base units
  std::vector<int64_t> expected_list;
  PartTolerance tolerance;
  std::vector<KnownMistake> mistakes;
  // Known mistakes that land within the tolerance without being the right value (more than 1e-6
  // relative from it): wrong answers the checker would accept. The catalog's tests require none,
  // so a part whose tolerance is too loose for its mistakes is caught (tighten it).
  std::vector<KnownMistake> accepted_mistakes;

  // Adds a known mistake, unless the value lands within the tolerance (it can, for some variants'
  // numbers: then it is no mistake, or one too loose a tolerance accepts, recorded in
  // accepted_mistakes). Returns *this, so that a part's mistakes chain on it:
  //   bytes_part("ring", "...", ring).mistake(full / P, "a common slip", "dividing by P counts ...")
  Part& mistake(double value, std::string origin, std::string why);
  // A wrong list, for list parts.
  Part& mistake(std::vector<int64_t> list, std::string origin, std::string why);
};

// ---- [exercise] ------------------------------------------------------------------------------

struct Parameter {
  std::string name;     // "S"
  std::string value;    // "256K (262,144) tokens"
  std::string meaning;  // "sequence length"
};

// A parameter as a number, by name: {"S", p.seq} (any arithmetic value, held as a double).
struct NamedNumber {
  std::string name;  // "S"
  double value = 0;

  template <class T>
  requires std::is_arithmetic_v<T> NamedNumber(std::string key, T number)
      : name(std::move(key)), value(static_cast<double>(number)) {}
  bool operator==(const NamedNumber&) const = default;
};

// CatalogEntry::make names it (id, title, source, variant, lab); the entry's function writes the
// rest (hence the empty defaults).
struct Exercise {
  std::string id;      // "attention-memory"
  std::string title;   // "Memory of the attention matrix"
  std::string source;  // "the source material, exercise 1"
  int64_t variant = 0;
  std::vector<Parameter> parameters = {};
  // The parameters as numbers, by name ("S", "P", ...): what tests re-derive the answers from,
  // and what `exercises show --json` gives scripts.
  std::vector<NamedNumber> numbers = {};
  std::string statement = {};  // the question, in words, with the parameters
  std::vector<Part> parts = {};
  std::string model = {};     // the cost model or convention the answers assume ("" if none)
  std::string solution = {};  // the worked solution, derived from the same values (--explain)
  std::string command = {};   // a ringlab command that demonstrates it
  std::string lab;            // a code lab that goes with it ("" if none)

  const Part* find_part(const std::string& name) const;
  double number(const std::string& name) const;  // throws std::out_of_range for an unknown name
};

// ---- [variants] ------------------------------------------------------------------------------

// Deterministic draws for variant N of an exercise: a splitmix64 stream seeded by a hash of the
// id and N. Variant 0 never draws (it is the source material's numbers).
class VariantDraw {
 public:
  VariantDraw(const std::string& id, int64_t variant);
  int64_t variant() const { return variant_; }
  bool source() const { return variant_ == 0; }

  uint64_t next();
  int64_t integer(int64_t lo, int64_t hi);  // uniform in [lo, hi]
  template <class T>
  T pick(std::initializer_list<T> choices) {
    return *(choices.begin() + integer(0, static_cast<int64_t>(choices.size()) - 1));
  }

 private:
  int64_t variant_;
  uint64_t state_;
};

// ---- [catalog] -------------------------------------------------------------------------------

// One exercise of the catalog, defined once in its own file (exercises/catalog/<id>.cpp): what
// names it, and the function that writes it. Everything that names an exercise reads it from here:
// the listing, the Exercise `make` returns (id, title, source, lab), the variant draws (seeded by
// the id). Each file ends with its entry, in this order:
//   constexpr CatalogEntry kAttentionMemory{"attention-memory", "Memory of the materialised attention scores",
//                                           "the source material, exercise 1", "source ex. 1", write};
struct CatalogEntry {
  std::string_view id;            // "attention-memory"
  std::string_view title;         // "Memory of the materialised attention scores"
  std::string_view source;        // "the source material, exercise 1": `exercises show`, `check`
  std::string_view source_short;  // "source ex. 1": the source column of `ringlab exercises`
  // Draws the parameters from `draw` (variant 0 draws nothing: the source's numbers) and writes
  // the rest of `e`, which comes with this entry's names and the variant: numbers, parameters,
  // statement, parts, model, solution, command.
  void (*write)(VariantDraw& draw, Exercise& e) = nullptr;
  std::string_view lab = "";  // the code lab that goes with it ("" if none)

  // The exercise for variant N: this entry's names, written by `write` with draws seeded by (id, N).
  Exercise make(int64_t variant) const;
};

// Every exercise, in the order `ringlab exercises` lists them (exercises/catalog/catalog.cpp).
const std::vector<CatalogEntry>& exercise_catalog();
// Throws UsageError naming the known ids when there is no such exercise, or when the variant is
// negative.
Exercise make_exercise(std::string_view id, int64_t variant);

// ---- [checking] ------------------------------------------------------------------------------

struct Verdict {
  std::string part;
  std::string answer;  // as typed
  bool right = false;
  std::string read_as;                    // the answer as understood, in the part's unit: "68.7 GB"
  std::string expected;                   // "68.72 GB"
  std::string tolerance;                  // "± 1%"
  std::string note;                       // "accepted as GiB: ..." / "a bare number is read as ms"
  const KnownMistake* mistake = nullptr;  // the answer matches a known mistake
};

// Judges one answer. Throws UsageError when the text cannot be read as the part's quantity.
Verdict judge(const Part& part, const std::string& answer);

// Whether `text` states the part's expected value in a form a student would read as it: the list,
// or the number at 3 to 6 significant digits in the part's unit, or in another unit of its quantity
// with that unit written after it ("4.027 GB", "3.75 GiB", "80 ms", "0.08 s", "12.5%"). A small
// whole number (below 100) counts only with its unit: "8x" is the answer, the 8 of "P = 8" is not.
// `check --hide-answers` withholds a known mistake's explanation that states an expected value.
bool mentions_expected(const std::string& text, const Part& part);

// "± 1%", "± 0.5 percentage points", "exact"
std::string tolerance_text(const Part& part);
// "68.72 GB", "0, 7, 8, 15"
std::string expected_text(const Part& part);

}  // namespace ringlab::exercises
