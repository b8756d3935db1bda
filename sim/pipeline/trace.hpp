// Traces: every communicator operation and compute scope as a timed event, written as Chrome
// trace event JSON (opens in Perfetto, chrome://tracing and the ringlab viewer) and read back.
//
// File layout: {"traceEvents": [...], "displayTimeUnit": "ms"} with
//   - metadata events ("ph": "M") naming process `pid` "rank N", thread 0 "compute", thread 1 "comm";
//   - one complete event ("ph": "X") per operation: name, pid = world rank, tid = lane,
//     ts / dur in microseconds since the world started, and ringlab's own fields in "args":
//     step, label, peer, tag, bytes, flops, q_block, kv_block, mask, group (each only when set);
//   - "otherData": {"ringlab": {"tool", "executor", "describe", "spec": {...}}} when the writer knows
//     the run (TraceRun): the schedule that ran, so that a viewer shows that schedule. "spec" holds
//     every PlanSpec field by name (algo, layout, block, ranks, ulysses, batch, seq, heads,
//     kv_heads, dim, causal, window, documents, padding, document_padding, padding_heads, skip,
//     full_ring, backward, erratum, element_bytes); Chrome's own viewers ignore it.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sim/plan/plan.hpp"

namespace ringlab {

enum class TraceLane : uint8_t { compute = 0, comm = 1 };  // the Chrome "tid"

struct TraceEvent {
  std::string name;  // "send", "recv", "all_to_all", "attention fwd", ...
  int rank = 0;      // world rank: the Chrome "pid"
  TraceLane lane = TraceLane::comm;
  double start_us = 0;  // since the world started
  double duration_us = 0;
  // args; -1 / empty = not applicable
  int step = -1;      // the rank's step label
  std::string label;  // the rank's free-text label
  int peer = -1;      // world rank at the other end of a point-to-point operation
  int tag = -1;
  int64_t bytes = -1;  // payload bytes sent (send side) or received (receive side)
  double flops = -1;   // compute scopes
  int q_block = -1;
  int kv_block = -1;
  std::string mask;   // "full", "causal", "diagonal", ...
  std::string group;  // the communicator when not the world: "group {0,2}"

  friend bool operator==(const TraceEvent&, const TraceEvent&) = default;
};

// The run a trace comes from.
struct TraceRun {
  std::string tool;      // "ringlab run", "ringlab-gpu run"
  std::string executor;  // the executor line: "gpu-streams, 8 virtual ranks on ... (bf16, ...)"
  PlanSpec spec;
};

// The JSON text of a trace of `ranks` ranks (metadata for each, then the events), with the run's
// description when `run` is given.
std::string chrome_trace_json(std::span<const TraceEvent> events, int ranks, const TraceRun* run = nullptr);
// Writes chrome_trace_json through write_file_atomically (never half a file).
void write_chrome_trace(const std::string& path, std::span<const TraceEvent> events, int ranks,
                        const TraceRun* run = nullptr);

// Reads the complete ("X") events back, in file order; metadata and other phases are skipped.
// A malformed file throws UsageError with one line naming `source`, the event and the field,
// e.g. "t.json: event 7 (\"send\"): \"dur\" is not a number; pass a trace written by ringlab run --trace".
std::vector<TraceEvent> parse_chrome_trace(std::string_view text, const std::string& source);
std::vector<TraceEvent> read_chrome_trace(const std::string& path);

// A trace file's events and, when its writer recorded it, its run (traces written by other tools
// or by older ringlab have none). A malformed "otherData.ringlab" throws UsageError, one line.
struct TraceFile {
  std::vector<TraceEvent> events;
  std::optional<TraceRun> run;
};
TraceFile parse_trace_file(std::string_view text, const std::string& source);
TraceFile read_trace_file(const std::string& path);

// The spec as the trace stores it, and back: throws UsageError naming `source` and the field, for
// a field of the wrong type or range and for fields that do not make a plan together
// (validate_plan_spec: the command line's checks).
nlohmann::json plan_spec_json(const PlanSpec& spec);
PlanSpec plan_spec_from_json(const nlohmann::json& value, const std::string& source);

}  // namespace ringlab
