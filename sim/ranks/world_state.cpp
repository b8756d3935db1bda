// Sections: [helpers] [setup and labels] [posting and taking messages] [blocking and the
// deadlock check]. Finishing, the watchdog thread and the reports: world_state_reports.cpp.
#include "sim/ranks/world_state.hpp"

#include <algorithm>
#include <cstdio>

#include "reference/names.hpp"

namespace ringlab::detail {
namespace {

// ---- [helpers] ----------------------------------------------------------------------------

double seconds_between(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

// "message #3 from rank 1 to rank 2 (tag 0, 64 floats)"
std::string message_name(const Message& message) {
  std::string text = "message #" + std::to_string(message.sequence) + " from rank " + std::to_string(message.source) +
                     " to rank " + std::to_string(message.destination) + " (";
  if (message.collective != CollectiveKind::none) {
    text += std::string(collective_name(message.collective)) + " #" + std::to_string(message.collective_index);
  } else {
    text += "tag " + std::to_string(message.tag);
  }
  return text + ", " + std::to_string(message.payload.size()) + " floats, sent at step " +
         std::to_string(message.step) + ")";
}

}  // namespace

Clock::duration to_duration(double seconds) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

const char* collective_name(CollectiveKind kind) {
  constexpr const char* kNames[] = {"point-to-point", "barrier",    "all_gather", "all_to_all",
                                    "reduce_scatter", "all_reduce", "split"};
  return name_of(kNames, kind);
}

std::string group_name(const std::vector<int>& members) {
  std::string text = "group {";
  for (size_t i = 0; i < members.size();) {
    size_t end = i + 1;  // a run of consecutive world ranks members[i..end)
    while (end < members.size() && members[end] == members[end - 1] + 1) ++end;
    if (i > 0) text += ",";
    if (end - i >= 3) {
      text += std::to_string(members[i]) + "-" + std::to_string(members[end - 1]);
    } else {
      for (size_t j = i; j < end; ++j) text += (j > i ? "," : "") + std::to_string(members[j]);
    }
    i = end;
  }
  return text + "}";
}

// ---- [setup and labels] -------------------------------------------------------------------

WorldState::WorldState(const WorldOptions& options)
    : options_(options), origin_(Clock::now()), pool_(options.buffer_pool_bytes),
      local_(static_cast<size_t>(options.ranks)), shared_(static_cast<size_t>(options.ranks)), running_(options.ranks) {
  const auto ranks = static_cast<size_t>(options.ranks);
  for (size_t rank = 0; rank < ranks; ++rank) {
    local_[rank].next_sequence_to.assign(ranks, 0);
    shared_[rank].last_sequence_from.assign(ranks, 0);
  }
  for (const Fault& fault : options.faults.faults) {
    local_[static_cast<size_t>(fault.rank)].pending_faults.push_back(fault);
    fault_records_.push_back({fault, false, {}});
  }
  std::vector<int> everyone(ranks);
  for (size_t rank = 0; rank < ranks; ++rank) everyone[rank] = static_cast<int>(rank);
  contexts_[0] = {"world", everyone, std::vector<int64_t>(ranks, 0)};
}

double WorldState::since_origin_us(Clock::time_point when) const {
  return std::chrono::duration<double, std::micro>(when - origin_).count();
}

void WorldState::check_alive() const {
  if (aborted_.load(std::memory_order_acquire)) throw WorldAborted();
}

void WorldState::set_labels(int rank, int step, const std::string& label) {
  std::lock_guard lock(mutex_);
  RankShared& shared = shared_[static_cast<size_t>(rank)];
  shared.step = step;
  shared.label = label;
  note_progress();
}

uint64_t WorldState::context_for(const std::string& key, const std::vector<int>& members) {
  std::lock_guard lock(mutex_);
  const auto found = context_keys_.find(key);
  if (found != context_keys_.end()) return found->second;
  const uint64_t context = next_context_++;
  context_keys_[key] = context;
  contexts_[context] = {group_name(members), members, std::vector<int64_t>(members.size(), 0)};
  return context;
}

int WorldState::enter_collective(uint64_t context, int group_rank) {
  std::lock_guard lock(mutex_);
  note_progress();
  return static_cast<int>(contexts_.at(context).collectives_entered[static_cast<size_t>(group_rank)]++);
}

// ---- [posting and taking messages] --------------------------------------------------------

std::string WorldState::fault_effect(const Message& message, FaultKind fault) const {
  switch (fault) {
    case FaultKind::drop: return "dropped " + message_name(message);
    case FaultKind::duplicate: return "duplicated " + message_name(message);
    case FaultKind::corrupt: return "flipped a bit of " + message_name(message);
    case FaultKind::alter: return "negated every value of " + message_name(message) + " (its checksum made to match)";
    case FaultKind::delay: {
      char delay[32];
      std::snprintf(delay, sizeof delay, "%.3f s", options_.fault_delay_seconds);
      return "delayed " + message_name(message) + " by " + delay;
    }
  }
  return "?";
}

void WorldState::post(const ChannelKey& key, Message message, std::optional<FaultKind> fault) {
  std::lock_guard lock(mutex_);
  check_alive();
  note_progress();
  const int from = message.source;
  shared_[static_cast<size_t>(from)].polling.reset();
  if (message.rendezvous_id != 0) shared_[static_cast<size_t>(from)].unmatched_sends.insert(message.rendezvous_id);
  if (fault) {
    for (FaultRecord& record : fault_records_) {
      if (!record.fired && record.fault.rank == from && record.fault.step == message.step &&
          record.fault.kind == *fault) {
        record.fired = true;
        record.effect = fault_effect(message, *fault);
        break;
      }
    }
  }
  RankShared& receiver = shared_[static_cast<size_t>(message.destination)];
  std::optional<Message> duplicate;
  if (fault == FaultKind::duplicate) duplicate = message;
  if (fault == FaultKind::delay) message.visible_at = Clock::now() + to_duration(options_.fault_delay_seconds);

  // The receiver's side of delivery: a sequence number it has seen before is a duplicate.
  auto deliver = [&](Message&& arriving) {
    Channel& channel = receiver.mailbox[key];
    uint64_t& last = receiver.last_sequence_from[static_cast<size_t>(from)];
    if (arriving.sequence <= last) {
      record_fault_locked({"duplicate", arriving.destination, from, arriving.tag, arriving.step, arriving.sequence,
                           "rank " + std::to_string(arriving.destination) + " received " + message_name(arriving) +
                               " a second time (sequence number already seen)"});
      throw WorldAborted();
    }
    last = arriving.sequence;
    const uint64_t index = channel.arrivals++;
    // A rendezvous send completes once a receive for it is posted, even before it is waited on.
    if (index < channel.tickets) match_locked(arriving);
    channel.queued.emplace(index, std::move(arriving));
    receiver.wake.notify_one();
  };
  if (fault == FaultKind::drop) {
    ++receiver.mailbox[key].arrivals;  // a hole: the receive waiting for this index waits forever
    return;
  }
  deliver(std::move(message));
  if (duplicate) deliver(std::move(*duplicate));
}

void WorldState::match_locked(const Message& message) {
  if (message.rendezvous_id == 0) return;
  RankShared& sender = shared_[static_cast<size_t>(message.source)];
  if (sender.unmatched_sends.erase(message.rendezvous_id) > 0) sender.wake.notify_one();
}

uint64_t WorldState::post_ticket_locked(int rank, const ChannelKey& key) {
  Channel& channel = shared_[static_cast<size_t>(rank)].mailbox[key];
  const uint64_t ticket = channel.tickets++;
  const auto waiting = channel.queued.find(ticket);
  if (waiting != channel.queued.end()) match_locked(waiting->second);
  return ticket;
}

uint64_t WorldState::post_receive(int rank, const ChannelKey& key) {
  std::lock_guard lock(mutex_);
  check_alive();
  return post_ticket_locked(rank, key);
}

Message WorldState::take_locked(int rank, const Wait& wait) {
  RankShared& me = shared_[static_cast<size_t>(rank)];
  const auto channel_entry = me.mailbox.find(wait.key);
  Channel& channel = channel_entry->second;
  Message message = std::move(channel.queued.extract(wait.ticket).mapped());
  ++channel.consumed;
  // A settled channel is the same as a fresh one: forget it so the mailbox stays small.
  if (channel.queued.empty() && channel.consumed == channel.arrivals && channel.consumed == channel.tickets) {
    me.mailbox.erase(channel_entry);
  }
  match_locked(message);
  me.polling.reset();
  note_progress();
  return message;
}

Message WorldState::take(int rank, const Wait& wait) {
  std::unique_lock lock(mutex_);
  block(lock, rank, wait);
  return take_locked(rank, wait);
}

Message WorldState::receive(int rank, Wait wait) {
  std::unique_lock lock(mutex_);
  check_alive();
  wait.ticket = post_ticket_locked(rank, wait.key);
  block(lock, rank, wait);
  return take_locked(rank, wait);
}

std::optional<Message> WorldState::try_take(int rank, const Wait& wait) {
  std::lock_guard lock(mutex_);
  check_alive();
  RankShared& me = shared_[static_cast<size_t>(rank)];
  std::optional<Clock::time_point> wake_at;
  if (wait_ready(me, wait, Clock::now(), wake_at)) return take_locked(rank, wait);
  me.polling = wait;
  return std::nullopt;
}

void WorldState::wait_matched(int rank, const Wait& wait) {
  std::unique_lock lock(mutex_);
  block(lock, rank, wait);
}

bool WorldState::test_matched(int rank, const Wait& wait) {
  std::lock_guard lock(mutex_);
  check_alive();
  RankShared& me = shared_[static_cast<size_t>(rank)];
  std::optional<Clock::time_point> wake_at;
  if (wait_ready(me, wait, Clock::now(), wake_at)) {
    me.polling.reset();
    return true;
  }
  me.polling = wait;
  return false;
}

// ---- [blocking and the deadlock check] ----------------------------------------------------

bool WorldState::wait_ready(const RankShared& rank, const Wait& wait, Clock::time_point now,
                            std::optional<Clock::time_point>& wake_at) const {
  if (wait.kind == WaitKind::match) return !rank.unmatched_sends.contains(wait.rendezvous_id);
  const auto channel = rank.mailbox.find(wait.key);
  if (channel == rank.mailbox.end()) return false;
  const auto message = channel->second.queued.find(wait.ticket);
  if (message == channel->second.queued.end()) return false;
  if (message->second.visible_at <= now) return true;
  wake_at = message->second.visible_at;  // a delayed message: ready later, not a deadlock
  return false;
}

void WorldState::block(std::unique_lock<std::mutex>& lock, int rank, const Wait& wait) {
  check_alive();
  RankShared& me = shared_[static_cast<size_t>(rank)];
  me.polling.reset();
  const Clock::time_point start = Clock::now();
  std::optional<Clock::time_point> wake_at;
  if (wait_ready(me, wait, start, wake_at)) return;
  me.state = RankState::blocked;
  me.wait = wait;
  --running_;
  detect_deadlock_locked(start);
  while (!aborted_.load(std::memory_order_relaxed)) {
    wake_at.reset();
    if (wait_ready(me, me.wait, Clock::now(), wake_at)) break;
    if (wake_at) {
      me.wake.wait_until(lock, *wake_at);
    } else {
      me.wake.wait(lock);
    }
  }
  me.state = RankState::running;
  ++running_;
  local_[static_cast<size_t>(rank)].counters.blocked_seconds += seconds_between(start, Clock::now());
  check_alive();
}

// Deadlock: no rank is running, at least one is blocked, and no blocked rank's wait can complete
// now or when a delayed message becomes visible. Called whenever a rank blocks or finishes.
void WorldState::detect_deadlock_locked(Clock::time_point now) {
  if (running_ > 0 || aborted_.load(std::memory_order_relaxed)) return;
  bool anyone_blocked = false;
  for (const RankShared& rank : shared_) {
    if (rank.state != RankState::blocked) continue;
    anyone_blocked = true;
    std::optional<Clock::time_point> wake_at;
    if (wait_ready(rank, rank.wait, now, wake_at) || wake_at) return;
  }
  if (!anyone_blocked) return;
  if (!failed_locked()) deadlock_ = deadlock_report_locked(false, now);
  abort_locked();
}

void WorldState::abort_locked() {
  aborted_.store(true, std::memory_order_release);
  for (RankShared& rank : shared_) rank.wake.notify_all();
  watchdog_wake_.notify_all();
}

void WorldState::record_fault_locked(CommFault fault) {
  if (!failed_locked()) fault_ = std::move(fault);
  abort_locked();
}

}  // namespace ringlab::detail
