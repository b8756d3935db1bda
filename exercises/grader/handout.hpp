// `ringlab handout LAB DIR`: a lab's student folder - what a student needs to do the lab and grade
// it with an installed or built ringlab, and nothing of the answer: no solution, no broken
// versions, no hidden tests.
#pragma once

#include <string>
#include <vector>

#include "exercises/grader/grader.hpp"

namespace ringlab::grader {

// The files of `lab`'s hand-out, relative to its folder, with their contents: README.md (the lab's
// README, its paths made relative to the hand-out and its list of files rewritten), starter.cpp,
// lab.hpp, the ringlab headers these include and those the README names (include/..., at their
// repository paths: the grader compiles submissions against exactly these), for a GPU lab the
// stand-ins for CUDA's two type headers (include/no-cuda/), and a Makefile (make check: compile
// alone; make grade) with no path of this machine in it.
struct HandoutFile {
  std::string path, content;
};
std::vector<HandoutFile> handout_files(const LabInfo& lab);

// Writes them into `directory`, which must not exist or be empty; the folder appears whole or not
// at all. Throws UsageError otherwise. Returns the paths written, relative to `directory`.
std::vector<std::string> write_handout(const LabInfo& lab, const std::string& directory);

// Files that must never be in a hand-out: a lab's solution, broken versions and hidden tests.
bool is_answer_file(const std::string& relative_path);

}  // namespace ringlab::grader
