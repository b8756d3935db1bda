// `ringlab plan`: a plan as text — one step x rank grid per phase, the text twin of the viewer.
#pragma once

#include <iosfwd>

#include "sim/plan/plan.hpp"

namespace ringlab {

struct PlanPrintOptions {
  int64_t max_ranks = 16;  // columns shown; wider plans show the first and last ranks
};

// Each cell shows what the rank does at that step:
//   b3 kv-half   computes its queries against block 3, which covers only the early key half
//   kv>1         sends its K/V to rank 1 (the receive from the other side is implied)
//   dkv>1        sends its dK/dV accumulator to rank 1
// Collective phases are one line each. A footer sums blocks, pairs and FLOPs per rank.
void print_plan(std::ostream& os, const Plan& plan, const PlanPrintOptions& options = {});

}  // namespace ringlab
