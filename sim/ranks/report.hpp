// What World::run returns: per-rank counters, the trace, and how the run ended — success, a
// deadlock report, a communication fault, or an error thrown by a rank (reported once, however
// many ranks were released because of it).
#pragma once

#include <exception>
#include <optional>
#include <string>
#include <vector>

#include "sim/pipeline/trace.hpp"
#include "sim/ranks/comm_fault.hpp"
#include "sim/ranks/counters.hpp"
#include "sim/ranks/faults.hpp"
#include "sim/ranks/watchdog.hpp"

namespace ringlab {

enum class RunStatus : uint8_t {
  ok,          // every rank returned
  deadlock,    // RunReport::deadlock: event-driven detection or the --timeout fallback
  comm_fault,  // RunReport::fault: duplicate, corrupt, size or collective mismatch
  error,       // RunReport::error: a rank threw something else
};

const char* run_status_name(RunStatus status);

struct RankError {
  int rank = -1;                 // world rank that threw first
  std::string message;           // its what()
  std::exception_ptr exception;  // the original, for RunReport::throw_if_failed
};

struct RunReport {
  RunStatus status = RunStatus::ok;
  int ranks = 0;
  double wall_seconds = 0;
  std::vector<RankCounters> counters;  // [P]
  std::vector<TraceEvent> trace;       // when WorldOptions::trace; by rank, then start time
  std::optional<DeadlockReport> deadlock;
  std::optional<CommFault> fault;
  std::optional<RankError> error;
  std::vector<FaultRecord> faults;  // the fault plan, and what each fault did

  bool ok() const { return status == RunStatus::ok; }
  // "ok: 4 ranks in 0.012 s" or the deadlock / fault / error text; injected faults listed.
  std::string describe() const;
  // 0 ok; 3 deadlock or communication fault (a rank's CommError too); 2 a rank's UsageError;
  // 70 any other exception (an internal error).
  int exit_status() const;
  // Does nothing when ok. Deadlock and fault: throws CommError(describe()). Error: rethrows the
  // rank's original exception.
  void throw_if_failed() const;
};

}  // namespace ringlab
