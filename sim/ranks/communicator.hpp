// The communicator API a rank function gets from World::run — what students write ring loops
// against and what the plan executors use.
//
// Ranks and peers are numbered within the communicator (the world, or a sub-communicator from
// split/group); reports and traces name world ranks. Payloads are float buffers:
//   sends copy the caller's span once into the message;
//   receives returning a Buffer move the message's buffer out (no second copy);
//   *_into receives copy into the caller's span and fail clearly on a size mismatch.
// Matching is per (source, tag) FIFO within a communicator; collectives combine in rank order.
// Nothing here depends on thread timing, so results are bitwise identical run to run.
// A Communicator (and its Requests) belongs to its rank's thread: call it from that thread only.
//
// Errors: a bad argument (peer out of range, negative tag, a size that does not split into
// chunks) throws UsageError; a detected communication fault throws CommFaultError (a CommError);
// once the world has stopped, every call throws WorldAborted (sim/ranks/comm_fault.hpp).
//
// Sections: [labels for compute] [Request] [Communicator] [ComputeScope]
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sim/ranks/counters.hpp"
#include "sim/ranks/message.hpp"
#include "sim/ranks/world_options.hpp"

namespace ringlab {

namespace detail {
class WorldState;
struct Message;
enum class CollectiveKind : uint8_t;
}  // namespace detail

// ---- [labels for compute] -----------------------------------------------------------------

// Which attention block a compute scope works on; -1 / empty when not applicable.
struct BlockLabels {
  int q_block = -1;
  int kv_block = -1;
  std::string mask;  // "full", "causal", "diagonal", ...
};

// ---- [Request] ----------------------------------------------------------------------------

// A non-blocking send or receive. Move-only (a moved-from request is empty); waiting is optional
// for a send, and a receive that is never waited for leaves its message unreceived (the deadlock
// report lists such messages). A request belongs to its rank's thread, like the communicator.
class Request {
 public:
  Request();  // an empty request: done; wait() returns an empty Buffer
  Request(Request&&) noexcept;
  Request& operator=(Request&&) noexcept;
  ~Request();

  // Blocks until done. A receive returns the message's buffer (moved out, once); a send returns
  // an empty Buffer once it is complete (eager: at once; rendezvous: once a matching receive
  // has been posted).
  Buffer wait();
  // A receive only: copies the message into `out`; a size mismatch is a CommFaultError naming
  // both ranks and both sizes.
  void wait_into(std::span<float> out);
  // Non-blocking: true once done. Polling test() in a loop is allowed but invisible to the
  // event-driven deadlock check; the --timeout fallback catches a poll that never succeeds.
  bool test();
  bool done() const { return complete_; }

 private:
  friend class Communicator;
  // A receive: blocks until its message has arrived and takes it from the queue (once).
  void arrive();
  enum class Kind : uint8_t { none, send, recv };

  detail::WorldState* world_ = nullptr;
  int rank_ = -1;  // world rank that owns it
  Kind kind_ = Kind::none;
  bool complete_ = true;
  bool taken_ = false;  // a receive's buffer was handed out
  uint64_t context_ = 0;
  int peer_ = -1;  // world rank
  int tag_ = -1;
  uint64_t ticket_ = 0;                       // receive: which message of the (peer, tag) FIFO
  uint64_t rendezvous_id_ = 0;                // rendezvous send
  std::string group_;                         // for trace events: "" for the world
  std::unique_ptr<detail::Message> arrived_;  // a receive's message, once taken
};

// ---- [Communicator] -----------------------------------------------------------------------

class Communicator {
 public:
  int rank() const { return rank_; }  // in this communicator
  int size() const { return static_cast<int>(members_.size()); }
  int world_rank() const { return world_rank_; }
  int world_size() const;
  const std::vector<int>& members() const { return members_; }  // world ranks, by rank here
  const std::string& name() const { return name_; }             // "world", or "group {0,2}" (world ranks)
  SendMode send_mode() const;

  // Point-to-point. Tags are >= 0.
  void send(int dst, int tag, std::span<const float> data);
  Buffer recv(int src, int tag);
  void recv_into(int src, int tag, std::span<float> out);
  Request isend(int dst, int tag, std::span<const float> data);
  Request irecv(int src, int tag);
  // Sends `data` to `dst` and receives from `src` as one operation (never deadlocks against a
  // matching sendrecv, in either send mode) — the ring step.
  Buffer sendrecv(int dst, int send_tag, std::span<const float> data, int src, int recv_tag);
  void sendrecv_into(int dst, int send_tag, std::span<const float> data, int src, int recv_tag, std::span<float> out);

  // Collectives: every member calls them in the same order. Sizes below are in floats, P = size().
  void barrier();
  // input: n floats, the same n on every rank -> (P n): rank r's input at [r n, (r+1) n).
  Buffer all_gather(std::span<const float> input);
  // input: (P c), chunk j for rank j -> (P c): chunk i came from rank i (MPI_Alltoall layout).
  Buffer all_to_all(std::span<const float> input);
  // input: (P c) -> c: the sum over ranks 0, 1, ..., P-1 (in that order) of their chunk `rank()`.
  Buffer reduce_scatter(std::span<const float> input);
  // input: n -> n: the sum over ranks 0, 1, ..., P-1 in that order; identical on every rank.
  Buffer all_reduce(std::span<const float> input);

  // Sub-communicators. split: collective over this communicator (MPI_Comm_split): members with the
  // same color (>= 0) form a group, ordered by (key, rank here). group: the listed world ranks,
  // in that order; each listed rank calls it (with the same list), the others do not.
  Communicator split(int color, int key);
  Communicator group(const std::vector<int>& world_ranks);

  // Labels used by the watchdog report, fault injection (KIND@RANK:STEP) and trace events; shared
  // by every communicator of this rank. The step starts at 0.
  void set_step(int step);
  void set_step(int step, std::string label);
  void set_label(std::string label);
  int step() const;
  const std::string& label() const;

  // Runs `work` as a compute scope (see ComputeScope).
  void compute(std::string_view name, double flops, const BlockLabels& labels, const std::function<void()>& work);

  // Hands a received buffer back so a later send of the same size reuses its memory (optional;
  // saves the page faults of a fresh allocation on large messages).
  void recycle(Buffer&& buffer);

  const RankCounters& counters() const;

 private:
  friend class World;
  friend class ComputeScope;
  Communicator(detail::WorldState& world, int world_rank, uint64_t context, std::vector<int> members);

  // The world rank of `peer` (a rank here); UsageError when out of range or the tag is negative.
  int peer_world(int peer, int tag, const char* call) const;
  Request start_send(int dst, int tag, std::span<const float> data, bool rendezvous, const char* call);
  // A request of this communicator to or from world rank `peer` (the rest of its state set by the caller).
  Request new_request(Request::Kind kind, int peer, int tag) const;
  // Blocking receive of the next (src, tag) message, checksum verified and counted.
  detail::Message receive_message(int src, int tag, const char* call);
  // A sendrecv's last part, once its message has arrived: waits until the send part is matched
  // (rendezvous), then traces the call from `start` as one "sendrecv".
  void finish_sendrecv(const Request& outgoing, int send_tag, int64_t bytes, const char* send_part,
                       std::chrono::steady_clock::time_point start);
  // Collectives: enter the next collective on this communicator; its index.
  int enter_collective();
  // Sends `chunk` to group rank `member` as part of collective `index`.
  void send_chunk(int member, int index, detail::CollectiveKind kind, std::span<const float> chunk);
  // Receives group rank `member`'s message for collective `index`, checking its kind and size.
  Buffer receive_chunk(int member, int index, detail::CollectiveKind kind, size_t expected_floats);
  // all_gather (sum = false) and all_reduce (sum = true): every member sends its whole input to
  // every other; traced as one call `name`.
  Buffer replicate(detail::CollectiveKind kind, const char* name, std::span<const float> input, bool sum);
  // Every member's `own.size()` floats for collective `index` (this rank's are `own`), laid out in
  // rank order: member m's at m * own.size().
  Buffer gather_in_rank_order(int index, detail::CollectiveKind kind, std::span<const float> own);
  // The sum over the group of every member's `own.size()` floats for collective `index` (this
  // rank's are `own`), added in rank order: chunk of rank 0, + rank 1, ... (one fixed order).
  Buffer sum_in_rank_order(int index, detail::CollectiveKind kind, std::span<const float> own);

  detail::WorldState* world_;
  int world_rank_;
  uint64_t context_;
  std::vector<int> members_;
  int rank_;
  std::string name_;
  std::string trace_group_;  // "" for the world, else name_
};

// ---- [ComputeScope] -----------------------------------------------------------------------

// Times a piece of compute: adds its duration to the rank's compute_seconds and its flops to the
// counters, and records a compute-lane trace event with step, label, q/kv block, mask and flops.
// Throws WorldAborted at construction when the world has stopped (so aborted ranks stop early).
class ComputeScope {
 public:
  ComputeScope(Communicator& comm, std::string name, double flops = 0, BlockLabels labels = {});
  ~ComputeScope();
  ComputeScope(const ComputeScope&) = delete;
  ComputeScope& operator=(const ComputeScope&) = delete;

 private:
  detail::WorldState* world_;
  int rank_;
  std::string name_;
  double flops_;
  BlockLabels labels_;
  std::string group_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace ringlab
