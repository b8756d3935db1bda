#include "sim/ranks/world.hpp"

#include <thread>

#include "sim/ranks/world_state.hpp"

namespace ringlab {

World::World(WorldOptions options) : options_(std::move(options)) { validate(options_); }

RunReport World::run(const std::function<void(Communicator&)>& rank_function) const {
  detail::WorldState state(options_);
  std::vector<int> everyone(static_cast<size_t>(options_.ranks));
  for (int rank = 0; rank < options_.ranks; ++rank) everyone[static_cast<size_t>(rank)] = rank;

  std::thread watchdog([&state] { state.watch(); });
  std::vector<std::thread> ranks;
  ranks.reserve(everyone.size());
  std::exception_ptr spawn_error;
  for (int rank = 0; rank < options_.ranks; ++rank) {
    try {
      ranks.emplace_back([&state, &rank_function, &everyone, rank] {
        std::exception_ptr error;
        try {
          Communicator comm(state, rank, 0, everyone);
          rank_function(comm);
        } catch (...) {
          error = std::current_exception();
        }
        state.finish(rank, error);
      });
    } catch (...) {
      // Could not start a thread: the ranks not started count as having failed.
      spawn_error = std::current_exception();
      for (int missing = rank; missing < options_.ranks; ++missing) state.finish(missing, spawn_error);
      break;
    }
  }
  for (std::thread& thread : ranks) thread.join();
  state.stop_watchdog();
  watchdog.join();

  RunReport report;
  report.wall_seconds = std::chrono::duration<double>(detail::Clock::now() - state.origin()).count();
  state.fill_report(report);
  return report;
}

}  // namespace ringlab
