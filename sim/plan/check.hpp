// The plan checker: runs before execution and refuses a bad plan with a message naming the rank
// and step. It executes every rank's ops symbolically (no tensors, no time):
//   * matching  — every send has its receive, with equal size; nothing is left unreceived;
//   * progress  — no cycle of waits: the plan cannot deadlock;
//   * dataflow  — each slot's content (which block's K/V, which block's dK/dV accumulator) is
//                 tracked, so computing on the wrong block, using a buffer before its receive
//                 completes, adding one block's dK/dV into another's accumulator, or storing a
//                 gradient on the wrong rank are all caught;
//   * coverage  — every (head group, query unit, key unit) pair the mask allows is computed
//                 exactly once, in the forward and in the backward, and none with a wrong mask.
// The erratum variants fail some of these on purpose: their findings are printed, and the run
// goes on so the numbers show the mistake.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/plan/plan.hpp"

namespace ringlab {

struct PlanFinding {
  int64_t rank = -1;  // -1 = the whole plan
  int64_t step = -1;
  std::string phase;
  std::string message;
  std::string describe() const;  // "rank 2, step 1 (ring backward): ..."
};

struct PlanCheck {
  std::vector<PlanFinding> findings;
  int64_t ops = 0;               // operations checked
  int64_t messages = 0;          // sends matched with receives
  int64_t pairs_checked = 0;     // unit pairs whose coverage was checked
  bool coverage_checked = true;  // false when the plan is too large for the unit-pair table
  bool ok() const { return findings.empty(); }
};

// Checks plans up to a size where expanding every rank is cheap (P <= 4096 and at most ~2e7
// ops); larger plans are checked at a smaller P by the test suite, not here.
PlanCheck check_plan(const Plan& plan);

}  // namespace ringlab
