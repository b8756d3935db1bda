#include "sim/ranks/rank_ops.hpp"

#include <algorithm>
#include <cstring>

namespace ringlab::detail {
namespace {

// The fault planned for this rank at its current step, if any; it fires once.
std::optional<FaultKind> draw_fault(RankLocal& local) {
  auto& pending = local.pending_faults;
  const auto found = std::find_if(pending.begin(), pending.end(), [&](const Fault& f) { return f.step == local.step; });
  if (found == pending.end()) return std::nullopt;
  const FaultKind kind = found->kind;
  pending.erase(found);
  return kind;
}

// Flips bit 22 (the top mantissa bit) of the middle float; an empty payload gets its checksum hit.
void flip_a_bit(Message& message) {
  if (message.payload.empty()) {
    message.checksum.bits ^= 1u;
    return;
  }
  float& target = message.payload[message.payload.size() / 2];
  uint32_t word;
  std::memcpy(&word, &target, sizeof word);
  word ^= 1u << 22;
  std::memcpy(&target, &word, sizeof word);
}

std::string about(const Message& message) {
  std::string text = "message #" + std::to_string(message.sequence) + " from rank " + std::to_string(message.source);
  if (message.collective != CollectiveKind::none) {
    text += " (" + std::string(collective_name(message.collective)) + " #" + std::to_string(message.collective_index);
  } else {
    text += " (tag " + std::to_string(message.tag);
  }
  return text + ", sent at step " + std::to_string(message.step) + ")";
}

}  // namespace

uint64_t send_message(WorldState& world, int rank, const MessageRoute& route, std::span<const float> data) {
  world.check_alive();
  RankLocal& local = world.local(rank);
  Message message;
  message.checksum = make_payload(world.pool(), data, message.payload);
  message.sequence = ++local.next_sequence_to[static_cast<size_t>(route.destination)];
  message.source = rank;
  message.destination = route.destination;
  message.tag = route.tag;
  message.step = local.step;
  message.collective = route.collective;
  message.collective_index = route.collective_index;
  message.rendezvous_id = route.rendezvous ? world.new_rendezvous_id() : 0;
  const std::optional<FaultKind> fault = draw_fault(local);
  if (fault == FaultKind::corrupt) flip_a_bit(message);
  if (fault == FaultKind::alter) {  // silently: the checksum is taken again, of the altered payload
    for (float& value : message.payload) value = -value;
    message.checksum = checksum_of(message.payload);
  }
  const uint64_t rendezvous_id = message.rendezvous_id;
  ++local.counters.messages_sent;
  local.counters.bytes_sent += static_cast<int64_t>(data.size_bytes());
  world.post(route.key(rank), std::move(message), fault);
  return rendezvous_id;
}

void accept_message(WorldState& world, int rank, const Message& message) {
  if (checksum_of(message.payload) != message.checksum) {
    throw CommFaultError({"corrupt", rank, message.source, message.tag, message.step, message.sequence,
                          "rank " + std::to_string(rank) + " received " + about(message) +
                              " whose checksum does not match its payload: corrupted in flight"});
  }
  RankCounters& counters = world.local(rank).counters;
  ++counters.messages_received;
  counters.bytes_received += static_cast<int64_t>(message.payload.size() * sizeof(float));
}

void copy_payload(WorldState& world, int rank, Message& message, std::span<float> out, const char* call) {
  if (message.payload.size() != out.size()) {
    throw CommFaultError({"size mismatch", rank, message.source, message.tag, message.step, message.sequence,
                          "rank " + std::to_string(rank) + " " + call + " expects " + std::to_string(out.size()) +
                              " floats but rank " + std::to_string(message.source) + " sent " +
                              std::to_string(message.payload.size()) + " in " + about(message)});
  }
  std::copy(message.payload.begin(), message.payload.end(), out.begin());
  world.pool().give_back(std::move(message.payload));
}

void trace_comm(WorldState& world, int rank, const char* name, Clock::time_point start, int peer, int tag,
                int64_t bytes, const std::string& group) {
  if (!world.options().trace) return;
  RankLocal& local = world.local(rank);
  TraceEvent event;
  event.name = name;
  event.rank = rank;
  event.lane = TraceLane::comm;
  event.start_us = world.since_origin_us(start);
  event.duration_us = world.since_origin_us(Clock::now()) - event.start_us;
  event.step = local.step;
  event.label = local.label;
  event.peer = peer;
  event.tag = tag;
  event.bytes = bytes;
  event.group = group;
  local.trace.push_back(std::move(event));
}

}  // namespace ringlab::detail
