#include "sim/ranks/report.hpp"

#include <cstdio>

#include "reference/names.hpp"

namespace ringlab {

const char* run_status_name(RunStatus status) {
  constexpr const char* kNames[] = {"ok", "deadlock", "communication fault", "error"};
  return name_of(kNames, status);
}

std::string RunReport::describe() const {
  std::string text;
  switch (status) {
    case RunStatus::ok: {
      char line[96];
      std::snprintf(line, sizeof line, "ok: %d ranks in %.3f s", ranks, wall_seconds);
      text = line;
      break;
    }
    case RunStatus::deadlock: text = deadlock->describe(); break;
    case RunStatus::comm_fault:
      text = "communication fault detected by rank " + std::to_string(fault->detected_by) + ": " + fault->describe();
      break;
    case RunStatus::error: text = "rank " + std::to_string(error->rank) + " failed: " + error->message; break;
  }
  // The deadlock text lists the faults that fired itself.
  for (const FaultRecord& record : faults) {
    if (status != RunStatus::deadlock || !record.fired) text += "\n  injected fault " + record.describe();
  }
  return text;
}

int RunReport::exit_status() const {
  switch (status) {
    case RunStatus::ok: return kExitVerified;
    case RunStatus::deadlock:
    case RunStatus::comm_fault: return kExitCommFault;
    case RunStatus::error: try { std::rethrow_exception(error->exception);
      } catch (const UsageError&) {
        return kExitUsage;
      } catch (const CommError&) {
        return kExitCommFault;
      } catch (...) {
        return 70;
      }
  }
  return 70;
}

void RunReport::throw_if_failed() const {
  switch (status) {
    case RunStatus::ok: return;
    case RunStatus::deadlock:
    case RunStatus::comm_fault: throw CommError(describe());
    case RunStatus::error: std::rethrow_exception(error->exception);
  }
}

}  // namespace ringlab
