// The run pipeline: one way from flags to an exit status for every executor (sim/pipeline/executor.hpp)
// — `ringlab run`, `ringlab run --dry-run` and `ringlab-gpu run` all call it.
//
//   validate     the flags (sim/pipeline/config.hpp), then the executor's own (Executor::configure)
//   outputs      --save DIR and --trace FILE checked before any work, so a bad path fails fast
//   problem      the flags resolved once (sim/pipeline/problem.hpp), with the --in files' sizes;
//                the executor's cost of it (threads, memory, blocks): what it cannot finish is
//                refused here (exit 2), before the plan or any tensor is allocated
//   inputs       generated or read (--in), the executor's size check, its rounding (bf16)
//   plan         built with the executor's element size; the plan checker refuses a wrong plan
//                (exit 2) unless it is an erratum variant, wrong by construction
//   execute      the executor's part; a deadlock or communication fault ends here (exit 3, one line)
//   verify       every output against exact attention in float64, the executor's tolerances
//   diagnose     after a mismatch, when the executor can: every block checked on its own
//   save, trace  --save (whole directory or nothing), --trace (Chrome trace)
//   report       the header, the checker's erratum findings, the per-rank table, load imbalance,
//                the verification table, the diagnosis — or one JSON object (--json)
//
// An executor that computes no outputs (the dry executor) skips inputs, the plan check, verify,
// diagnose and save, and prints its own report. Exit status: 0 verified, 1 mismatch, 3 deadlock or
// communication fault; bad input throws UsageError (the command prints it and exits 2).
#pragma once

#include <iosfwd>
#include <string>

#include "sim/pipeline/config.hpp"
#include "sim/pipeline/executor.hpp"

namespace ringlab {

struct PipelineOptions {
  std::string tool = "ringlab";  // the header "<tool> run | ..." and the error line "<tool>: ..."
  std::string error_prefix;      // "" = "<tool>: "; under mpirun "ringlab-gpu (rank 2): "
  bool executor_line = false;    // "executor: <label>" under the header (ringlab-gpu: two executors)
};

int run_pipeline(const RunConfig& flags, Executor& executor, std::ostream& out, std::ostream& err,
                 const PipelineOptions& options = {});

}  // namespace ringlab
