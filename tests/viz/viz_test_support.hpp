// Shared by the viz tests: plan specs at sizes that build instantly, and a plan's model.
#pragma once

#include "sim/plan/plan.hpp"
#include "viz/model/plan_model.hpp"
#include "viz/model/schedule_model.hpp"

namespace ringlab::viz::test {

// S = 16 P tokens (every layout divides), H = HKV = 2P (Ulysses divides), D = 8.
inline PlanSpec spec_of(Algorithm algo, LayoutKind layout, int64_t P, bool causal, bool backward = false,
                        Erratum erratum = Erratum::none, int64_t ulysses = 1) {
  PlanSpec spec;
  spec.algo = algo;
  spec.layout = layout;
  spec.ranks = P;
  spec.ulysses = ulysses;
  spec.dims = {1, 16 * P, 2 * P, 2 * P, 8};
  spec.causal = causal;
  spec.backward = backward;
  spec.erratum = erratum;
  return spec;
}

inline ScheduleModel model_of(const PlanSpec& spec) { return model_from_plan(build_plan(spec)); }

}  // namespace ringlab::viz::test
