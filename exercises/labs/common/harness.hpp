// The lab harness: what every lab's hidden tests are built from, and the protocol between a lab
// binary and the grader (exercises/grader/).
//
// A lab binary is the student's file linked with the lab's harness (labs/NN-name/harness.cpp,
// built once with the project) and this library, which holds main():
//   lab --list                      one JSON object per line per criterion:
//                                   {"id", "title", "timeout", "performance", "needs_gpu"}
//   lab --run ID --student FD       the student's side of a criterion: runs it, and sends what the
//                                   student's code produced, frame by frame, to FD (below)
//   lab --run ID --judge FD         the judge's side: runs the same criterion without calling any
//                                   student code, reads what that code produced from FD, and
//                                   prints the CriterionResult as JSON on stdout
//   lab --run ID --result FILE      both sides in one process (for a debugger): the result to FILE
// The grader runs each criterion in its own process group with a wall-clock limit, so a student's
// endless loop or crash costs one criterion, never the grade. Deadlocks are caught earlier, by the
// simulator's watchdog inside the criterion, and come back as DeadlockReport::describe().
//
// Judged from outside. The judge is the lab's starter linked with this harness, so no line of the
// submission is in its process; the student's side is the submission linked with the same harness.
// Both run the criterion's code in step. Every call into the student's code is wrapped in
// `across` (below), which on the student's side runs it and sends what it produced, and on the
// judge's side receives that instead: data the judge compares with its own oracle, never a verdict.
// A submission can only lie about its outputs, which must then be the right ones; what its process
// records about how it computed them (which block a call named, the bytes a rank had sent) is sent
// the same way, so a submission that forges that record can pass the criteria that read it.
//
// Sections: [results] [criteria] [problems] [running ranks] [comparing] [across processes]
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "exercises/labs/common/wire.hpp"
#include "reference/attention.hpp"
#include "reference/compare.hpp"
#include "reference/layout.hpp"
#include "sim/ranks/report.hpp"
#include "sim/ranks/world_options.hpp"

namespace ringlab {
class Communicator;
}

namespace ringlab::lab {

// ---- [results] ---------------------------------------------------------------------------------

// Where a distributed result first goes wrong: rank, ring step and block (the K/V block's origin
// rank), any of them -1 when it does not apply, and what happened there.
struct Divergence {
  int64_t rank = -1;
  int64_t step = -1;
  int64_t block = -1;
  std::string what;
};

struct CriterionResult {
  bool passed = true;
  std::string message;         // one line: what went wrong ("" when passed)
  double observed_error = -1;  // the worst error against the oracle, when one was measured
  double tolerance = -1;       // the tolerance it was judged by (abs + rel |r| at the worst element)
  std::optional<Divergence> divergence;
  std::string deadlock;              // the simulator's deadlock report, when the ranks deadlocked
  std::string hint;                  // what to fix
  std::vector<std::string> details;  // further lines

  // Records a failure; the first one's message is kept.
  void fail(const std::string& why);
  // Keeps the divergence that comes first in (step, rank) order.
  void diverge(Divergence where);
};

// ---- [criteria] --------------------------------------------------------------------------------

struct Criterion {
  std::string id;               // "p3" — what --only takes
  std::string title;            // "P = 3 (a non-power of two: the ring direction matters)"
  double timeout_seconds = 20;  // wall clock for the whole criterion process
  bool performance = false;     // graded only after every correctness criterion passed
  bool needs_gpu = false;       // reported as needs-GPU where no GPU is present
  std::function<CriterionResult()> run;
  double points = 1;  // its weight in a course's score (`ringlab grade --format gradescope`)
};

// Each lab's harness.cpp defines these two. Every call its criteria make into the student's code
// goes through `across` (or a `Calls`): the judge, built from the starter, calls none.
const char* lab_name();
std::vector<Criterion> lab_criteria();

// ---- [problems] --------------------------------------------------------------------------------

// One attention problem, cut by rank: global inputs (float) and their float64 copies, the exact
// oracle (forward, and backward when asked), and each rank's positions under a layout.
struct Problem {
  AttentionDims dims;
  int64_t ranks = 1;
  bool causal = false;
  LayoutKind layout = LayoutKind::contiguous;
  AttentionInputs<float> inputs;  // (B, S, H, D) / (B, S, HKV, D)
  AttentionInputs<double> inputs64;
  AttentionOutput<double> reference;            // out (B, S, H, D), lse (B, H, S)
  AttentionGrads<double> reference_grads;       // when backward
  AttentionOutput<float> forward32;             // the forward in float32 (out, lse) for backward labs
  std::vector<std::vector<int64_t>> positions;  // [rank] -> ascending global positions

  MaskKind mask() const { return causal ? MaskKind::causal : MaskKind::none; }
  int64_t tokens_per_rank() const { return dims.seq / ranks; }
};

struct ProblemSpec {
  int64_t ranks = 4;
  int64_t tokens_per_rank = 8;
  int64_t heads = 2, kv_heads = 2, dim = 16, batch = 1;
  LayoutKind layout = LayoutKind::contiguous;
  bool causal = false;
  bool backward = false;
  uint64_t seed = 1;
};

Problem make_problem(const ProblemSpec& spec);

// Rows of a global (B, S, X, D) tensor at a rank's positions -> (B, n, X, D).
Tensor<float> rows_of(const Tensor<float>& global, std::span<const int64_t> positions);
// The same for (B, H, S) lse-like tensors -> (B, H, n).
Tensor<double> lse_rows_of(const Tensor<double>& global, std::span<const int64_t> positions);
Tensor<double> rows_of(const Tensor<double>& global, std::span<const int64_t> positions);

// ---- [running ranks] ---------------------------------------------------------------------------

// Runs `rank_function` on P virtual ranks with the deadlock watchdog (a few seconds' fallback;
// deadlocks are usually detected at once).
RunReport run_ranks(int64_t ranks, SendMode mode, const std::function<void(Communicator&)>& rank_function,
                    double watchdog_seconds = 5);

// A criterion built on one of the lab's correctness checks: `check` (P = `ranks`) must pass as
// given, and must fail once the first message every rank sends at each step 0..`steps` - 1 is
// altered in transit (FaultKind::alter: every value negated, its checksum made to match, so no receiver can
// tell). A run that stays right under that computed with blocks that did not come through the
// communicator: through memory the ranks share (a global, a static, another rank's pointer), which
// a run of real processes on real GPUs does not have. The traffic a rank's counters show can be
// sent for show; this sees whether what arrived was used.
// A lab whose later steps also carry other data (lab 04's dK/dV accumulators, first at its last
// step) passes the steps whose first message is a K/V block, so that it is those that must matter.
CriterionResult uses_received_blocks(const std::function<CriterionResult()>& check, int64_t ranks, int64_t steps);

// When the run did not end well, records why in `result` (the deadlock report, the fault, or the
// exception a rank threw — "not implemented: ..." for a starter's TODO) and returns true.
bool record_run_failure(const RunReport& report, CriterionResult& result);

// ---- [comparing] -------------------------------------------------------------------------------

// Compares with the shared tolerance check and records the worst error: a failure names the
// tensor, the first bad element and `where` (e.g. "rank 2").
bool compare_into(CriterionResult& result, const std::string& name, std::span<const float> actual,
                  std::span<const double> expected, const Shape& shape, Tolerance tolerance, const std::string& where);

template <class A>
bool compare_tensor(CriterionResult& result, const std::string& name, const Tensor<A>& actual,
                    const Tensor<double>& expected, Tolerance tolerance, const std::string& where) {
  if (actual.shape() != expected.shape()) {
    result.fail(where + ": " + name + " has shape " + shape_string(actual.shape()) + ", expected " +
                shape_string(expected.shape()));
    return false;
  }
  std::vector<float> values(actual.storage().begin(), actual.storage().end());
  return compare_into(result, name, values, expected.span(), expected.shape(), tolerance, where);
}

// ---- [across processes] ------------------------------------------------------------------------

enum class Side : uint8_t {
  both,     // --result: one process runs the student's code and judges it
  student,  // --student FD: runs the student's code, sends what it produced
  judge,    // --judge FD: receives what the student's code produced, judges it
};
Side side();
void set_side(Side side, int fd);

// A frame from the student's side, as the judge receives it: its kind, the exception's message
// when kind is not `values`, and the values' bytes.
enum class FrameKind : uint8_t { values, not_implemented, exception };
void send_frame(const char* what, FrameKind kind, const std::string& payload);
std::string receive_frame(const char* what, FrameKind& kind);

// The student's process ended (or sent something unreadable) before the judge had what it needed.
class StudentGone : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Runs `produce`, which calls the student's code and stores what it returns in `values`, where the
// student's code runs, and makes `values` appear where the judge runs: the student's side (and a
// single process) runs it; the student's side then sends `values`; the judge does not run it and
// reads `values` instead. An exception thrown by `produce` is thrown on both sides (a starter's
// TODO stays NotImplemented). `what` names the step, in order: both sides must take the same ones.
template <class... T>
void across(const char* what, const std::function<void()>& produce, T&... values) {
  if (side() == Side::judge) {
    FrameKind kind = FrameKind::values;
    std::string payload = receive_frame(what, kind);
    if (kind == FrameKind::not_implemented) throw NotImplemented(payload);
    if (kind == FrameKind::exception) throw std::runtime_error(payload);
    try {
      wire::Reader reader(std::move(payload));
      reader(values...);
      if (!reader.done()) throw wire::WireError("the frame is longer than its values");
    } catch (const wire::WireError& e) {
      throw StudentGone(std::string("what the process running your code sent for ") + what +
                        " is malformed: " + e.what());
    }
    return;
  }
  try {
    produce();
  } catch (const NotImplemented& e) {
    if (side() == Side::student) send_frame(what, FrameKind::not_implemented, e.what());
    throw;
  } catch (const std::exception& e) {
    if (side() == Side::student) send_frame(what, FrameKind::exception, e.what());
    throw;
  }
  if (side() == Side::student) {
    wire::Writer writer;
    writer(values...);
    send_frame(what, FrameKind::values, writer.buffer());
  }
}

// What the judge reads is checked before anything is indexed with it (a run of P ranks sends P of
// each; a block's origin is a rank or -1): an honest student's side always fits, so a frame that
// does not could only have been made up. Throws StudentGone naming `what` and `why`.
void refuse_unless(bool fits, const char* what, const std::string& why);

// The same for one value that `produce` returns.
template <class T, class F>
T across_value(const char* what, F&& produce) {
  T value{};
  across(
      what, [&] { value = produce(); }, value);
  return value;
}

// The calls a criterion makes into the student's code. Where that code runs, the criterion is run
// once recording: each call runs and what it produced is written down. Then, on both sides, it is
// run again replaying: each call reads what the recorded one produced, in order, and runs nothing.
// The criterion is deterministic (it decides on what the calls produced, never on time), so both
// runs take the same path and make the same calls; the record crosses as one lab::across frame.
class Calls {
 public:
  // One call: `produce` calls the student's code and stores what it produced in `values`.
  template <class... T>
  void operator()(const std::function<void()>& produce, T&... values) {
    if (!replay_) {
      produce();
      record_(values...);
      return;
    }
    try {
      (*replay_)(values...);
    } catch (const wire::WireError& e) {
      throw StudentGone(std::string("what the process running your code sent for ") + what_ +
                        " is malformed: " + e.what());
    }
  }
  // One call that returns what it produced.
  template <class T, class F>
  T value(F&& produce) {
    T v{};
    (*this)([&] { v = produce(); }, v);
    return v;
  }

  // Runs `criterion(calls)` as above: its calls cross as one frame named `what`.
  template <class F>
  static CriterionResult across(const char* what, F&& criterion) {
    Calls calls;
    calls.what_ = what;
    std::string record;
    lab::across(  // the function above, not this one
        what,
        [&] {
          criterion(calls);
          record = calls.record_.buffer();
        },
        record);
    calls.replay_.emplace(std::move(record));
    CriterionResult result = criterion(calls);
    if (!calls.replay_->done())
      throw StudentGone(std::string("the process running your code sent more for ") + what +
                        " than the criterion's calls produce");
    return result;
  }

 private:
  const char* what_ = "";
  wire::Writer record_;
  std::optional<wire::Reader> replay_;
};

}  // namespace ringlab::lab
