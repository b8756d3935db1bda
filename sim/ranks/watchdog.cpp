#include "sim/ranks/watchdog.hpp"

#include <algorithm>
#include <cstdio>
#include <utility>
#include <vector>

#include "reference/names.hpp"

namespace ringlab {
namespace {

std::string rank_list(const std::vector<int>& ranks) {
  std::string text;
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (i > 0) text += i + 1 == ranks.size() ? " and " : ", ";
    text += std::to_string(ranks[i]);
  }
  return text;
}

std::string seconds(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3f s", value);
  return text;
}

}  // namespace

const char* rank_state_name(RankState state) {
  constexpr const char* kNames[] = {"running", "polling", "blocked", "finished"};
  return name_of(kNames, state);
}

std::string RankWaitReport::describe() const {
  std::string text = "rank " + std::to_string(rank) + " [step " + std::to_string(step);
  if (!label.empty()) text += " \"" + label + "\"";
  text += "]: ";
  switch (state) {
    case RankState::finished: return text + "finished";
    case RankState::running: return text + "running, not in a communicator call";
    case RankState::polling: text += "polling " + call; break;
    case RankState::blocked: text += "blocked in " + call; break;
  }
  if (collective_index >= 0) {
    text += " #" + std::to_string(collective_index) + " (" + communicator + ")";
    if (!not_arrived.empty()) {
      text += ", waiting for rank" + std::string(not_arrived.size() > 1 ? "s " : " ") + rank_list(not_arrived) +
              " to enter it";
    } else if (peer >= 0) {
      text += ", waiting for its message from rank " + std::to_string(peer);
    }
    return text;
  }
  if (peer >= 0) {
    text += (sending ? " to rank " : " from rank ") + std::to_string(peer) + ", tag " + std::to_string(tag);
  }
  text += " (" + communicator + ")";
  if (sending) text += ": waits for rank " + std::to_string(peer) + " to receive it";
  return text;
}

std::string DeadlockReport::describe() const {
  std::string text;
  if (timed_out) {
    text = "deadlock watchdog: no progress for " + seconds(timeout_seconds) + " (--timeout), stopped " +
           seconds(detected_after_seconds) + " after the start";
  } else {
    text = "deadlock: every live rank is blocked and no message in flight can wake one (detected " +
           seconds(detected_after_seconds) + " after the start)";
  }
  for (const RankWaitReport& rank : ranks) text += "\n  " + rank.describe();
  if (!cycle.empty()) {
    text += "\n  cycle of waits: ";
    for (size_t i = 0; i < cycle.size(); ++i) text += (i ? " waits for rank " : "rank ") + std::to_string(cycle[i]);
  }
  for (const RankWaitReport& rank : ranks) {
    if (rank.queued.empty()) continue;
    text += "\n  rank " + std::to_string(rank.rank) + " has messages it never received: ";
    // Identical messages once, with their count, in the order they first appear.
    std::vector<std::pair<std::string, int>> distinct;
    for (const std::string& message : rank.queued) {
      auto it = std::find_if(distinct.begin(), distinct.end(), [&](const auto& d) { return d.first == message; });
      if (it == distinct.end())
        distinct.emplace_back(message, 1);
      else
        ++it->second;
    }
    for (size_t i = 0; i < distinct.size(); ++i)
      text += (i ? "; " : "") + distinct[i].first +
              (distinct[i].second > 1 ? " x" + std::to_string(distinct[i].second) : "");
    if (rank.state == RankState::blocked && !rank.sending && rank.collective_index < 0) {
      const bool dropped =
          std::any_of(faults.begin(), faults.end(), [](const std::string& f) { return f.rfind("drop", 0) == 0; });
      text += dropped ? " (the rest of an exchange a dropped message belonged to?)" : " (a tag or peer mismatch?)";
    }
  }
  for (const std::string& fault : faults) text += "\n  injected fault " + fault;
  return text;
}

std::vector<int> find_wait_cycle(const std::vector<std::vector<int>>& edges) {
  const int count = static_cast<int>(edges.size());
  enum Mark : uint8_t { unvisited, on_path, done };
  std::vector<Mark> marks(edges.size(), unvisited);
  // Iterative depth-first search; `path` holds (node, next edge index) frames.
  for (int root = 0; root < count; ++root) {
    if (marks[root] != unvisited) continue;
    std::vector<std::pair<int, size_t>> path{{root, 0}};
    marks[root] = on_path;
    while (!path.empty()) {
      auto& [node, next] = path.back();
      if (next == edges[node].size()) {
        marks[node] = done;
        path.pop_back();
        continue;
      }
      const int target = edges[node][next++];
      if (target < 0 || target >= count || marks[target] == done) continue;
      if (marks[target] == on_path) {
        std::vector<int> cycle;
        auto start = std::find_if(path.begin(), path.end(), [&](const auto& frame) { return frame.first == target; });
        for (auto frame = start; frame != path.end(); ++frame) cycle.push_back(frame->first);
        std::rotate(cycle.begin(), std::min_element(cycle.begin(), cycle.end()), cycle.end());
        cycle.push_back(cycle.front());
        return cycle;
      }
      marks[target] = on_path;
      path.emplace_back(target, 0);
    }
  }
  return {};
}

}  // namespace ringlab
