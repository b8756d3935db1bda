// `ringlab run --dry-run`: placeholder until the cost model and dry executor land (issue 5).
#include "reference/error.hpp"
#include "sim/cli/commands.hpp"
#include "sim/run_config.hpp"

namespace ringlab::cli {

int run_dry(const RunConfig&) {
  throw UsageError("--dry-run needs the cost model, which this build does not have yet; run without --dry-run");
}

}  // namespace ringlab::cli
