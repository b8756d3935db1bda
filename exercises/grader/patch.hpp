// Applying a unified diff, strictly: how a lab's broken versions are stored. Each one is
// `labs/NN-name/broken/NAME.patch`, a diff against the lab's solution.cpp, so the bug is what the
// patch shows and the rest is the solution as it is today. The grader builds the broken file from
// the two (`ringlab grade LAB broken/NAME`), and so do the grader's negative controls.
//
// The format is what `diff -u` writes for one file (text before the `---` line is ignored):
//     --- a/solution.cpp
//     +++ b/solution.cpp
//     @@ -45,3 +45,3 @@
//      context line
//     -removed line
//     +added line
// A hunk's context and removed lines must match the original exactly: no fuzz, no white-space
// folding. It applies at the line its header names or, when the lines above it have moved, at the
// one place below the previous hunk where its lines match; no such place, or more than one, is
// an error naming the hunk and the first line that differs. (A line left empty by an editor that
// strips trailing blanks counts as an empty context line, as GNU patch reads it.)
//
// To make one: write the broken version, then, in the lab's folder,
//     diff -U1 --label a/solution.cpp --label b/solution.cpp solution.cpp mine.cpp > broken/NAME.patch
#pragma once

#include <stdexcept>
#include <string>

namespace ringlab::grader {

struct PatchError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// `original` with `patch` applied. Throws PatchError when the patch cannot be read or does not
// apply.
std::string apply_patch(const std::string& original, const std::string& patch);

}  // namespace ringlab::grader
