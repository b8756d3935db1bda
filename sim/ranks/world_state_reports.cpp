// WorldState, continued: ranks finishing (and failing), the watchdog thread's timeout loop, the
// deadlock report and the final RunReport. The rest of WorldState is in world_state.cpp.
#include <algorithm>

#include "sim/ranks/world_state.hpp"

namespace ringlab::detail {

void WorldState::finish(int rank, const std::exception_ptr& error) {
  std::optional<CommFault> fault;
  std::optional<RankError> rank_error;
  if (error) {
    try {
      std::rethrow_exception(error);
    } catch (const WorldAborted&) {
      // released because of a problem already recorded
    } catch (const CommFaultError& detected) {
      fault = detected.fault();
    } catch (const std::exception& thrown) {
      rank_error = RankError{rank, thrown.what(), error};
    } catch (...) {
      rank_error = RankError{rank, "an exception that is not a std::exception", error};
    }
  }
  std::lock_guard lock(mutex_);
  RankShared& me = shared_[static_cast<size_t>(rank)];
  me.state = RankState::finished;
  me.polling.reset();
  --running_;
  note_progress();
  if (fault) record_fault_locked(std::move(*fault));
  if (rank_error) {
    if (!failed_locked()) error_ = std::move(rank_error);
    abort_locked();
  }
  detect_deadlock_locked(Clock::now());
}

void WorldState::watch() {
  std::unique_lock lock(mutex_);
  const Clock::duration timeout = to_duration(options_.timeout_seconds);
  const Clock::duration poll =
      std::clamp<Clock::duration>(timeout / 20, std::chrono::milliseconds(1), std::chrono::milliseconds(50));
  uint64_t seen = progress_.load(std::memory_order_relaxed);
  Clock::time_point last_change = Clock::now();
  while (!watchdog_stop_) {
    watchdog_wake_.wait_for(lock, poll);
    if (watchdog_stop_ || aborted_.load(std::memory_order_relaxed)) continue;
    const Clock::time_point now = Clock::now();
    const uint64_t progress = progress_.load(std::memory_order_relaxed);
    // A rank inside a compute scope is working, not stuck (and could not be stopped anyway).
    if (progress != seen || computing_.load(std::memory_order_relaxed) > 0) {
      seen = progress;
      last_change = now;
    } else if (now - last_change >= timeout) {
      if (!failed_locked()) deadlock_ = deadlock_report_locked(true, now);
      abort_locked();
    }
  }
}

void WorldState::stop_watchdog() {
  std::lock_guard lock(mutex_);
  watchdog_stop_ = true;
  watchdog_wake_.notify_all();
}

DeadlockReport WorldState::deadlock_report_locked(bool timed_out, Clock::time_point now) const {
  DeadlockReport report;
  report.timed_out = timed_out;
  report.detected_after_seconds = std::chrono::duration<double>(now - origin_).count();
  report.timeout_seconds = options_.timeout_seconds;
  std::vector<std::vector<int>> edges;
  for (size_t index = 0; index < shared_.size(); ++index) {
    const RankShared& rank = shared_[index];
    RankWaitReport entry;
    entry.rank = static_cast<int>(index);
    entry.step = rank.step;
    entry.label = rank.label;
    const Wait* wait = nullptr;
    if (rank.state == RankState::blocked) {
      entry.state = RankState::blocked;
      wait = &rank.wait;
    } else if (rank.state == RankState::finished) {
      entry.state = RankState::finished;
    } else if (rank.polling) {
      entry.state = RankState::polling;
      wait = &*rank.polling;
    }
    if (wait != nullptr) {
      entry.call = wait->call;
      entry.peer = wait->peer;
      entry.sending = wait->kind == WaitKind::match;
      entry.tag = wait->tag;
      entry.collective_index = wait->collective_index;
      const ContextInfo& context = contexts_.at(wait->key.context);
      entry.communicator = context.name;
      if (wait->collective_index >= 0) {
        for (size_t member = 0; member < context.members.size(); ++member) {
          if (context.collectives_entered[member] <= wait->collective_index) {
            entry.not_arrived.push_back(context.members[member]);
          }
        }
      }
      entry.waits_for = entry.not_arrived;
      if (entry.waits_for.empty() && entry.peer >= 0) entry.waits_for.push_back(entry.peer);
    }
    for (const auto& [key, channel] : rank.mailbox) {
      for (const auto& [arrival, message] : channel.queued) {
        if (entry.queued.size() == 8) break;
        std::string text = "from rank " + std::to_string(message.source) + " ";
        text += key.internal ? std::string(collective_name(message.collective)) + " #" + std::to_string(key.tag)
                             : "tag " + std::to_string(key.tag);
        text +=
            " (" + std::to_string(message.payload.size()) + " floats" + (message.visible_at > now ? ", delayed)" : ")");
        entry.queued.push_back(std::move(text));
      }
    }
    edges.push_back(entry.waits_for);
    report.ranks.push_back(std::move(entry));
  }
  report.cycle = find_wait_cycle(edges);
  for (const FaultRecord& record : fault_records_) {
    if (record.fired) report.faults.push_back(record.describe());
  }
  return report;
}

void WorldState::fill_report(RunReport& report) {
  std::lock_guard lock(mutex_);
  report.ranks = ranks();
  report.deadlock = deadlock_;
  report.fault = fault_;
  report.error = error_;
  report.status = deadlock_ ? RunStatus::deadlock
                  : fault_  ? RunStatus::comm_fault
                  : error_  ? RunStatus::error
                            : RunStatus::ok;
  report.faults = fault_records_;
  for (RankLocal& rank : local_) {
    report.counters.push_back(rank.counters);
    report.trace.insert(report.trace.end(), std::make_move_iterator(rank.trace.begin()),
                        std::make_move_iterator(rank.trace.end()));
  }
  std::stable_sort(report.trace.begin(), report.trace.end(), [](const TraceEvent& a, const TraceEvent& b) {
    return a.rank != b.rank ? a.rank < b.rank : a.start_us < b.start_us;
  });
}

}  // namespace ringlab::detail
