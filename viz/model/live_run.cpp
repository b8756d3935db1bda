#include "viz/model/live_run.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "reference/error.hpp"
#include "reference/inputs.hpp"
#include "sim/plan/queries.hpp"
#include "sim/ranks/world_options.hpp"
#include "viz/model/plan_model.hpp"
#include "viz/model/trace_model.hpp"

namespace ringlab::viz {

namespace {

constexpr int64_t kMaxLiveUnits = 4096;
constexpr int64_t kLiveTokens = 512;

// Max abs error over the rows of `positions` of (B, S, X, D) tensors; ok = every element within
// the tolerance (NaN is never within it).
double rows_error(const Tensor<float>& actual, const Tensor<double>& expected, const std::vector<int64_t>& positions,
                  Tolerance tolerance, bool& ok) {
  if (actual.empty() || expected.empty()) return 0;
  double worst = 0;
  for (int64_t b = 0; b < expected.dim(0); ++b)
    for (int64_t position : positions)
      for (int64_t x = 0; x < expected.dim(2); ++x)
        for (int64_t d = 0; d < expected.dim(3); ++d) {
          const double r = expected(b, position, x, d), a = actual(b, position, x, d);
          const double error = std::fabs(a - r);
          if (!(error <= tolerance.abs + tolerance.rel * std::fabs(r))) ok = false;
          worst = std::isnan(error) ? INFINITY : std::max(worst, error);
        }
  return worst;
}

}  // namespace

PlanSpec small_run_spec(const PlanSpec& spec) {
  PlanSpec run = spec;
  const Layout layout(spec.layout, spec.dims.seq, spec.ranks, spec.block);
  const int64_t units = layout.units();
  if (units > kMaxLiveUnits) {
    throw UsageError("this layout has " + std::to_string(units) + " units, too many to run live (at most " +
                     std::to_string(kMaxLiveUnits) + "); use a larger --block or a smaller --seq");
  }
  const int64_t tokens = std::clamp<int64_t>(kLiveTokens / units, 1, layout.block());
  run.block = tokens;
  run.dims.batch = 1;
  run.dims.seq = units * tokens;
  run.dims.dim = 16;
  if (spec.dims.heads > 16) {  // keep the Ulysses divisibility and GQA, drop the rest
    const int64_t U =
        spec.algo == Algorithm::ulysses ? spec.ranks : (spec.algo == Algorithm::hybrid ? spec.ulysses : 1);
    const int64_t group = std::min<int64_t>(2, spec.dims.heads / std::max<int64_t>(1, spec.dims.kv_heads));
    run.dims.kv_heads = std::max<int64_t>(1, U);
    run.dims.heads = run.dims.kv_heads * std::max<int64_t>(1, group);
  }
  return run;
}

void attach_diagnosis(ScheduleModel& model, const Plan& plan, const Verification& verification,
                      std::span<const BlockError> block_errors, const RunOutputs& outputs,
                      const ReferenceOutputs& reference) {
  RunDiagnosis& d = model.diagnosis;
  d.present = true;
  d.verified = verification.ok();
  int passed = 0;
  d.tensors.clear();
  for (const TensorCheck& check : verification.checks) {
    passed += check.result.ok ? 1 : 0;
    char line[160];
    std::snprintf(line, sizeof line, "%-4s max abs error %-10.3g %s", check.name.c_str(), check.result.max_abs_error,
                  check.result.ok ? "ok" : "FAIL");
    d.tensors.push_back(line);
  }
  d.summary = (d.verified ? "verified: " : "WRONG: ") + std::to_string(passed) + " of " +
              std::to_string(verification.checks.size()) + " tensors within tolerance";

  // Each block's own result.
  d.wrong_cells = 0;
  for (const BlockError& e : block_errors) {
    BlockGrid* grid = model.grid_of(e.pass);
    if (!grid || e.q_block >= grid->blocks || e.kv_block >= grid->blocks) continue;
    GridCell& cell = grid->at(e.q_block, e.kv_block);
    const double scale = fp32_tolerance(e.pass == Pass::forward ? "out" : "dk").abs;
    cell.measured = true;
    cell.max_abs_error = std::max(cell.max_abs_error, e.max_abs_error);
    cell.tolerance_used = e.ok ? std::min(1.0, cell.max_abs_error / scale) : std::max(1.0, cell.max_abs_error / scale);
    if (!e.ok) {
      cell.cause = ErrorCause::wrong_result;
      ++d.wrong_cells;
    }
  }

  // Each ring position's final rows.
  d.blocks.assign(static_cast<size_t>(model.ring), {});
  for (int64_t g = 0; g < model.ring; ++g) {
    BlockResult& r = d.blocks[static_cast<size_t>(g)];
    const std::vector<int64_t> positions = plan.block_positions(g);
    r.out_error = rows_error(outputs.out, reference.forward.out, positions, fp32_tolerance("out"), r.query_ok);
    if (outputs.has_backward() && !reference.grads.dq.empty()) {
      r.dq_error = rows_error(outputs.dq, reference.grads.dq, positions, fp32_tolerance("dq"), r.query_ok);
      r.dk_error = rows_error(outputs.dk, reference.grads.dk, positions, fp32_tolerance("dk"), r.key_ok);
      r.dv_error = rows_error(outputs.dv, reference.grads.dv, positions, fp32_tolerance("dv"), r.key_ok);
    }
  }
  locate_first_error(model);
}

RunOutcome run_schedule(const PlanSpec& spec, std::atomic<int64_t>* ops_done) {
  RunOutcome outcome;
  outcome.spec = spec;
  try {
    const Plan plan = build_plan(spec);
    check_viewer_limits(plan);  // its model is drawn: the largest plan the viewer draws, as for a re-plan
    const AttentionInputs<float> x = make_inputs(spec.dims, 0, spec.backward);
    const AttentionInputs<double> inputs = x.cast<double>();
    // One kernel thread per rank: the viewer shares the machine with its own drawing.
    SimExecutor executor(make_world_options(static_cast<int>(spec.ranks), 10.0, {}, false), 1);
    ExecuteOptions traced;
    traced.trace = true;
    traced.ops_done = ops_done;
    const ExecutionResult sim = executor.execute(plan, x, traced);
    outcome.model = model_from_plan(plan);
    outcome.model.source = SourceKind::run;
    outcome.model.title = "run: " + spec.describe();
    attach_measured_time(outcome.model, sim.trace);
    if (sim.failure) {
      outcome.error = sim.failure->description;
      return outcome;
    }
    const ReferenceOutputs reference = compute_reference(inputs, plan.mask(), spec.backward);
    const Verification verification = verify(sim.outputs, reference, "sim (fp32)");
    std::vector<BlockError> block_errors;
    if (!verification.ok()) {
      ExecuteOptions diagnose;
      diagnose.diagnose_inputs = &inputs;
      diagnose.diagnose_reference = &reference;
      block_errors = executor.execute(plan, x, diagnose).block_errors;
    }
    attach_diagnosis(outcome.model, plan, verification, block_errors, sim.outputs, reference);
    outcome.ok = true;
  } catch (const std::exception& error) {
    outcome.error = error.what();
  }
  return outcome;
}

// ---- LiveRun ---------------------------------------------------------------------------------

LiveRun::~LiveRun() { wait(); }

void LiveRun::wait() {
  if (thread_.joinable()) thread_.join();
}

bool LiveRun::start(const PlanSpec& spec) {
  if (running_.load()) return false;
  wait();  // the previous run's thread has finished: reap it
  running_ = true;
  ops_done_ = 0;
  try {
    total_ops_ = std::max<int64_t>(1, total_ops(build_plan(spec)));
  } catch (const std::exception&) {
    total_ops_ = 1;  // run_schedule reports the error
  }
  thread_ = std::thread([this, spec] {
    RunOutcome outcome = run_schedule(spec, &ops_done_);
    {
      std::lock_guard lock(mutex_);
      outcome_ = std::move(outcome);
    }
    running_ = false;
  });
  return true;
}

double LiveRun::progress() const {
  return std::clamp(static_cast<double>(ops_done_.load()) / static_cast<double>(total_ops_.load()), 0.0, 1.0);
}

std::optional<RunOutcome> LiveRun::take() {
  std::lock_guard lock(mutex_);
  std::optional<RunOutcome> result = std::move(outcome_);
  outcome_.reset();
  return result;
}

}  // namespace ringlab::viz
