#include "sim/ranks/faults.hpp"

#include <charconv>
#include <set>
#include <utility>

#include "reference/error.hpp"
#include "reference/names.hpp"

namespace ringlab {
namespace {

constexpr const char* kFaultKindNames[] = {"drop", "duplicate", "corrupt", "delay", "alter"};

constexpr const char* kFormatHint = "write KIND@RANK:STEP with KIND drop|duplicate|corrupt|delay|alter, e.g. drop@1:2";

[[noreturn]] void bad_fault(std::string_view text, const std::string& problem) {
  throw UsageError("--inject \"" + std::string(text) + "\": " + problem + "; " + kFormatHint);
}

int parse_count(std::string_view text, std::string_view field, std::string_view whole) {
  int value = 0;
  const auto [end, error] = std::from_chars(field.data(), field.data() + field.size(), value);
  if (field.empty() || error != std::errc() || end != field.data() + field.size() || value < 0) {
    bad_fault(whole, std::string(text) + " \"" + std::string(field) + "\" is not a whole number >= 0");
  }
  return value;
}

}  // namespace

const char* fault_kind_name(FaultKind kind) { return name_of(kFaultKindNames, kind); }

std::string Fault::to_string() const {
  return std::string(fault_kind_name(kind)) + "@" + std::to_string(rank) + ":" + std::to_string(step);
}

std::string FaultPlan::to_string() const {
  if (faults.empty()) return "none";
  std::string text;
  for (const Fault& fault : faults) text += (text.empty() ? "" : ", ") + fault.to_string();
  return text;
}

Fault parse_fault(std::string_view text) {
  const size_t at = text.find('@');
  if (at == std::string_view::npos) bad_fault(text, "no '@' between KIND and RANK");
  const size_t colon = text.find(':', at);
  if (colon == std::string_view::npos) bad_fault(text, "no ':' between RANK and STEP");
  const std::string_view kind_text = text.substr(0, at);
  Fault fault;
  const std::optional<FaultKind> kind = find_named<FaultKind>(kFaultKindNames, kind_text);
  if (!kind) bad_fault(text, "unknown KIND \"" + std::string(kind_text) + "\"");
  fault.kind = *kind;
  fault.rank = parse_count("RANK", text.substr(at + 1, colon - at - 1), text);
  fault.step = parse_count("STEP", text.substr(colon + 1), text);
  return fault;
}

FaultPlan parse_fault_plan(const std::vector<std::string>& texts) {
  FaultPlan plan;
  std::set<std::pair<int, int>> places;
  for (const std::string& text : texts) {
    const Fault fault = parse_fault(text);
    if (!places.insert({fault.rank, fault.step}).second) {
      throw UsageError("--inject \"" + text + "\": another fault already hits rank " + std::to_string(fault.rank) +
                       " at step " + std::to_string(fault.step) + "; inject at most one fault per (rank, step)");
    }
    plan.faults.push_back(fault);
  }
  return plan;
}

void check_fault_plan(const FaultPlan& plan, int ranks) {
  std::set<std::pair<int, int>> places;
  for (const Fault& fault : plan.faults) {
    if (fault.rank < 0 || fault.rank >= ranks) {
      throw UsageError("--inject " + fault.to_string() + ": there is no rank " + std::to_string(fault.rank) +
                       " among " + std::to_string(ranks) + " ranks; pick a rank from 0 to " +
                       std::to_string(ranks - 1));
    }
    if (fault.step < 0) {
      throw UsageError("--inject " + fault.to_string() + ": STEP must be >= 0; " + kFormatHint);
    }
    if (!places.insert({fault.rank, fault.step}).second) {
      throw UsageError("--inject " + fault.to_string() + ": another fault already hits rank " +
                       std::to_string(fault.rank) + " at step " + std::to_string(fault.step) +
                       "; inject at most one fault per (rank, step)");
    }
  }
}

std::string FaultRecord::describe() const {
  if (fired) return fault.to_string() + ": " + effect;
  return fault.to_string() + ": never fired (rank " + std::to_string(fault.rank) + " sent nothing at step " +
         std::to_string(fault.step) + ")";
}

}  // namespace ringlab
