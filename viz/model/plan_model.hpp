// The model of a plan: what ringlab-viz draws for a schedule that has not run, timed by the cost
// model (viz/model/trace_model.hpp), and every layout's balance for the plan's problem.
#pragma once

#include <string>
#include <vector>

#include "sim/cost/hardware.hpp"
#include "sim/plan/plan.hpp"
#include "viz/model/schedule_model.hpp"

namespace ringlab::viz {

// The most tokens whose positions a plan's model lists (ScheduleModel::block_positions, for the
// true cell shapes under documents or a window): past it those cells are drawn by their shapes.
inline constexpr int64_t kMaxModelTokens = int64_t{1} << 22;

// Walks the plan (sim/plan/walk.hpp: every rank's ops in dependency order), tracking which block
// each buffer holds (so misrouted dK/dV are found, as the plan checker finds them), runs the plan
// checker when the plan is small enough, and times it with the cost model on `hardware`
// (attach_predicted_time). Throws nothing for a built plan.
ScheduleModel model_from_plan(const Plan& plan, const Hardware& hardware);
// Every layout's FLOP balance for `spec`'s problem (the plan's spec with each layout in turn). A
// layout of more than kMaxBalanceUnits units is not weighed (n/a, with why): the cost is in its units.
inline constexpr int64_t kMaxBalanceUnits = int64_t{1} << 16;
std::vector<LayoutBalance> layout_balances(const PlanSpec& spec);

// The widest plan the viewer draws: its block grid has a row and a column per ring position and
// its model holds every rank's every step (P = 1024 takes seconds and a GB; P = 5000 minutes), so
// past a trace's limit (viz/model/trace_model.cpp: 512 blocks, 4096 ranks) it is refused at once:
// by the command line, and by every re-plan from the UI (a slider takes typed values).
inline constexpr int64_t kMaxRing = 512;
inline constexpr int64_t kMaxRanks = 4096;
// Its model also lists every layout unit of every block (striped's unit is one token: S = 10^7
// took 3 s, 2 x 10^9 would take minutes and 16 GB).
inline constexpr int64_t kMaxUnits = int64_t{1} << 21;
// Throws UsageError, one line with the fix, for a plan past those limits.
void check_viewer_limits(const Plan& plan);
// The same on a preset or JSON machine file (load_hardware, for the plan's head dimension): the
// `--hw` values of `ringlab run --dry-run`. Throws UsageError for an unknown preset or a bad file.
ScheduleModel model_from_plan(const Plan& plan, const std::string& hardware = kDefaultHardware);

}  // namespace ringlab::viz
