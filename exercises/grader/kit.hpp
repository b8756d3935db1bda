// Grader kits: a folder that grades submissions with no ringlab source tree or build around it.
// `ringlab autograder LAB DIR` makes one for one lab as a Gradescope autograder (setup.sh,
// run_autograder); `ringlab student-kit DIR` makes one for every lab, with the hand-outs, for
// students. Either holds the grader program (ringlab-grade), the labs' prebuilt harness and runtime
// archives, each lab's hand-out headers and its list of criteria, and grader.json tying them
// together by paths relative to the kit: no path of the machine that made it, and no solution,
// broken version, hidden test source or answer key.
#pragma once

#include <string>
#include <vector>

#include "exercises/grader/grader.hpp"

namespace ringlab::grader {

// The setup of the kit in `directory` (its grader.json); throws UsageError when it is not one.
Setup load_kit(const std::string& directory);

// ---- making kits (in ringlab; needs this build) ------------------------------------------------

// Writes an autograder for `lab` into `directory` (which must not exist, or be empty), whole or not
// at all. Returns the files written, relative to it.
std::vector<std::string> write_autograder(const LabInfo& lab, const std::string& directory);
// Writes a student distribution of every lab in this build into `directory`.
std::vector<std::string> write_student_kit(const std::string& directory);

}  // namespace ringlab::grader
