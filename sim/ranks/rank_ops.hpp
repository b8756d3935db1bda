// Internal to sim/: the steps every communicator operation shares — building a message (one
// copy + checksum), sending it through the fault injector, accepting a received one (checksum,
// counters), copying one into a caller's span, and recording trace events.
#pragma once

#include <span>
#include <string>

#include "sim/ranks/world_state.hpp"

namespace ringlab::detail {

// What a message is for: a user tag, or a collective's kind and index.
struct MessageRoute {
  uint64_t context = 0;
  int destination = 0;  // world rank
  int tag = -1;         // user tag; -1 for a collective
  CollectiveKind collective = CollectiveKind::none;
  int collective_index = -1;
  bool rendezvous = false;

  ChannelKey key(int source) const {
    return collective == CollectiveKind::none ? ChannelKey{context, source, tag, false}
                                              : ChannelKey{context, source, collective_index, true};
  }
};

// Copies `data` into a new message from `rank` and posts it, applying the rank's fault for its
// current step if one is planned. Returns the rendezvous id (0 for an eager message).
uint64_t send_message(WorldState& world, int rank, const MessageRoute& route, std::span<const float> data);

// Verifies a received message's checksum (CommFaultError "corrupt" naming both ranks) and counts it.
void accept_message(WorldState& world, int rank, const Message& message);

// Copies an accepted message's payload into `out` and recycles the payload. A size mismatch is a
// CommFaultError naming both ranks and both sizes; `call` names the operation ("recv_into").
void copy_payload(WorldState& world, int rank, Message& message, std::span<float> out, const char* call);

// A comm-lane trace event from `start` to now (no-op unless tracing). `group` is "" for the world.
void trace_comm(WorldState& world, int rank, const char* name, Clock::time_point start, int peer, int tag,
                int64_t bytes, const std::string& group);

}  // namespace ringlab::detail
