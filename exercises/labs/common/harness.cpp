// The lab harness library: main() and the protocol with the grader, problems with their exact
// oracle, running ranks, and comparisons (harness.hpp).
// Sections: [results] [problems] [running ranks] [comparing] [main]
#include "exercises/labs/common/harness.hpp"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "exercises/labs/common/lab_support.hpp"
#include "reference/exact_attention.hpp"
#include "reference/flash_attention.hpp"
#include "reference/inputs.hpp"
#include "sim/ranks/world.hpp"

namespace ringlab::lab {

// ---- [results] ---------------------------------------------------------------------------------

void CriterionResult::fail(const std::string& why) {
  if (passed || message.empty()) message = why;
  passed = false;
}

void CriterionResult::diverge(Divergence where) {
  passed = false;
  if (!divergence || where.step < divergence->step ||
      (where.step == divergence->step && where.rank < divergence->rank)) {
    divergence = std::move(where);
  }
}

// ---- [problems] --------------------------------------------------------------------------------

Tensor<float> rows_of(const Tensor<float>& global, std::span<const int64_t> positions) {
  return gather_rows(global, positions, 1);
}
Tensor<double> rows_of(const Tensor<double>& global, std::span<const int64_t> positions) {
  return gather_rows(global, positions, 1);
}
Tensor<double> lse_rows_of(const Tensor<double>& global, std::span<const int64_t> positions) {
  return gather_rows(global, positions, 2);
}

Problem make_problem(const ProblemSpec& spec) {
  Problem p;
  p.dims.batch = spec.batch;
  p.dims.seq = spec.ranks * spec.tokens_per_rank;
  p.dims.heads = spec.heads;
  p.dims.kv_heads = spec.kv_heads;
  p.dims.dim = spec.dim;
  p.ranks = spec.ranks;
  p.causal = spec.causal;
  p.layout = spec.layout;
  p.inputs = make_inputs(p.dims, spec.seed, spec.backward);
  p.inputs64 = p.inputs.cast<double>();
  p.reference = exact_attention(p.inputs64.q, p.inputs64.k, p.inputs64.v, p.mask());
  if (spec.backward) {
    p.reference_grads = exact_attention_backward(p.inputs64.q, p.inputs64.k, p.inputs64.v, p.inputs64.dout, p.mask());
    p.forward32 = flash_attention(p.inputs.q, p.inputs.k, p.inputs.v, p.mask());
  }
  const Layout layout(spec.layout, p.dims.seq, spec.ranks);
  for (int64_t r = 0; r < spec.ranks; ++r) p.positions.push_back(layout.positions(r));
  return p;
}

// ---- [running ranks] ---------------------------------------------------------------------------

RunReport run_ranks(int64_t ranks, SendMode mode, const std::function<void(Communicator&)>& rank_function,
                    double watchdog_seconds) {
  WorldOptions options;
  options.ranks = static_cast<int>(ranks);
  options.send_mode = mode;
  options.timeout_seconds = watchdog_seconds;
  return World(options).run(rank_function);
}

bool record_run_failure(const RunReport& report, CriterionResult& result) {
  if (report.ok()) return false;
  switch (report.status) {
    case RunStatus::deadlock:
      result.fail("the ranks deadlocked: every live rank waits for a message or a match that never comes");
      result.deadlock = report.deadlock ? report.deadlock->describe() : report.describe();
      result.hint =
          "look at what each rank waits for below: a send with no matching receive (or the other way "
          "round), a wrong peer, or a blocking send before the receive under rendezvous sends";
      break;
    case RunStatus::comm_fault:
      result.fail("communication fault: " + (report.fault ? report.fault->describe() : report.describe()));
      result.hint = "both ends of a message must agree on its size and order";
      break;
    case RunStatus::error: {
      const std::string what = report.error ? report.error->message : report.describe();
      const int rank = report.error ? report.error->rank : -1;
      bool todo = false;
      if (report.error && report.error->exception) {
        try {
          std::rethrow_exception(report.error->exception);
        } catch (const NotImplemented&) {
          todo = true;
        } catch (...) {
        }
      }
      result.fail(todo ? "not implemented: " + what : "rank " + std::to_string(rank) + " threw: " + what);
      break;
    }
    case RunStatus::ok: break;
  }
  return true;
}

// ---- [comparing] -------------------------------------------------------------------------------

bool compare_into(CriterionResult& result, const std::string& name, std::span<const float> actual,
                  std::span<const double> expected, const Shape& shape, Tolerance tolerance, const std::string& where) {
  if (actual.size() != expected.size()) {
    result.fail(where + ": " + name + " has " + std::to_string(actual.size()) + " elements, expected " +
                std::to_string(expected.size()));
    return false;
  }
  // The element that uses most of its tolerance: its error and its allowance are what we report.
  double worst_ratio = -1, worst_error = 0, worst_allowed = 0;
  for (size_t i = 0; i < actual.size(); ++i) {
    const double a = actual[i], r = expected[i];
    const double allowed = tolerance.abs + tolerance.rel * (std::isfinite(r) ? std::fabs(r) : 0);
    double error = 0;
    if (std::isnan(a) || std::isnan(r)) {
      error = INFINITY;
    } else if (std::isinf(a) || std::isinf(r)) {
      error = a == r ? 0 : INFINITY;
    } else {
      error = std::fabs(a - r);
    }
    const double ratio = allowed > 0 ? error / allowed : (error > 0 ? INFINITY : 0);
    if (ratio > worst_ratio) worst_ratio = ratio, worst_error = error, worst_allowed = allowed;
  }
  const CompareResult c = compare(actual, expected, shape, tolerance);
  if (result.observed_error < 0 || worst_ratio > result.observed_error / std::max(result.tolerance, 1e-300)) {
    result.observed_error = worst_error;
    result.tolerance = worst_allowed;
  }
  if (c.ok) return true;
  result.fail(where + ": " + name + " differs from exact attention: " + c.describe());
  return false;
}

}  // namespace ringlab::lab

// ---- [main] ------------------------------------------------------------------------------------

namespace {

using ringlab::lab::CriterionResult;

nlohmann::json to_json(const CriterionResult& r) {
  nlohmann::json j = {{"passed", r.passed}, {"message", r.message}, {"hint", r.hint}, {"details", r.details}};
  if (r.observed_error >= 0) {
    j["observed_error"] = std::isfinite(r.observed_error) ? nlohmann::json(r.observed_error) : nlohmann::json("inf");
    j["tolerance"] = r.tolerance;
  }
  if (r.divergence) {
    j["divergence"] = {{"rank", r.divergence->rank},
                       {"step", r.divergence->step},
                       {"block", r.divergence->block},
                       {"what", r.divergence->what}};
  }
  if (!r.deadlock.empty()) j["deadlock"] = r.deadlock;
  return j;
}

int usage() {
  std::cerr << "usage: " << ringlab::lab::lab_name() << " --list | --run ID --result FILE\n"
            << "(run it through 'ringlab grade', which compiles, times out and reports)\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  const std::vector<ringlab::lab::Criterion> criteria = ringlab::lab::lab_criteria();
  if (args.size() == 1 && args[0] == "--list") {
    for (const auto& c : criteria)
      std::cout << nlohmann::json{{"id", c.id},
                                  {"title", c.title},
                                  {"timeout", c.timeout_seconds},
                                  {"performance", c.performance},
                                  {"needs_gpu", c.needs_gpu},
                                  {"points", c.points}}
                       .dump()
                << "\n";
    return 0;
  }
  if (args.size() != 4 || args[0] != "--run" || args[2] != "--result") return usage();
  CriterionResult result;
  bool found = false;
  for (const auto& c : criteria) {
    if (c.id != args[1]) continue;
    found = true;
    try {
      result = c.run();
    } catch (const ringlab::lab::NotImplemented& e) {
      result.fail(std::string("not implemented: ") + e.what());
    } catch (const std::exception& e) {
      result.fail(std::string("threw: ") + e.what());
    }
  }
  if (!found) result.fail("no criterion '" + args[1] + "' in this lab");
  std::ofstream out(args[3]);
  out << to_json(result).dump() << "\n";
  return out ? 0 : 3;
}
