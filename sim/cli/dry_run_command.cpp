// `ringlab run --dry-run`: the plan walked by the cost model (sim/cost/dry_executor.hpp), no
// tensors. Prints the simulated per-rank summary, totals, memory by phase and the model's
// assumptions; --json gives one object; --trace FILE writes the simulated timeline as a Chrome
// trace (the simulator's format, so the viewer shows it); --hw picks the hardware preset or a
// JSON machine file. Exit status 0, or 2 for bad input.
#include <iostream>

#include "reference/error.hpp"
#include "sim/cli/commands.hpp"
#include "sim/cost/dry_report.hpp"
#include "sim/run/config.hpp"

namespace ringlab::cli {

int run_dry(const RunConfig& config) {
  if (!config.inject.empty()) {
    throw UsageError("--inject needs messages to fault, but --dry-run sends none; drop one of them");
  }
  const Hardware hardware = load_hardware(config.hw, config.dims.dim);
  PlanSpec spec = plan_spec(config);
  spec.element_bytes = hardware.element_bytes;  // the machine's precision on the wire and in memory
  const Plan plan = build_plan(spec);
  DryOptions options;
  options.trace = !config.trace_file.empty();
  const DryResult result = run_dry_plan(plan, hardware, options);
  if (options.trace) write_chrome_trace(config.trace_file, result.trace, static_cast<int>(plan.ranks()));
  if (config.json) {
    std::cout << dry_report_json(plan, hardware, result).dump() << "\n";
  } else {
    print_dry_report(std::cout, plan, hardware, result);
  }
  return kExitVerified;
}

}  // namespace ringlab::cli
