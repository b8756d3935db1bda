// The problem a run computes, resolved from the flags once. RunConfig holds the flags as they were
// given; resolve_problem() is the one place that turns them into the problem: HKV = H unless
// --kv-heads was given, the sizes of the --in files when there are files, --docs as document
// lengths against that final S. Nothing changes a Problem afterwards: the pipeline, the executors'
// cost checks and the plan all read the same one.
#pragma once

#include <cstdint>

#include "reference/attention.hpp"
#include "sim/pipeline/config.hpp"
#include "sim/plan/plan.hpp"

namespace ringlab {

struct Problem {
  RunConfig config;  // the flags, resolved: dims final, documents filled

  const AttentionDims& dims() const { return config.dims; }
  Mask mask() const { return config.mask(); }
  // The plan's spec, with the executor's element size on the wire and in memory.
  PlanSpec plan_spec(int64_t element_bytes) const;
};

// Checks the flags (validate()) and resolves them. `files`: the shapes the --in files gave
// (read_input_files), which replace the size flags; nullptr for generated inputs. Throws UsageError.
Problem resolve_problem(const RunConfig& flags, const AttentionDims* files = nullptr);

}  // namespace ringlab
