// The matrix of plans the plan, walker and executor tests sweep: every algorithm, every layout,
// P in {1, 2, 3, 4, 8} (P = 3 is where a wrong direction shows). One GENERATE of these replaces
// three nested ones: GENERATE(from_range(plan_cases())).
#pragma once

#include <cstdint>
#include <vector>

#include "sim/plan/plan.hpp"

namespace ringlab::test {

struct PlanCase {
  Algorithm algo;
  LayoutKind layout;
  int64_t ranks;
};

inline std::vector<PlanCase> plan_cases() {
  std::vector<PlanCase> cases;
  for (Algorithm algo : {Algorithm::ring, Algorithm::allgather, Algorithm::ulysses, Algorithm::hybrid})
    for (LayoutKind layout : {LayoutKind::contiguous, LayoutKind::zigzag, LayoutKind::striped})
      for (int64_t ranks : {1, 2, 3, 4, 8}) cases.push_back({algo, layout, ranks});
  return cases;
}

}  // namespace ringlab::test
