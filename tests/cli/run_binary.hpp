// Runs a built binary with arguments and captures its exit status, stdout and stderr — for tests
// of the command-line contract. A child that runs longer than `timeout_seconds` is killed.
#pragma once

#include <string>
#include <vector>

namespace ringlab::test {

struct BinaryRun {
  int status = -1;  // exit status; 128 + signal when killed
  std::string out, err;
  std::vector<std::string> err_lines() const;
};

BinaryRun run_binary(const std::string& binary, const std::vector<std::string>& args, double timeout_seconds = 120);

}  // namespace ringlab::test
