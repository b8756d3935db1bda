// A world of P virtual ranks: World::run calls the rank function on P threads, each with its own
// Communicator, and returns a RunReport. Nothing hangs: a deadlock is detected the moment every
// live rank is blocked with nothing in flight that could wake one (or, as a fallback, after
// WorldOptions::timeout_seconds without progress); a rank that throws releases all the others
// (their communicator calls throw WorldAborted) and its error is reported once.
//
//   WorldOptions options;
//   options.ranks = 4;
//   options.send_mode = SendMode::rendezvous;
//   RunReport report = World(options).run([&](Communicator& comm) {
//     comm.set_step(0);
//     Buffer from_left = comm.sendrecv((comm.rank() + 1) % comm.size(), 0, mine,
//                                      (comm.rank() + comm.size() - 1) % comm.size(), 0);
//   });
//   report.throw_if_failed();   // CommError (exit 3) for a deadlock or fault
//
// The only thing the watchdog cannot stop is a rank that never returns and never calls its
// communicator (an endless loop in compute): the world is reported stopped, but run() waits for it.
#pragma once

#include <functional>

#include "sim/ranks/communicator.hpp"
#include "sim/ranks/report.hpp"
#include "sim/ranks/world_options.hpp"

namespace ringlab {

class World {
 public:
  // Throws UsageError for invalid options (validate(WorldOptions)).
  explicit World(WorldOptions options);

  const WorldOptions& options() const { return options_; }

  // Runs `rank_function` once per rank, each on its own thread, and waits for all of them.
  RunReport run(const std::function<void(Communicator&)>& rank_function) const;

 private:
  WorldOptions options_;
};

}  // namespace ringlab
