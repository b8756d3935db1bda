// The grader's setup in this build (grader.hpp, Setup): the compiler and libraries CMake
// configured, the labs of the source tree with their own files (starter, solution, broken/NAME),
// and each lab's hand-out headers written once under the grader's cache folder.
#pragma once

#include "exercises/grader/grader.hpp"

namespace ringlab::grader {

Setup build_setup();

// The grader program that kits carry (the ringlab-grade target), or "" when this build has none.
std::string runner_binary();

}  // namespace ringlab::grader
