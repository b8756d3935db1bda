// Fault injection: KIND@RANK:STEP, parsed from --inject.
//
// A fault applies to the first message RANK sends while its step label (Communicator::set_step)
// equals STEP — point-to-point or a collective's internal message alike:
//   drop       the message is lost; its receiver waits forever -> the watchdog's deadlock report
//   duplicate  the message arrives twice; the receiver sees a repeated per-(source, destination)
//              sequence number -> a communication fault
//   corrupt    one bit of the payload is flipped after the checksum was taken; the receiver's
//              checksum check fails -> a communication fault
//   delay      the message becomes visible to its receiver only after a delay (WorldOptions,
//              100 ms by default); the result is still correct
//   alter      every value of the payload is negated before its checksum is taken: silent data
//              corruption, which no receiver can tell; the result is wrong, and only checking
//              it against the oracle shows it (a grader uses it to see that a rank computes
//              with the block it received, not with one it reached some other way)
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ringlab {

enum class FaultKind : uint8_t { drop, duplicate, corrupt, delay, alter };

const char* fault_kind_name(FaultKind kind);

struct Fault {
  FaultKind kind = FaultKind::drop;
  int rank = 0;  // world rank whose send is hit
  int step = 0;  // its step label at that send

  std::string to_string() const;  // "drop@1:2"
  friend bool operator==(const Fault&, const Fault&) = default;
};

// At most one fault per (rank, step).
struct FaultPlan {
  std::vector<Fault> faults;

  bool empty() const { return faults.empty(); }
  // "drop@1:2, delay@0:0" or "none"
  std::string to_string() const;
};

// Throws UsageError with one line naming the problem and the fix, e.g.
//   --inject "drop@x:2": RANK "x" is not a whole number; write KIND@RANK:STEP, e.g. drop@1:2
Fault parse_fault(std::string_view text);
// Parses every --inject value; also rejects two faults at the same (rank, step).
FaultPlan parse_fault_plan(const std::vector<std::string>& texts);
// Throws UsageError when a fault names a rank outside 0..ranks-1.
void check_fault_plan(const FaultPlan& plan, int ranks);

// What one planned fault did in a run, for the reports.
struct FaultRecord {
  Fault fault;
  bool fired = false;
  std::string effect;  // "dropped message #3 from rank 1 to rank 2 (tag 0, 64 floats)"

  // "drop@1:2: dropped message ..." or "drop@1:2: never fired (rank 1 sent nothing at step 2)"
  std::string describe() const;
};

}  // namespace ringlab
