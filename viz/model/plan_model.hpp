// The model of a plan: what ringlab-viz draws for a schedule that has not run, timed by the cost
// model (viz/model/trace_model.hpp), and every layout's balance for the plan's problem.
#pragma once

#include <string>
#include <vector>

#include "sim/cost/hardware.hpp"
#include "sim/plan/plan.hpp"
#include "viz/model/schedule_model.hpp"

namespace ringlab::viz {

// Walks the plan (sim/plan/walk.hpp: every rank's ops in dependency order), tracking which block
// each buffer holds (so misrouted dK/dV are found, as the plan checker finds them), runs the plan
// checker when the plan is small enough, and times it with the cost model on `hardware`
// (attach_predicted_time). Throws nothing for a built plan.
ScheduleModel model_from_plan(const Plan& plan, const Hardware& hardware);
// Every layout's FLOP balance for `spec`'s problem (the plan's spec with each layout in turn).
std::vector<LayoutBalance> layout_balances(const PlanSpec& spec);
// The same on a preset or JSON machine file (load_hardware, for the plan's head dimension): the
// `--hw` values of `ringlab run --dry-run`. Throws UsageError for an unknown preset or a bad file.
ScheduleModel model_from_plan(const Plan& plan, const std::string& hardware = kDefaultHardware);

}  // namespace ringlab::viz
