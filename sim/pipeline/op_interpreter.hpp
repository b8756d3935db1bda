// One rank's ops, interpreted: what every executor that runs a plan's op lists (sim/plan/plan.hpp:
// expand) does the same way — the sim executor, gpu-streams, gpu-nccl. The interpreter visits an
// op, tells the executor when a new (phase, step) begins, makes the op's trace event, calls the
// executor's handler for the op's kind, counts a compute's block into the rank's summary
// (count_block) and the op into the progress counter. The executor writes only the semantics:
//
//   struct Handler {
//     // one per op body type (or a template); returns void, or bool when it may have to wait:
//     // false = "not yet, call again" (gpu-streams' round-robin enqueueing)
//     void execute(const Op& op, const ComputeOp& body, TraceEvent event);
//     ...
//     void begin_step(int64_t step, const std::string& phase);  // optional
//   };
//
// The trace event comes without times (those are the executor's): name, rank, lane, step, phase
// label, and a compute's blocks, mask and FLOPs — so every executor's traces say the same things.
#pragma once

#include <atomic>
#include <cstdint>
#include <span>
#include <string>
#include <type_traits>
#include <variant>

#include "sim/pipeline/result.hpp"
#include "sim/pipeline/trace.hpp"
#include "sim/plan/plan.hpp"

namespace ringlab {

// The name of an op's trace event: "attention fwd" | "attention bwd" | "load kv" |
// "accumulate dK/dV" | "finalize" | "prepare backward" | "store grads" for the local ops, "send"
// (or "recv" for an exchange that only receives), "wait", and "all_gather" | "reduce_scatter" |
// "all_to_all" for the collectives.
const char* op_trace_name(const OpBody& body);
// The same names for executors that never build an op (the dry executor walks templates).
const char* compute_trace_name(Pass pass);                 // "attention fwd" | "attention bwd"
const char* collective_trace_name(Collective collective);  // "all_gather" | "reduce_scatter" | "all_to_all"
// Local ops need no communication: LoadKv, Compute, Accumulate, Finalize, PrepareBackward, StoreGrads.
bool is_local_op(const OpBody& body);
// The trace event of `op` run by world rank `rank`, without times: name, lane (compute for the
// local ops, comm for the others), step and phase label; a compute's q_block, kv_block, shape
// (as "mask") and FLOPs; an exchange's peer, tag and bytes; a collective's bytes received.
TraceEvent op_trace_event(const Plan& plan, int64_t rank, const Op& op);

class OpInterpreter {
 public:
  // `summary` receives the rank's block counts; `ops_done` (may be null) one count per op.
  OpInterpreter(const Plan& plan, int64_t rank, RankSummary& summary, std::atomic<int64_t>* ops_done = nullptr)
      : plan_(plan), rank_(rank), summary_(summary), ops_done_(ops_done) {}

  int64_t rank() const { return rank_; }

  // Runs one op on `handler` and returns what its handler returns. A handler that returns false
  // has not run the op: nothing is counted, and the op is to be run again later.
  template <class Handler>
  auto run(const Op& op, Handler& handler) {
    if (op.phase != phase_ || op.step != step_) {
      if constexpr (requires { handler.begin_step(op.step, std::string()); }) {
        handler.begin_step(op.step, plan_.phases()[static_cast<size_t>(op.phase)].name);
      }
      phase_ = op.phase, step_ = op.step;
    }
    return std::visit(
        [&](const auto& body) {
          using Result = decltype(handler.execute(op, body, TraceEvent{}));
          if constexpr (std::is_void_v<Result>) {
            handler.execute(op, body, op_trace_event(plan_, rank_, op));
            done(body);
          } else {
            const bool ran = handler.execute(op, body, op_trace_event(plan_, rank_, op));
            if (ran) done(body);
            return ran;
          }
        },
        op.body);
  }

  // Runs a rank's ops in order (handlers that never wait).
  template <class Handler>
  void run_all(std::span<const Op> ops, Handler& handler) {
    for (const Op& op : ops) run(op, handler);
  }

 private:
  template <class Body>
  void done(const Body& body) {
    if constexpr (std::is_same_v<Body, ComputeOp>) count_block(summary_, body);
    if (ops_done_) ops_done_->fetch_add(1, std::memory_order_relaxed);
  }

  const Plan& plan_;
  int64_t rank_;
  RankSummary& summary_;
  std::atomic<int64_t>* ops_done_;
  int phase_ = -1;
  int64_t step_ = -1;
};

}  // namespace ringlab
