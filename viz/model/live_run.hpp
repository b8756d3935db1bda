// Live runs: the schedule on screen executed on the simulator (small sizes), verified against
// exact attention, and — when the result is wrong — run again with every block checked on its
// own, so the grid can show which blocks are wrong and at which step the error enters.
//
// LiveRun does that on a background thread the view polls once per frame; the thread is joined
// when the next run starts and in the destructor, never detached.
#pragma once

#include <atomic>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "executors/sim/sim_executor.hpp"
#include "sim/pipeline/verification.hpp"
#include "sim/plan/plan.hpp"
#include "viz/model/schedule_model.hpp"

namespace ringlab::viz {

// The same schedule at sizes the simulator runs in a blink: B = 1, D = 16, the same heads, and
// the same layout units (so the same blocks, shapes and steps) with at most 512 / units tokens
// each. Throws UsageError when the layout has more than 4096 units (too fine to run live).
PlanSpec small_run_spec(const PlanSpec& spec);

struct RunOutcome {
  bool ok = false;      // the run completed (its result may still be wrong: see the diagnosis)
  std::string error;    // one line when it did not: a usage error, a deadlock, a fault
  ScheduleModel model;  // source = run: measured time, per-block errors, where the error enters
  PlanSpec spec;        // what ran (small_run_spec's sizes): the controls show it with the model
};

// Builds, runs, verifies and diagnoses `spec` as given (call small_run_spec first for big sizes).
// Blocking. Errors are reported in RunOutcome::error, never thrown; a plan past the viewer's
// limits (check_viewer_limits) is one of them.
RunOutcome run_schedule(const PlanSpec& spec, std::atomic<int64_t>* ops_done = nullptr);

// Puts a run's measurements into a model of the same plan: each block's own error
// (`block_errors`), each ring position's final error (outputs against the reference), and the
// verification lines; then locates where the error enters.
void attach_diagnosis(ScheduleModel& model, const Plan& plan, const Verification& verification,
                      std::span<const BlockError> block_errors, const RunOutputs& outputs,
                      const ReferenceOutputs& reference);

class LiveRun {
 public:
  LiveRun() = default;
  ~LiveRun();
  LiveRun(const LiveRun&) = delete;
  LiveRun& operator=(const LiveRun&) = delete;

  // Starts a run of `spec` (as given); false when one is still running.
  bool start(const PlanSpec& spec);
  bool running() const { return running_.load(); }
  double progress() const;  // 0..1 of the first (traced) run's ops
  // The finished outcome, handed out once.
  std::optional<RunOutcome> take();
  // Blocks until the current run (if any) has finished.
  void wait();

 private:
  std::thread thread_;
  std::atomic<bool> running_{false};
  std::atomic<int64_t> ops_done_{0};
  std::atomic<int64_t> total_ops_{1};
  std::mutex mutex_;
  std::optional<RunOutcome> outcome_;
};

}  // namespace ringlab::viz
