// The drawing panels. Each draws the inside of its window (the caller owns Begin/End) from the
// model's structs only — no computation of schedule facts here — and leaves what it drew and
// what is hovered in ViewState.
#pragma once

#include "viz/model/controls.hpp"
#include "viz/model/schedule_model.hpp"
#include "viz/view/view_state.hpp"

namespace ringlab::viz {

// Ranks on a circle, each coloured by the K/V block it computes with; blocks in flight move along
// the ring with the playback's fraction; collectives as lines between their members.
void draw_ring_panel(const ScheduleModel& model, const Playback& playback, ViewState& view);

// The (query block x key block) grid of the current pass, coloured by step, rank or error, the
// current step's cells outlined; per-block result strips after a run.
void draw_grid_panel(const ScheduleModel& model, const Playback& playback, ViewState& view);

// Per-rank bars of FLOPs (done so far, and in total) or busy and blocked time; mean and max.
void draw_load_panel(const ScheduleModel& model, const Playback& playback, ViewState& view);

// Per-rank compute and communication rows over time; zoom (wheel), pan (drag), a hover line
// across all rows, the current step's time marked.
void draw_timeline_panel(const ScheduleModel& model, const Playback& playback, ViewState& view);

}  // namespace ringlab::viz
