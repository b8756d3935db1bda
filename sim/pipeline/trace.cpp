#include "sim/pipeline/trace.hpp"

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

std::string chrome_trace_json(std::span<const TraceEvent> events, int ranks) {
  json list = json::array();
  for (int rank = 0; rank < ranks; ++rank) {
    list.push_back(metadata("process_name", rank, 0, "rank " + std::to_string(rank)));
    list.push_back(
        {{"name", "process_sort_index"}, {"ph", "M"}, {"pid", rank}, {"tid", 0}, {"args", {{"sort_index", rank}}}});
    list.push_back(metadata("thread_name", rank, 0, "compute"));
    list.push_back(metadata("thread_name", rank, 1, "comm"));
  }
  for (const TraceEvent& event : events) list.push_back(event_json(event));
  const json document = {{"traceEvents", std::move(list)}, {"displayTimeUnit", "ms"}};
  return document.dump() + "\n";
}

void write_chrome_trace(const std::string& path, std::span<const TraceEvent> events, int ranks) {
  write_file_atomically(path, chrome_trace_json(events, ranks));
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

}  // namespace ringlab
