// The model from Chrome trace events: a trace file's whole model, and the measured or predicted
// timeline of a model built otherwise (a run's trace; the cost model's simulated trace of a plan).
#pragma once

#include <span>
#include <string>

#include "sim/cost/hardware.hpp"
#include "sim/pipeline/trace.hpp"
#include "sim/plan/plan.hpp"
#include "viz/model/schedule_model.hpp"

namespace ringlab::viz {

// Replaces the timeline, busy/blocked time and the transfers' and collectives' times with the cost
// model's prediction for `hardware`: run_dry_plan's simulated trace, at the machine's element size
// (as `ringlab run --dry-run --hw` times it); busy = its compute time, blocked = exposed
// communication + idle; the timeline ends at its makespan.
void attach_predicted_time(ScheduleModel& model, const Plan& plan, const Hardware& hardware);

// From a Chrome trace's complete events (sim/pipeline/trace.hpp): phases from the events' labels, steps
// and blocks from their args, measured time. Throws UsageError when the events describe no
// ringlab schedule (no rank has an event with a step).
ScheduleModel model_from_trace(std::span<const TraceEvent> events, const std::string& title);

// A trace file's model, read as its run says when its writer recorded one (otherwise as
// model_from_trace of its events). A ringlab-gpu run's "send" and "recv" are one asynchronous copy
// each (a transfer in flight, not a wait: no blocked or exposed time), sent as one message with the
// plan's tag. Throws UsageError, one line, when its events come from more ranks than its run's spec.
ScheduleModel model_from_trace_file(const TraceFile& file, const std::string& title);

// Replaces the timeline and busy/blocked time with measured ones from a run's trace events.
void attach_measured_time(ScheduleModel& model, std::span<const TraceEvent> events);

}  // namespace ringlab::viz
