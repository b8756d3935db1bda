// The labs' broken versions are patches against their solutions (exercises/grader/patch.hpp):
// the applier is strict (context must match, no fuzz), finds a hunk whose lines moved only where
// that place is unique, and refuses what it cannot read; and every lab's every patch applies to
// the lab's solution.cpp as it is now, describing its bug in the first line. (The grader's
// negative controls, tests/exercises/test_rubrics.cpp, then grade each patched solution.)
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "exercises/grader/patch.hpp"

using ringlab::grader::apply_patch;
using ringlab::grader::PatchError;

namespace {

const std::string kOriginal = "one\ntwo\nthree\nfour\nfive\nsix\nseven\n";

std::string read(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

TEST_CASE("a unified diff applies: removed, added and context lines, several hunks", "[exercises][patch]") {
  const std::string patch =
      "a description above the diff is ignored\n"
      "--- a/solution.cpp\n"
      "+++ b/solution.cpp\n"
      "@@ -1,3 +1,3 @@\n"
      " one\n"
      "-two\n"
      "+TWO\n"
      " three\n"
      "@@ -5,2 +5,4 @@\n"
      " five\n"
      "+five and a half\n"
      "+five and three quarters\n"
      " six\n";
  CHECK(apply_patch(kOriginal, patch) ==
        "one\nTWO\nthree\nfour\nfive\nfive and a half\nfive and three quarters\nsix\nseven\n");
  // A pure insertion with no context (diff -U0) goes after the line its header names.
  CHECK(apply_patch(kOriginal, "--- a\n+++ b\n@@ -2,0 +3 @@\n+two and a half\n") ==
        "one\ntwo\ntwo and a half\nthree\nfour\nfive\nsix\nseven\n");
  // An editor that strips trailing blanks leaves an empty context line empty: still context.
  CHECK(apply_patch("a\n\nb\n", "--- a\n+++ b\n@@ -1,3 +1,3 @@\n a\n\n-b\n+c\n") == "a\n\nc\n");
  // "\ No newline at end of file" after the new last line.
  CHECK(apply_patch("a\nb\n", "--- a\n+++ b\n@@ -2 +2 @@\n-b\n+c\n\\ No newline at end of file\n") == "a\nc");
}

TEST_CASE("a patch is strict: context must match, and a moved hunk only where it is unique", "[exercises][patch]") {
  const std::string patch = "--- a\n+++ b\n@@ -3,2 +3,2 @@\n three\n-four\n+FOUR\n";
  // Lines added above the hunk: it applies where its lines now stand.
  CHECK(apply_patch("zero\n" + kOriginal, patch) == "zero\none\ntwo\nthree\nFOUR\nfive\nsix\nseven\n");
  // A context line that differs, even by a blank, is refused with the line that differs.
  try {
    (void)apply_patch("one\ntwo\nthree \nfour\nfive\n", patch);
    FAIL("a patch whose context differs applied");
  } catch (const PatchError& e) {
    CHECK_THAT(e.what(), Catch::Contains("@@ -3,2 +3,2 @@") && Catch::Contains("line 3 reads 'three '") &&
                             Catch::Contains("expects 'three'"));
  }
  // So is a removed line that is not there.
  CHECK_THROWS_AS(apply_patch("one\ntwo\nthree\n4\n", patch), PatchError);
  // Moved, and matching in two places: the applier does not guess.
  CHECK_THROWS_WITH(apply_patch("three\nfour\nx\nthree\nfour\n", patch), Catch::Contains("match 2 other places"));
}

TEST_CASE("a patch that cannot be read is refused", "[exercises][patch]") {
  CHECK_THROWS_WITH(apply_patch(kOriginal, "no diff here\n"), Catch::Contains("not a unified diff"));
  CHECK_THROWS_WITH(apply_patch(kOriginal, "--- a\n+++ b\n"), Catch::Contains("no hunks"));
  CHECK_THROWS_WITH(apply_patch(kOriginal, "--- a\n+++ b\n@@ -1 +1 @@ x\n-one\n"), Catch::Contains("ends inside hunk"));
  CHECK_THROWS_WITH(apply_patch(kOriginal, "--- a\n+++ b\n@@ one @@\n"), Catch::Contains("not a hunk header"));
  CHECK_THROWS_WITH(apply_patch(kOriginal, "--- a\n+++ b\n@@ -1 +1 @@\n-one\n+ONE\n+extra\n"),
                    Catch::Contains("is not a hunk header"));  // the extra line falls outside the counted hunk
  CHECK_THROWS_WITH(apply_patch(kOriginal, "--- a\n+++ b\n@@ -1,2 +1,2 @@\n one\n*two\n"),
                    Catch::Contains("not a context, removed or added line"));
  CHECK_THROWS_WITH(
      apply_patch(kOriginal, "--- a\n+++ b\n@@ -1 +1 @@\n-one\n+ONE\n--- c\n+++ d\n@@ -1 +1 @@\n-x\n+y\n"),
      Catch::Contains("another file"));
  CHECK_THROWS_WITH(apply_patch(kOriginal, "--- a\n+++ b\n@@ -3 +3 @@\n-three\n+3\n@@ -1 +1 @@\n-one\n+1\n"),
                    Catch::Contains("comes before the hunk above it"));
}

TEST_CASE("every lab's broken patches apply to its solution and say what they break", "[exercises][patch]") {
  const std::filesystem::path labs = std::filesystem::path(RINGLAB_TEST_SOURCE_DIR) / "exercises" / "labs";
  int patches = 0;
  for (const auto& lab : std::filesystem::directory_iterator(labs)) {
    if (!std::filesystem::is_directory(lab.path() / "broken")) continue;
    const std::string solution = read(lab.path() / "solution.cpp");
    REQUIRE_FALSE(solution.empty());
    for (const auto& file : std::filesystem::directory_iterator(lab.path() / "broken")) {
      INFO(file.path().string());
      CHECK(file.path().extension() == ".patch");  // broken versions are patches, nothing else
      std::string broken;
      CHECK_NOTHROW(broken = apply_patch(solution, read(file.path())));  // every patch that fails is listed
      if (broken.empty()) continue;
      CHECK(broken != solution);
      // Its first line names it for what it is, in the lab's words: "// Lab 03 — broken on purpose".
      const std::string number = lab.path().filename().string().substr(0, 2);
      CHECK(broken.rfind("// Lab " + number + " — broken on purpose", 0) == 0);
      ++patches;
    }
  }
  CHECK(patches >= 25);
}
