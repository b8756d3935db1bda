// The plan walker: every rank's expanded ops in one global order that respects the plan's
// dependencies. Its users — the plan checker, the viewer's model, a dispatcher that enqueues the
// ops asynchronously — write only what an op means to them (a WalkVisitor); the walker owns the
// order, the matching of messages, the arrivals at collectives and the deadlock description.
//
// Order. Round robin over ranks 0, 1, ..., P-1: each rank runs until it must wait for another,
// and the walk ends when no rank can move. The order depends on the ops alone, so it is the same
// on every call. An op is *visited* when it runs:
//   Exchange    at once. Its send becomes a message (numbered 0, 1, 2, ... in walk order) and its
//               receive is posted. A send matches the first posted, unmatched receive on its
//               destination with the same source and tag; a receive the first unmatched such send
//               (MPI's rule). Each match is reported (matched()) after the visit of the later of
//               the two Exchanges, so both ends have been visited by then.
//   Wait        once the receive of its exchange has been matched, and it takes that message; with
//               WalkOptions::sends_need_receiver also once its send has been matched. A Wait for an
//               exchange the rank has not posted (or has already waited for) is visited at once,
//               with no exchange: the plan is wrong, and the user says so.
//   Collective  a rank *enters* its group's n-th collective when it reaches the op (entered(); n
//               counts the rank's collectives of that family: Ulysses group or ring group). The
//               gathering completes when as many ranks have entered as the first one's op has
//               members (completed(), once), and each member's op is visited after that. A rank
//               entering with another kind than the first is flagged, and counted in.
//   the rest    at once.
// Deadlock: when no rank can move and some have ops left, WalkResult::blocked names each of them,
// the op it stopped at and what it waits for. The walk cannot hang: every round moves some rank
// forward by at least one op, or ends the walk.
//
// Cost: O(total ops + rounds x P) time, where a round advances every rank to its next wait; the
// bookkeeping is flat vectors sized by the ops (no per-message node allocations).
//
// Sections: [events] [visitor] [result] [walking]
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "sim/plan/plan.hpp"

namespace ringlab {

// ---- [events] --------------------------------------------------------------------------------

// One op of one rank: `index` into that rank's expanded list.
struct OpRef {
  int64_t rank = -1;
  int64_t index = -1;
  friend bool operator==(const OpRef&, const OpRef&) = default;
};

// The send half of an Exchange, as its sender declared it.
struct WalkMessage {
  int64_t id = -1;  // 0, 1, 2, ... in walk order: an index for the user's own tables
  OpRef sender;     // the Exchange that sent it
  int64_t to = -1;  // destination world rank
  int tag = 0;
  int phase = 0;  // the sender's Exchange: phase and step
  int64_t step = 0;
  Payload payload = Payload::kv;
  int64_t bytes = 0;  // ExchangeOp::bytes of the sender
  int64_t from() const { return sender.rank; }
};

// A group's n-th collective: the ranks that entered it so far.
struct CollectiveGathering {
  int64_t id = 0;                    // 0, 1, 2, ... in order of first entry
  Family family = Family::ring;      // Ulysses group or ring group
  int64_t group = 0;                 // CollectiveOp::group
  int64_t occurrence = 0;            // n: the group's n-th collective, from 0
  const CollectiveOp* op = nullptr;  // the first rank's to enter: kind, members, bytes
  std::vector<OpRef> entered;        // in order of entry
  bool complete() const { return op && entered.size() >= op->members.size(); }
  Collective kind() const { return op->collective; }
  // Members of op that have not entered, ascending.
  std::vector<int64_t> missing() const;
};

// One visited op and what the walk matched for it. Pointers are valid during the call only.
struct WalkVisit {
  OpRef at;
  const Op* op = nullptr;
  // Exchange: the message it just sent (nullptr when it only receives).
  // Wait: the message its exchange sent, if any (the user may need to wait for it too).
  const WalkMessage* sent = nullptr;
  // Wait only: the Exchange it completes (nullptr: never posted), its index, and the message its
  // receive takes (nullptr when the exchange does not receive).
  const ExchangeOp* exchange = nullptr;
  int64_t exchange_index = -1;
  const WalkMessage* received = nullptr;
  // Collective only: the completed gathering the op belongs to.
  const CollectiveGathering* gathering = nullptr;
};

struct CollectiveEntry {
  OpRef at;
  const Op* op = nullptr;
  const CollectiveOp* collective = nullptr;  // the entering rank's own op
  const CollectiveGathering* gathering = nullptr;
  bool kind_mismatch = false;  // its kind differs from the gathering's
};

// ---- [visitor] -------------------------------------------------------------------------------

// What a user of the walk writes. Callbacks run in walk order, on the caller's thread.
class WalkVisitor {
 public:
  WalkVisitor() = default;
  WalkVisitor(const WalkVisitor&) = default;
  WalkVisitor& operator=(const WalkVisitor&) = default;
  virtual ~WalkVisitor() = default;

  // Every visited op, once (see the order above).
  virtual void visit(const WalkVisit& visit) = 0;
  // A message met its receive: `receive` is the receiving Exchange. Called after the visit of the
  // later of the two Exchanges (where an asynchronous dispatcher can enqueue the copy).
  virtual void matched(const WalkMessage& /*message*/, const OpRef& /*receive*/) {}
  // A rank reached a Collective op and entered its gathering (before any visit of that op).
  virtual void entered(const CollectiveEntry& /*entry*/) {}
  // Every member has entered: called once per gathering, right after the last entered().
  virtual void completed(const CollectiveGathering& /*gathering*/) {}
};

struct WalkOptions {
  // A Wait whose exchange sends also waits until the destination has posted the receive of that
  // message (rendezvous: a dispatcher that can only enqueue the copy then, as gpu-streams). By
  // default sends are buffered (eager), as the simulator's message queues are.
  bool sends_need_receiver = false;
};

// ---- [result] --------------------------------------------------------------------------------

// A rank that cannot move when the walk ends, and what it waits for.
struct BlockedRank {
  enum class Waits : uint8_t {
    message,     // a Wait whose receive no send matches: `peer` never sends it (tag `tag`)
    receiver,    // sends_need_receiver: a Wait whose send `peer` never posts a receive for
    collective,  // a Collective whose other members never enter: `missing`
  };
  OpRef at;  // the op it stopped at
  int phase = 0;
  int64_t step = 0;
  Waits waits = Waits::message;
  int64_t peer = -1;
  int tag = -1;
  Collective collective = Collective::all_gather_kv;  // collective: its kind
  std::vector<int64_t> missing;                       // collective: members that never entered

  // What it waits for, one clause: "waits for rank 3 (tag 4), which never sends it",
  // "waits in all-gather K/V for ranks that never arrive".
  std::string what() const;
};

struct WalkResult {
  int64_t visited = 0;                  // ops visited
  int64_t delivered = 0;                // messages taken by a Wait
  std::vector<BlockedRank> blocked;     // by rank; empty when every rank ran all its ops
  std::vector<WalkMessage> unreceived;  // messages no Wait took, by (from, to, tag, id)
  bool finished() const { return blocked.empty(); }
};

// The one deadlock description, a line per blocked rank:
// "rank 2, step 1 (ring forward): waits for rank 1 (tag 4), which never sends it".
std::string describe_deadlock(const Plan& plan, const WalkResult& result);

// ---- [walking] -------------------------------------------------------------------------------

// Every rank's expanded ops: [rank] -> expand(plan, rank).
std::vector<std::vector<Op>> expand_all(const Plan& plan);

// Walks `ops` ([rank], normally expand_all(plan)) calling `visitor`. Throws std::invalid_argument
// when ops.size() != plan.ranks().
WalkResult walk_plan(const Plan& plan, std::span<const std::vector<Op>> ops, WalkVisitor& visitor,
                     const WalkOptions& options = {});

}  // namespace ringlab
