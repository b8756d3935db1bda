// The deadlock watchdog's report.
//
// Detection is event-driven (world_state.cpp): whenever a rank blocks or finishes, if every live
// rank is blocked and no queued or delayed message can complete any of their waits, the world
// stops at once and this report is made. The fallback is a watchdog thread that stops the world
// after WorldOptions::timeout_seconds without progress (e.g. a rank spinning on Request::test).
// Progress is any message sent or received, collective entered, label set or compute scope
// ended; while some rank is inside a compute scope the clock does not run (a long kernel is
// work, not a deadlock).
//
// For each rank the report says the call it is blocked in, the peer (world rank) and tag it waits
// for — for a collective, the ranks that have not entered it — its step label, and the messages
// queued for it that nobody received (a tag mismatch shows up there); then the first cycle of
// the wait-for graph and the injected faults that fired.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ringlab {

enum class RankState : uint8_t {
  running,   // not in a communicator call (timeout reports only)
  polling,   // its last call was a Request::test that found nothing (timeout reports only)
  blocked,   // inside a blocking communicator call
  finished,  // returned from the rank function
};

const char* rank_state_name(RankState state);

struct RankWaitReport {
  int rank = 0;  // world rank
  RankState state = RankState::running;
  std::string call;                 // "recv", "send (rendezvous)", "wait (irecv)", "barrier", ...
  std::string communicator;         // "world" or "group {0,2}" (world ranks)
  int peer = -1;                    // world rank whose message or match it waits for; -1 none
  bool sending = false;             // waits for `peer` to post a receive for its message
  int tag = -1;                     // user tag; -1 for a collective
  int collective_index = -1;        // collectives: which collective on that communicator, from 0
  std::vector<int> not_arrived;     // collectives: world ranks that have not entered it
  std::vector<int> waits_for;       // wait-for graph edges (world ranks)
  int step = 0;                     // step label
  std::string label;                // free-text label
  std::vector<std::string> queued;  // unreceived messages for this rank: "from rank 0 tag 1 (4 floats)"

  // "rank 1 [step 2]: blocked in recv from rank 0, tag 5 (world)"
  std::string describe() const;
};

struct DeadlockReport {
  bool timed_out = false;             // false: detected by event; true: the --timeout fallback
  double detected_after_seconds = 0;  // since the world started
  double timeout_seconds = 0;
  std::vector<RankWaitReport> ranks;  // one per world rank, in order
  std::vector<int> cycle;             // closed: {0, 1, 0}; empty when the waits have no cycle
  std::vector<std::string> faults;    // injected faults that fired, described

  // Multi-line text: the verdict, one line per rank, the cycle ("rank 0 waits for rank 1 waits
  // for rank 0"), unreceived messages, injected faults.
  std::string describe() const;
};

// The first cycle of a wait-for graph (edges[r]: the ranks r waits for), searching from rank 0
// upwards; closed and rotated to start at its smallest rank, e.g. {1, 2, 1}; empty if acyclic.
std::vector<int> find_wait_cycle(const std::vector<std::vector<int>>& edges);

}  // namespace ringlab
