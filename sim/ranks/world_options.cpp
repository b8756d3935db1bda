#include "sim/ranks/world_options.hpp"

#include "reference/error.hpp"
#include "reference/names.hpp"

namespace ringlab {

namespace {

constexpr const char* kSendModeNames[] = {"eager", "rendezvous"};

}  // namespace

const char* send_mode_name(SendMode mode) { return name_of(kSendModeNames, mode); }

void validate(const WorldOptions& options) {
  if (options.ranks < 1) {
    throw UsageError("--ranks must be at least 1, got " + std::to_string(options.ranks) +
                     "; pass --ranks N with N >= 1");
  }
  if (!(options.timeout_seconds > 0)) {
    throw UsageError("--timeout must be positive seconds, got " + std::to_string(options.timeout_seconds) +
                     "; pass e.g. --timeout 10");
  }
  if (!(options.fault_delay_seconds >= 0)) {
    throw UsageError("the fault delay must be >= 0 seconds, got " + std::to_string(options.fault_delay_seconds));
  }
  check_fault_plan(options.faults, options.ranks);
}

WorldOptions make_world_options(int ranks, double timeout_seconds, const std::vector<std::string>& inject, bool trace) {
  WorldOptions options;
  options.ranks = ranks;
  options.timeout_seconds = timeout_seconds;
  options.faults = parse_fault_plan(inject);
  options.trace = trace;
  validate(options);
  return options;
}

}  // namespace ringlab
