// The grader's report: a fixed-width text table with the details of every failure under its row,
// and the same content as JSON (grader.hpp).
#include <cmath>
#include <cstdio>
#include <ostream>
#include <sstream>

#include "exercises/grader/grader.hpp"

namespace ringlab::grader {

const char* status_name(Status status) {
  switch (status) {
    case Status::passed: return "passed";
    case Status::failed: return "failed";
    case Status::timeout: return "timeout";
    case Status::needs_gpu: return "needs-GPU";
    case Status::skipped: return "skipped";
    case Status::not_run: return "not-run";
  }
  return "?";
}

namespace {

std::string shown_status(Status status) {
  switch (status) {
    case Status::failed: return "FAILED";
    case Status::timeout: return "TIMEOUT";
    case Status::not_run: return "not run";
    default: return status_name(status);
  }
}

std::string pad(const std::string& text, size_t width) {
  return text.size() >= width ? text + " " : text + std::string(width - text.size(), ' ');
}

std::string seconds(double s) {
  char text[32];
  std::snprintf(text, sizeof text, s < 0.1 ? "%.3f s" : s < 10 ? "%.2f s" : "%.1f s", s);
  return text;
}

std::string scientific(double value) {
  if (!std::isfinite(value)) return "inf";
  char text[32];
  std::snprintf(text, sizeof text, "%.1e", value);
  return text;
}

std::string divergence_text(const Divergence& d) {
  std::string where;
  auto add = [&](const char* name, int64_t value) {
    if (value >= 0) where += (where.empty() ? "" : ", ") + std::string(name) + " " + std::to_string(value);
  };
  add("rank", d.rank);
  add("step", d.step);
  add("block", d.block);
  return (where.empty() ? "" : where + ": ") + d.what;
}

// The last `count` non-empty lines of a text.
std::vector<std::string> tail_lines(const std::string& text, size_t count) {
  std::vector<std::string> lines;
  std::istringstream stream(text);
  for (std::string line; std::getline(stream, line);)
    if (!line.empty()) lines.push_back(line);
  if (lines.size() > count) lines.erase(lines.begin(), lines.end() - static_cast<std::ptrdiff_t>(count));
  return lines;
}

std::vector<std::string> head_lines(const std::string& text, size_t count) {
  std::vector<std::string> lines;
  std::istringstream stream(text);
  for (std::string line; std::getline(stream, line) && lines.size() < count;)
    if (!line.empty()) lines.push_back(line);
  return lines;
}

// What the report says under a criterion that did not pass: why, where, the hint, its last output
// and the command that reproduces it. Each line starts with `indent`.
void print_details(std::ostream& out, const CriterionReport& c, const std::string& indent) {
  if (!c.message.empty()) out << indent << c.message << "\n";
  if (c.status == Status::not_run)
    for (const std::string& line : c.details) out << indent << line << "\n";
  if (c.status == Status::skipped || c.status == Status::needs_gpu || c.status == Status::not_run) return;
  if (c.observed_error >= 0 && c.status == Status::failed)
    out << indent << "observed error " << scientific(c.observed_error) << " vs tolerance " << scientific(c.tolerance)
        << "\n";
  if (c.divergence) out << indent << "first diverging: " << divergence_text(*c.divergence) << "\n";
  if (!c.deadlock.empty()) {
    out << indent << "deadlock report:\n";
    for (const std::string& line : head_lines(c.deadlock, 24)) out << indent << "  " << line << "\n";
  }
  for (const std::string& line : c.details) out << indent << line << "\n";
  if (!c.hint.empty()) out << indent << "hint: " << c.hint << "\n";
  if (!c.output.empty()) {
    const std::vector<std::string> lines = c.id == "compiles" ? head_lines(c.output, 20) : tail_lines(c.output, 8);
    out << indent << (c.id == "compiles" ? "compiler output:" : "its last output:") << "\n";
    for (const std::string& line : lines) out << indent << "  " << line << "\n";
  }
  out << indent << "reproduce: " << c.reproduce << "\n";
}

}  // namespace

void print_report(std::ostream& out, const GradeReport& report) {
  out << setup().command << " " << report.lab << " | " << report.file << "\n";
  if (report.compiled) {
    out << (report.cached ? std::string("compiled (cached)") : "compiled in " + seconds(report.compile_seconds))
        << " with " << report.environment.value("compiler", std::string("?")) << "\n";
  }
  if (report.compiled && !report.compile_output.empty()) {
    out << "compiler warnings:\n";
    for (const std::string& line : head_lines(report.compile_output, 10)) out << "  " << line << "\n";
  }
  out << "\n  " << pad("criterion", 15) << pad("result", 10) << pad("time", 9) << "what it checks\n";
  const std::string indent(17, ' ');
  for (const CriterionReport& c : report.criteria) {
    const bool ran = c.status == Status::passed || c.status == Status::failed || c.status == Status::timeout;
    out << "  " << pad(c.id, 15) << pad(shown_status(c.status), 10) << pad(ran ? seconds(c.seconds) : "-", 9) << c.title
        << "\n";
    if (c.status != Status::passed) print_details(out, c, indent);
  }
  out << "\n";
  if (!report.compiled) {
    out << (report.refusal.empty() ? "did not compile" : "refused") << " -- FAILED\n";
    return;
  }
  const int perf_total = report.performance_total();
  int perf_skipped = 0;
  for (const CriterionReport& c : report.criteria) perf_skipped += c.performance && c.status == Status::skipped ? 1 : 0;
  out << "correctness " << report.correctness_passed() << "/" << report.correctness_total() << " passed";
  if (report.needs_gpu() > 0) out << " (" << report.needs_gpu() << " not run: needs a GPU, not counted)";
  if (perf_total > 0) {
    out << ", performance " << report.performance_passed() << "/" << perf_total;
    if (perf_skipped > 0) out << " (" << perf_skipped << " skipped until correctness passes)";
  }
  out << " -- " << (report.passed() ? "PASSED" : "FAILED") << "\n";
}

nlohmann::json to_json(const GradeReport& report) {
  nlohmann::json criteria = nlohmann::json::array();
  for (const CriterionReport& c : report.criteria) {
    nlohmann::json j = {{"id", c.id},
                        {"title", c.title},
                        {"performance", c.performance},
                        {"points", c.points},
                        {"status", status_name(c.status)},
                        {"seconds", c.seconds},
                        {"limit_seconds", c.limit_seconds},
                        {"message", c.message},
                        {"hint", c.hint},
                        {"details", c.details},
                        {"reproduce", c.reproduce},
                        {"points", c.points}};
    if (c.observed_error >= 0) {
      j["observed_error"] = std::isfinite(c.observed_error) ? nlohmann::json(c.observed_error) : nlohmann::json("inf");
      j["tolerance"] = c.tolerance;
    }
    if (c.divergence) {
      j["first_divergence"] = {{"rank", c.divergence->rank},
                               {"step", c.divergence->step},
                               {"block", c.divergence->block},
                               {"what", c.divergence->what}};
    }
    if (!c.deadlock.empty()) j["deadlock"] = c.deadlock;
    if (!c.output.empty()) j["output"] = c.output;
    if (!c.judged.empty()) j["judged"] = c.judged;
    criteria.push_back(j);
  }
  return {{"lab", report.lab},
          {"file", report.file},
          {"compiled", report.compiled},
          {"cached", report.cached},
          {"compile_seconds", report.compile_seconds},
          {"compile_command", report.compile_command},
          {"compile_output", report.compile_output},
          {"refusal", report.refusal},
          {"criteria", criteria},
          {"score",
           {{"correctness_passed", report.correctness_passed()},
            {"correctness_total", report.correctness_total()},
            {"performance_passed", report.performance_passed()},
            {"performance_total", report.performance_total()},
            {"needs_gpu", report.needs_gpu()}}},
          {"passed", report.passed()},
          {"environment", report.environment}};
}

nlohmann::json to_gradescope(const GradeReport& report) {
  nlohmann::json tests = nlohmann::json::array();
  double score = 0;
  for (const CriterionReport& c : report.criteria) {
    if (c.id == "compiles" && c.status == Status::passed) continue;  // worth nothing; the others show it
    const bool passed = c.status == Status::passed;
    // A criterion that needs a GPU where there is none neither passes nor fails: it is listed, out
    // of nothing, and the score is out of the others.
    const double max_score = c.status == Status::needs_gpu ? 0.0 : c.points;
    std::ostringstream output;
    output << status_name(c.status) << (c.performance ? " (performance)" : "") << ": " << c.title << "\n";
    if (!passed) print_details(output, c, "");
    score += passed ? c.points : 0;
    tests.push_back({{"name", c.id + ": " + c.title},
                     {"score", passed ? c.points : 0.0},
                     {"max_score", max_score},
                     {"output", output.str()},
                     {"visibility", "visible"}});
  }
  double seconds = report.compile_seconds;
  for (const CriterionReport& c : report.criteria) seconds += c.id == "compiles" ? 0 : c.seconds;
  std::ostringstream summary;
  print_report(summary, report);
  return {{"score", score},          {"execution_time", seconds},      {"output", summary.str()},
          {"visibility", "visible"}, {"stdout_visibility", "visible"}, {"tests", tests}};
}

}  // namespace ringlab::grader
