// `ringlab run --dry-run`: the plan walked by the cost model (executors/dry/dry_executor.hpp), no
// tensors, through the run pipeline as far as it applies (sim/pipeline/pipeline.hpp: no inputs,
// verification or --save). Prints the simulated per-rank summary, totals, memory by phase and the
// model's assumptions; --json gives one object; --trace FILE writes the simulated timeline as a
// Chrome trace (the simulator's format, so the viewer shows it); --hw picks the hardware preset or
// a JSON machine file. Exit status 0, or 2 for bad input.
#include <iostream>

#include "cli/ringlab/commands.hpp"
#include "executors/dry/dry_executor.hpp"
#include "sim/pipeline/config.hpp"
#include "sim/pipeline/pipeline.hpp"

namespace ringlab::cli {

int run_dry(RunConfig& config) {
  DryExecutor dry;  // its machine comes from --hw
  return run_pipeline(config, dry, std::cout, std::cerr);
}

}  // namespace ringlab::cli
