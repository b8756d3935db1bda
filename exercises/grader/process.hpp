// Child processes for the grader: run a program in its own process group, capture what it prints,
// and kill the whole group when it outlives its wall-clock limit.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace ringlab::grader {

struct ProcessResult {
  int exit_status = -1;  // when it exited
  int signal = 0;        // when a signal ended it (SIGKILL after a timeout)
  bool timed_out = false;
  double seconds = 0;
  std::string output;  // stdout and stderr together; the last `max_output` bytes
};

// Runs argv[0] with argv; `environment` entries ("NAME=value") are added to the inherited ones.
ProcessResult run_process(const std::vector<std::string>& argv, double timeout_seconds,
                          const std::vector<std::string>& environment = {}, size_t max_output = 64 * 1024);

// "SIGSEGV (segmentation fault)"
std::string signal_text(int signal);

}  // namespace ringlab::grader
