#include "sim/pipeline/op_interpreter.hpp"

namespace ringlab {

const char* compute_trace_name(Pass pass) { return pass == Pass::forward ? "attention fwd" : "attention bwd"; }

const char* collective_trace_name(Collective collective) {
  switch (collective) {
    case Collective::all_gather_kv: return "all_gather";
    case Collective::reduce_scatter_dkv: return "reduce_scatter";
    default: return "all_to_all";
  }
}

namespace {

struct TraceName {
  const char* operator()(const ExchangeOp& op) const { return op.send_to >= 0 ? "send" : "recv"; }
  const char* operator()(const WaitOp&) const { return "wait"; }
  const char* operator()(const LoadKvOp&) const { return "load kv"; }
  const char* operator()(const ComputeOp& op) const { return compute_trace_name(op.pass); }
  const char* operator()(const AccumulateOp&) const { return "accumulate dK/dV"; }
  const char* operator()(const CollectiveOp& op) const { return collective_trace_name(op.collective); }
  const char* operator()(const FinalizeOp&) const { return "finalize"; }
  const char* operator()(const PrepareBackwardOp&) const { return "prepare backward"; }
  const char* operator()(const StoreGradsOp&) const { return "store grads"; }
};

}  // namespace

const char* op_trace_name(const OpBody& body) { return std::visit(TraceName{}, body); }

bool is_local_op(const OpBody& body) {
  return !std::holds_alternative<ExchangeOp>(body) && !std::holds_alternative<WaitOp>(body) &&
         !std::holds_alternative<CollectiveOp>(body);
}

TraceEvent op_trace_event(const Plan& plan, int64_t rank, const Op& op) {
  TraceEvent event;
  event.name = op_trace_name(op.body);
  event.rank = static_cast<int>(rank);
  event.lane = is_local_op(op.body) ? TraceLane::compute : TraceLane::comm;
  event.step = static_cast<int>(op.step);
  event.label = plan.phases()[static_cast<size_t>(op.phase)].name;
  if (const auto* compute = std::get_if<ComputeOp>(&op.body)) {
    event.flops = compute->flops;
    event.q_block = static_cast<int>(compute->q_block);
    event.kv_block = static_cast<int>(compute->kv_block);
    event.mask = block_shape_name(compute->shape);
  } else if (const auto* exchange = std::get_if<ExchangeOp>(&op.body)) {
    event.peer = static_cast<int>(exchange->send_to >= 0 ? exchange->send_to : exchange->recv_from);
    event.tag = exchange->tag;
    event.bytes = exchange->bytes;
  } else if (const auto* collective = std::get_if<CollectiveOp>(&op.body)) {
    event.bytes = collective->recv_bytes;
  }
  return event;
}

}  // namespace ringlab
