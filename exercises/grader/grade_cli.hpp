// The command line of grading, shared by `ringlab grade` and the kits' `ringlab-grade`: its
// options, and running it (exit 0 every criterion passed, 1 some did not or it did not compile,
// 2 an unknown lab, file or criterion, or an output file that cannot be written).
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "exercises/grader/grader.hpp"

namespace ringlab::grader {

struct GradeArgs {
  GradeOptions options;
  bool json = false, list = false, no_cache = false;
  std::string format = "text", output, run_as;
  double memory_mib = 0;
};

void add_grade_options(CLI::App& command, const std::shared_ptr<GradeArgs>& args);
int run_grade(GradeArgs& args);

// A user's uid and gid: a name from /etc/passwd, or "UID" / "UID:GID". Throws UsageError.
std::pair<int, int> find_user(const std::string& user);

}  // namespace ringlab::grader
