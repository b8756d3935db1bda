// How a simulated world runs: ranks, send mode, watchdog timeout, faults, tracing — and the
// helper the command line uses to build them from --ranks / --timeout / --inject / --trace.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "sim/ranks/faults.hpp"

namespace ringlab {

enum class SendMode : uint8_t {
  // A send completes as soon as its payload is copied into the queue (MPI small messages):
  // "both ranks send, then both receive" works.
  eager,
  // A blocking send waits until the receiver has posted a matching receive (recv, irecv or
  // sendrecv), like NCCL's ungrouped ncclSend: "both ranks send, then both receive" deadlocks —
  // use sendrecv, or post the irecv first. Collectives are unaffected.
  rendezvous,
};

const char* send_mode_name(SendMode mode);

struct WorldOptions {
  int ranks = 4;                // P
  double timeout_seconds = 10;  // watchdog fallback: stop after this long without progress
                                // (sim/ranks/watchdog.hpp says what counts as progress)
  SendMode send_mode = SendMode::eager;
  FaultPlan faults;
  bool trace = false;                            // record TraceEvents (RunReport::trace)
  double fault_delay_seconds = 0.1;              // how late a `delay` fault delivers its message
  size_t buffer_pool_bytes = size_t{512} << 20;  // cap on recycled payload buffers kept for reuse
};

// Throws UsageError naming the first bad field: ranks < 1, timeout <= 0, a fault on a rank that
// does not exist, a negative delay.
void validate(const WorldOptions& options);

// The command line's way in: --ranks, --timeout, every --inject value, whether --trace was given.
// Validated; throws UsageError (one line, with the fix) for a bad value.
WorldOptions make_world_options(int ranks, double timeout_seconds, const std::vector<std::string>& inject, bool trace);

}  // namespace ringlab
