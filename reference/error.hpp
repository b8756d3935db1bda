// Errors a user can cause, and the exit status each maps to (the command-line contract: README, "Commands").
//
//   UsageError   bad input or usage: an unknown flag, sizes that do not divide, a malformed .npy,
//                NaN in the inputs...                                            -> exit 2
//   CommError    a deadlock or a communication fault detected by the simulator    -> exit 3
//
// Messages are one line: the problem, then the fix ("S=1000 is not divisible by 2P=8 as the zigzag
// layout needs; pick S a multiple of 8"). Nothing that a user can cause aborts or prints a stack.
#pragma once

#include <stdexcept>
#include <string>

namespace ringlab {

enum ExitStatus : int {
  kExitVerified = 0,
  kExitMismatch = 1,
  kExitUsage = 2,
  kExitCommFault = 3,
};

class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class CommError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace ringlab
