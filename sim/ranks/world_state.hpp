// Internal to sim/: the shared state of one World::run — mailboxes, rank states, the blocking
// primitive with its event-driven deadlock check, the watchdog thread's loop, and the outcome.
//
// One mutex guards everything shared (RankShared, channels, contexts, the outcome); payload copies
// and checksums happen outside it. What a rank's own thread alone touches (RankLocal: counters,
// trace, labels, sequence counters, its pending faults) needs no lock and is read by others only
// after that thread has been joined.
//
// Implemented in world_state.cpp (messages, blocking, the deadlock check) and
// world_state_reports.cpp (finishing, the watchdog thread, the reports).
//
// Sections: [ids and messages] [waits] [per-rank state] [WorldState]
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "sim/ranks/message.hpp"
#include "sim/ranks/report.hpp"
#include "sim/ranks/world_options.hpp"

namespace ringlab::detail {

using Clock = std::chrono::steady_clock;

Clock::duration to_duration(double seconds);

// ---- [ids and messages] -------------------------------------------------------------------

enum class CollectiveKind : uint8_t { none, barrier, all_gather, all_to_all, reduce_scatter, all_reduce, split };

const char* collective_name(CollectiveKind kind);

// Messages match on (communicator context, source world rank, tag). A collective's internal
// messages live apart (internal = true, tag = the collective's index on that communicator), so
// they never match a user receive.
struct ChannelKey {
  uint64_t context = 0;
  int source = 0;
  int tag = 0;
  bool internal = false;
  auto operator<=>(const ChannelKey&) const = default;
};

struct Message {
  Buffer payload;
  Checksum checksum;      // of the payload as the sender copied it
  uint64_t sequence = 0;  // per (source, destination) world-rank pair, from 1
  int source = 0;         // world ranks
  int destination = 0;
  int tag = -1;                    // user tag, -1 for internal messages
  int step = 0;                    // the sender's step label
  uint64_t rendezvous_id = 0;      // nonzero: the sender waits until this message is received
  Clock::time_point visible_at{};  // a delayed message cannot be received before this
  CollectiveKind collective = CollectiveKind::none;
  int collective_index = -1;
};

// One (context, source, tag) FIFO at a receiver. The k-th message sent on it (arrival index k,
// a dropped message's index included) goes to the k-th receive posted on it (ticket k): which
// receive gets which message never depends on timing.
struct Channel {
  uint64_t arrivals = 0;
  uint64_t tickets = 0;
  uint64_t consumed = 0;
  std::map<uint64_t, Message> queued;  // arrival index -> message not yet received
};

// ---- [waits] ------------------------------------------------------------------------------

enum class WaitKind : uint8_t {
  message,  // for the message with arrival index `ticket` on channel `key`
  match,    // for a receive to be posted for this rank's rendezvous message `rendezvous_id`
};

struct Wait {
  WaitKind kind = WaitKind::message;
  const char* call = "";  // a literal: "recv", "wait (irecv)", "send (rendezvous)", "barrier", ...
  ChannelKey key;         // message waits; for match waits only key.context is used
  uint64_t ticket = 0;
  uint64_t rendezvous_id = 0;
  int peer = -1;  // world rank waited for
  int tag = -1;   // user tag, -1 in a collective
  int collective_index = -1;
};

// ---- [per-rank state] ---------------------------------------------------------------------

struct RankLocal {
  RankCounters counters;
  std::vector<TraceEvent> trace;
  int step = 0;
  std::string label;
  std::vector<uint64_t> next_sequence_to;  // [P], per destination
  std::vector<Fault> pending_faults;       // this rank's planned faults that have not fired
  std::map<std::string, int> groups_made;  // Communicator::group calls per (parent, members)
};

struct RankShared {
  RankState state = RankState::running;
  Wait wait;                    // while blocked
  std::optional<Wait> polling;  // its last call was a test() that found nothing
  int step = 0;
  std::string label;
  std::condition_variable wake;
  std::map<ChannelKey, Channel> mailbox;     // messages sent to this rank
  std::set<uint64_t> unmatched_sends;        // its rendezvous messages no receive was posted for yet
  std::vector<uint64_t> last_sequence_from;  // [P]: highest sequence delivered from each source
};

struct ContextInfo {
  std::string name;                          // "world", "group {0,2}"
  std::vector<int> members;                  // world ranks, in group order
  std::vector<int64_t> collectives_entered;  // per group rank
};

// A sub-communicator's name: "group {0-3,8}" (world ranks in group order; runs of 3+ shortened).
std::string group_name(const std::vector<int>& members);

// ---- [WorldState] -------------------------------------------------------------------------

class WorldState {
 public:
  explicit WorldState(const WorldOptions& options);

  const WorldOptions& options() const { return options_; }
  int ranks() const { return options_.ranks; }
  Clock::time_point origin() const { return origin_; }
  RankLocal& local(int rank) { return local_[static_cast<size_t>(rank)]; }
  BufferPool& pool() { return pool_; }
  double since_origin_us(Clock::time_point when) const;

  void note_progress() { progress_.fetch_add(1, std::memory_order_relaxed); }
  // Compute scopes open on any rank: while there are some, the timeout fallback waits.
  void begin_compute() { computing_.fetch_add(1, std::memory_order_relaxed); }
  void end_compute() {
    computing_.fetch_sub(1, std::memory_order_relaxed);
    note_progress();
  }
  // Throws WorldAborted once the world has stopped.
  void check_alive() const;
  uint64_t new_rendezvous_id() { return next_rendezvous_id_.fetch_add(1, std::memory_order_relaxed); }

  // Labels as the watchdog reports them.
  void set_labels(int rank, int step, const std::string& label);

  // Sub-communicators: the context registered under `key` (created on first use, so every member
  // asking with the same key gets the same one).
  uint64_t context_for(const std::string& key, const std::vector<int>& members);
  // Counts `group_rank`'s entry into the next collective on `context`; returns its index.
  int enter_collective(uint64_t context, int group_rank);

  // Queues `message` for its destination on channel `key`, applying `fault` (already drawn by the
  // sender; corrupt was applied by it). Throws WorldAborted when stopped — or when a duplicate
  // made the receiver stop the world.
  void post(const ChannelKey& key, Message message, std::optional<FaultKind> fault);
  // Posts a receive on `key` at `rank`; returns its ticket.
  uint64_t post_receive(int rank, const ChannelKey& key);
  // Blocks until the message for `wait.key`/`wait.ticket` is visible, takes it.
  Message take(int rank, const Wait& wait);
  // post_receive + take under one lock.
  Message receive(int rank, Wait wait);
  // Non-blocking take; records `wait` as what the rank polls for when nothing is there.
  std::optional<Message> try_take(int rank, const Wait& wait);
  // Rendezvous sends: blocks until a receive is posted for message `wait.rendezvous_id`.
  void wait_matched(int rank, const Wait& wait);
  bool test_matched(int rank, const Wait& wait);

  // The rank function returned (error == nullptr) or threw.
  void finish(int rank, const std::exception_ptr& error);
  // The watchdog thread: returns after stop_watchdog().
  void watch();
  void stop_watchdog();

  // After every rank thread has been joined.
  void fill_report(RunReport& report);

 private:
  bool wait_ready(const RankShared& rank, const Wait& wait, Clock::time_point now,
                  std::optional<Clock::time_point>& wake_at) const;
  void block(std::unique_lock<std::mutex>& lock, int rank, const Wait& wait);
  Message take_locked(int rank, const Wait& wait);
  uint64_t post_ticket_locked(int rank, const ChannelKey& key);
  // A receive was posted for `message`: its rendezvous sender may go on.
  void match_locked(const Message& message);
  void detect_deadlock_locked(Clock::time_point now);
  DeadlockReport deadlock_report_locked(bool timed_out, Clock::time_point now) const;
  bool failed_locked() const { return deadlock_ || fault_ || error_; }
  void abort_locked();
  void record_fault_locked(CommFault fault);
  std::string fault_effect(const Message& message, FaultKind fault) const;

  const WorldOptions options_;
  const Clock::time_point origin_;
  BufferPool pool_;
  std::vector<RankLocal> local_;
  std::atomic<uint64_t> progress_{0};
  std::atomic<int> computing_{0};
  std::atomic<uint64_t> next_rendezvous_id_{1};
  std::atomic<bool> aborted_{false};

  mutable std::mutex mutex_;  // guards everything below
  std::vector<RankShared> shared_;
  std::map<uint64_t, ContextInfo> contexts_;
  std::map<std::string, uint64_t> context_keys_;
  uint64_t next_context_ = 1;
  int running_ = 0;  // ranks in state running
  bool watchdog_stop_ = false;
  std::condition_variable watchdog_wake_;
  std::vector<FaultRecord> fault_records_;
  std::optional<DeadlockReport> deadlock_;
  std::optional<CommFault> fault_;
  std::optional<RankError> error_;
};

}  // namespace ringlab::detail
