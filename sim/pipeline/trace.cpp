#include "sim/pipeline/trace.hpp"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "reference/error.hpp"
#include "sim/pipeline/output_files.hpp"

namespace ringlab {
namespace {

using nlohmann::json;

constexpr const char* kTraceHint = "pass a trace written by ringlab run --trace";

json metadata(const char* what, int pid, int tid, const std::string& name) {
  return {{"name", what}, {"ph", "M"}, {"pid", pid}, {"tid", tid}, {"args", {{"name", name}}}};
}

json event_json(const TraceEvent& event) {
  json args = json::object();
  if (event.step >= 0) args["step"] = event.step;
  if (!event.label.empty()) args["label"] = event.label;
  if (event.peer >= 0) args["peer"] = event.peer;
  if (event.tag >= 0) args["tag"] = event.tag;
  if (event.bytes >= 0) args["bytes"] = event.bytes;
  if (event.flops >= 0) args["flops"] = event.flops;
  if (event.q_block >= 0) args["q_block"] = event.q_block;
  if (event.kv_block >= 0) args["kv_block"] = event.kv_block;
  if (!event.mask.empty()) args["mask"] = event.mask;
  if (!event.group.empty()) args["group"] = event.group;
  return {{"name", event.name},
          {"cat", event.lane == TraceLane::compute ? "compute" : "comm"},
          {"ph", "X"},
          {"pid", event.rank},
          {"tid", static_cast<int>(event.lane)},
          {"ts", event.start_us},
          {"dur", event.duration_us},
          {"args", std::move(args)}};
}

// Reads one complete event; `where` is "t.json: event 7 (\"send\")" for the messages.
class EventReader {
 public:
  EventReader(const json& event, std::string where) : event_(event), where_(std::move(where)) {}

  [[noreturn]] void fail(const std::string& problem) const {
    throw UsageError(where_ + ": " + problem + "; " + kTraceHint);
  }
  double number(const json& object, const char* field, bool required, double fallback) const {
    return value<double>(object, field, required, fallback, &json::is_number, "a number");
  }
  int64_t integer(const json& object, const char* field, bool required, int64_t fallback) const {
    return value<int64_t>(object, field, required, fallback, &json::is_number_integer, "a whole number");
  }
  // `field` of `object` as a T: `fallback` when absent and not required; fails when it is not
  // `kind` (is_kind tells).
  template <class T>
  T value(const json& object, const char* field, bool required, T fallback, bool (json::*is_kind)() const noexcept,
          const char* kind) const {
    const auto found = object.find(field);
    if (found == object.end()) {
      if (required) fail(std::string("no \"") + field + "\"");
      return fallback;
    }
    if (!((*found).*is_kind)()) fail(std::string("\"") + field + "\" is not " + kind);
    return found->template get<T>();
  }
  std::string text(const json& object, const char* field) const {
    const auto found = object.find(field);
    if (found == object.end()) return {};
    if (!found->is_string()) fail(std::string("\"") + field + "\" is not a string");
    return found->get<std::string>();
  }

  TraceEvent read() const {
    TraceEvent result;
    result.name = text(event_, "name");
    result.rank = static_cast<int>(integer(event_, "pid", true, 0));
    if (result.rank < 0) fail("\"pid\" (the rank) is negative");
    const int64_t tid = integer(event_, "tid", true, 0);
    if (tid != 0 && tid != 1) fail("\"tid\" " + std::to_string(tid) + " is neither 0 (compute) nor 1 (comm)");
    result.lane = static_cast<TraceLane>(tid);
    result.start_us = number(event_, "ts", true, 0);
    result.duration_us = number(event_, "dur", true, 0);
    if (result.duration_us < 0) fail("\"dur\" is negative");
    const auto args = event_.find("args");
    if (args == event_.end()) return result;
    if (!args->is_object()) fail("\"args\" is not an object");
    result.step = static_cast<int>(integer(*args, "step", false, -1));
    result.label = text(*args, "label");
    result.peer = static_cast<int>(integer(*args, "peer", false, -1));
    result.tag = static_cast<int>(integer(*args, "tag", false, -1));
    result.bytes = integer(*args, "bytes", false, -1);
    result.flops = number(*args, "flops", false, -1);
    result.q_block = static_cast<int>(integer(*args, "q_block", false, -1));
    result.kv_block = static_cast<int>(integer(*args, "kv_block", false, -1));
    result.mask = text(*args, "mask");
    result.group = text(*args, "group");
    return result;
  }

 private:
  const json& event_;
  std::string where_;
};

}  // namespace

// ---- the run's description --------------------------------------------------------------------

json plan_spec_json(const PlanSpec& s) {
  return {{"algo", algorithm_name(s.algo)},
          {"layout", layout_name(s.layout)},
          {"block", s.block},
          {"ranks", s.ranks},
          {"ulysses", s.ulysses},
          {"batch", s.dims.batch},
          {"seq", s.dims.seq},
          {"heads", s.dims.heads},
          {"kv_heads", s.dims.kv_heads},
          {"dim", s.dims.dim},
          {"causal", s.causal},
          {"window", s.window},
          {"documents", s.documents},
          {"padding", s.padding},
          {"document_padding", s.document_padding},
          {"padding_heads", s.padding_heads},
          {"skip", s.skip},
          {"full_ring", s.full_ring},
          {"backward", s.backward},
          {"erratum", erratum_name(s.erratum)},
          {"element_bytes", s.element_bytes}};
}

PlanSpec plan_spec_from_json(const json& value, const std::string& source) {
  const std::string hint = "; pass a trace written by ringlab run --trace or ringlab-gpu run --trace";
  if (!value.is_object()) throw UsageError(source + ": the run's \"spec\" is not an object" + hint);
  auto field = [&](const char* name) -> const json& {
    const auto found = value.find(name);
    if (found == value.end()) throw UsageError(source + ": the run's spec has no \"" + name + "\"" + hint);
    return *found;
  };
  // Sizes from 0 (1 where a size must be positive) to 2^31 - 1: what a viewer's controls hold.
  auto integer = [&](const char* name, int64_t least = 0) {
    const json& v = field(name);
    if (!v.is_number_integer() || v.get<int64_t>() < least || v.get<int64_t>() > 2147483647) {
      throw UsageError(source + ": the run's spec: \"" + name + "\" is not an integer from " + std::to_string(least) +
                       " to 2^31 - 1" + hint);
    }
    return v.get<int64_t>();
  };
  auto boolean = [&](const char* name) {
    const json& v = field(name);
    if (!v.is_boolean()) throw UsageError(source + ": the run's spec: \"" + name + "\" is not true or false" + hint);
    return v.get<bool>();
  };
  auto text = [&](const char* name) {
    const json& v = field(name);
    if (!v.is_string()) throw UsageError(source + ": the run's spec: \"" + name + "\" is not a string" + hint);
    return v.get<std::string>();
  };
  PlanSpec s;
  try {
    s.algo = parse_algorithm(text("algo"));
    s.layout = parse_layout(text("layout"));
    s.erratum = parse_erratum(text("erratum"));
  } catch (const UsageError& error) {
    throw UsageError(source + ": the run's spec: " + error.what());
  }
  s.block = integer("block");
  s.ranks = integer("ranks", 1);
  s.ulysses = integer("ulysses", 1);
  s.dims.batch = integer("batch", 1);
  s.dims.seq = integer("seq", 1);
  s.dims.heads = integer("heads", 1);
  s.dims.kv_heads = integer("kv_heads", 1);
  s.dims.dim = integer("dim", 1);
  s.causal = boolean("causal");
  s.window = integer("window");
  const json& documents = field("documents");
  if (!documents.is_array()) throw UsageError(source + ": the run's spec: \"documents\" is not an array" + hint);
  for (const json& length : documents) {
    if (!length.is_number_integer() || length.get<int64_t>() < 1 || length.get<int64_t>() > 2147483647)
      throw UsageError(source + ": the run's spec: a document length is not an integer from 1 to 2^31 - 1" + hint);
    s.documents.push_back(length.get<int64_t>());
  }
  s.padding = integer("padding");
  // Absent in traces written before it was recorded: no document padding.
  if (const auto pads = value.find("document_padding"); pads != value.end()) {
    if (!pads->is_array()) throw UsageError(source + ": the run's spec: \"document_padding\" is not an array" + hint);
    for (const json& pad : *pads) {
      if (!pad.is_number_integer() || pad.get<int64_t>() < 0 || pad.get<int64_t>() > 2147483647)
        throw UsageError(source + ": the run's spec: a document padding is not an integer from 0 to 2^31 - 1" + hint);
      s.document_padding.push_back(pad.get<int64_t>());
    }
  }
  s.padding_heads = integer("padding_heads");
  s.skip = boolean("skip");
  s.full_ring = boolean("full_ring");
  s.backward = boolean("backward");
  s.element_bytes = integer("element_bytes", 1);
  // Each field is in range; now what build_plan checks of them together, before anything (the
  // viewer's controls, describe()) uses the spec: a file is untrusted input.
  try {
    validate_plan_spec(s);
  } catch (const UsageError& error) {
    throw UsageError(source + ": the run's spec does not describe a plan: " + error.what());
  }
  return s;
}

// ---- writing and reading ----------------------------------------------------------------------

std::string chrome_trace_json(std::span<const TraceEvent> events, int ranks, const TraceRun* run) {
  json list = json::array();
  for (int rank = 0; rank < ranks; ++rank) {
    list.push_back(metadata("process_name", rank, 0, "rank " + std::to_string(rank)));
    list.push_back(
        {{"name", "process_sort_index"}, {"ph", "M"}, {"pid", rank}, {"tid", 0}, {"args", {{"sort_index", rank}}}});
    list.push_back(metadata("thread_name", rank, 0, "compute"));
    list.push_back(metadata("thread_name", rank, 1, "comm"));
  }
  for (const TraceEvent& event : events) list.push_back(event_json(event));
  json document = {{"traceEvents", std::move(list)}, {"displayTimeUnit", "ms"}};
  if (run) {
    document["otherData"] = {{"ringlab",
                              {{"tool", run->tool},
                               {"executor", run->executor},
                               {"describe", run->spec.describe()},
                               {"spec", plan_spec_json(run->spec)}}}};
  }
  return document.dump() + "\n";
}

void write_chrome_trace(const std::string& path, std::span<const TraceEvent> events, int ranks, const TraceRun* run) {
  write_file_atomically(path, chrome_trace_json(events, ranks, run));
}

std::vector<TraceEvent> parse_chrome_trace(std::string_view text, const std::string& source) {
  json document;
  try {
    document = json::parse(text.begin(), text.end());
  } catch (const json::parse_error& error) {
    throw UsageError(source + ": not valid JSON (byte " + std::to_string(error.byte) + "); " + kTraceHint);
  } catch (const json::exception& error) {  // e.g. out_of_range: a number too large for a double
    throw UsageError(source + ": not readable JSON (" + std::string(error.what()) + "); " + kTraceHint);
  }
  const json* list = &document;
  if (document.is_object()) {
    const auto found = document.find("traceEvents");
    if (found == document.end() || !found->is_array()) {
      throw UsageError(source + ": no \"traceEvents\" array; " + kTraceHint);
    }
    list = &*found;
  } else if (!document.is_array()) {
    throw UsageError(source + ": neither {\"traceEvents\": [...]} nor an array of events; " + kTraceHint);
  }
  std::vector<TraceEvent> events;
  for (size_t index = 0; index < list->size(); ++index) {
    const json& event = (*list)[index];
    const std::string where = source + ": event " + std::to_string(index);
    if (!event.is_object()) throw UsageError(where + " is not an object; " + std::string(kTraceHint));
    const auto phase = event.find("ph");
    if (phase == event.end() || !phase->is_string()) {
      throw UsageError(where + ": no \"ph\" (phase) string; " + std::string(kTraceHint));
    }
    if (*phase != "X") continue;
    const auto name = event.find("name");
    const std::string label = name != event.end() && name->is_string() ? " (\"" + name->get<std::string>() + "\")" : "";
    events.push_back(EventReader(event, where + label).read());
  }
  return events;
}

std::vector<TraceEvent> read_chrome_trace(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) throw UsageError(path + ": cannot open the trace; check the path");
  std::ostringstream content;
  content << file.rdbuf();
  return parse_chrome_trace(content.str(), path);
}

TraceFile parse_trace_file(std::string_view text, const std::string& source) {
  TraceFile file;
  file.events = parse_chrome_trace(text, source);  // the format's errors first
  const json document = json::parse(text.begin(), text.end());
  if (!document.is_object()) return file;
  const auto other = document.find("otherData");
  if (other == document.end() || !other->is_object()) return file;
  const auto ringlab = other->find("ringlab");
  if (ringlab == other->end()) return file;
  if (!ringlab->is_object()) throw UsageError(source + ": \"otherData\".\"ringlab\" is not an object; " + kTraceHint);
  TraceRun run;
  const auto tool = ringlab->find("tool"), executor = ringlab->find("executor"), spec = ringlab->find("spec");
  if (tool != ringlab->end() && tool->is_string()) run.tool = tool->get<std::string>();
  if (executor != ringlab->end() && executor->is_string()) run.executor = executor->get<std::string>();
  if (spec == ringlab->end()) throw UsageError(source + ": the run's description has no \"spec\"; " + kTraceHint);
  run.spec = plan_spec_from_json(*spec, source);
  file.run = std::move(run);
  return file;
}

TraceFile read_trace_file(const std::string& path) {
  // A stream opens a directory and reads nothing from it, which would read as "not valid JSON".
  std::error_code error;
  if (std::filesystem::is_directory(path, error))
    throw UsageError(path + ": is a directory, not a trace file; name the .json file that --trace wrote");
  std::ifstream file(path, std::ios::binary);
  if (!file) throw UsageError(path + ": cannot open the trace; check the path");
  std::ostringstream content;
  content << file.rdbuf();
  return parse_trace_file(content.str(), path);
}

}  // namespace ringlab
