// Shared helpers for the simulator tests. Catch2 v2 is not thread-safe: rank functions only
// record what they see (each rank into its own slot); the checks run on the test's thread.
#pragma once

#include <chrono>
#include <cstring>
#include <functional>
#include <span>
#include <vector>

#include "sim/ranks/world.hpp"

namespace ringlab::testing {

// Exactly representable and distinct per (rank, index): sums of up to 8 of them stay exact.
inline float exact_value(int rank, size_t index) {
  return static_cast<float>(rank * 10000 + static_cast<int>(index % 10000));
}

inline std::vector<float> exact_payload(int rank, size_t count) {
  std::vector<float> values(count);
  for (size_t i = 0; i < count; ++i) values[i] = exact_value(rank, i);
  return values;
}

inline bool same_bits(std::span<const float> a, std::span<const float> b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size_bytes()) == 0);
}

inline WorldOptions world_options(int ranks, SendMode mode = SendMode::eager, double timeout_seconds = 10) {
  WorldOptions options;
  options.ranks = ranks;
  options.send_mode = mode;
  options.timeout_seconds = timeout_seconds;
  return options;
}

struct TimedRun {
  RunReport report;
  double seconds = 0;
};

inline TimedRun timed_run(const WorldOptions& options, const std::function<void(Communicator&)>& rank_function) {
  const auto start = std::chrono::steady_clock::now();
  RunReport report = World(options).run(rank_function);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return {std::move(report), seconds};
}

}  // namespace ringlab::testing
