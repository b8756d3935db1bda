// Communication faults the simulator detects, and the exception that releases the other ranks.
//
//   CommFault       structured: a duplicate (sequence number seen twice), a corrupt payload
//                   (checksum mismatch), a size mismatch, a collective mismatch (two ranks in
//                   different collectives, or with different sizes). Always names both ranks.
//   CommFaultError  the CommError (exit status 3) a rank throws when it detects one.
//   WorldAborted    what every blocking call of the other ranks throws once the world stops
//                   (deadlock, fault, or an exception on some rank). Do not catch it in rank
//                   code; World::run reports the original problem once.
#pragma once

#include <cstdint>
#include <exception>
#include <string>

#include "reference/error.hpp"

namespace ringlab {

struct CommFault {
  std::string kind;       // "duplicate" | "corrupt" | "size mismatch" | "collective mismatch"
  int detected_by = -1;   // world rank that detected it (the receiver)
  int peer = -1;          // world rank at the other end (the sender)
  int tag = -1;           // user tag, or -1 for a collective's internal message
  int step = -1;          // the sender's step label when it sent the message
  uint64_t sequence = 0;  // per-(peer, detected_by) sequence number of the message, 0 if none
  std::string detail;     // one line naming both ranks, e.g. "rank 2 received message #3 ... twice"

  std::string describe() const { return kind + ": " + detail; }
};

class CommFaultError : public CommError {
 public:
  explicit CommFaultError(CommFault fault) : CommError(fault.describe()), fault_(std::move(fault)) {}
  const CommFault& fault() const { return fault_; }

 private:
  CommFault fault_;
};

class WorldAborted : public std::exception {
 public:
  const char* what() const noexcept override { return "ringlab: the simulated world was aborted"; }
};

}  // namespace ringlab
