// The model of a plan: the shared plan walk (sim/plan/walk.hpp) fills in what each rank holds and
// computes, the cost model (viz/model/trace_model.hpp, attach_predicted_time) the times.
// Sections: [plan walk] [model of a plan]
#include "viz/model/plan_model.hpp"

#include <algorithm>
#include <array>

#include "reference/error.hpp"
#include "sim/plan/check.hpp"
#include "sim/plan/queries.hpp"
#include "sim/plan/walk.hpp"
#include "viz/model/trace_model.hpp"

namespace ringlab::viz {

// ---- [plan walk] -----------------------------------------------------------------------------

namespace {

constexpr size_t kSlots = static_cast<size_t>(Slot::count);

// What the viewer follows on each rank: which block each buffer holds, and whose dK/dV.
struct HeldBlocks {
  std::array<int64_t, kSlots> origin{};                       // ring position held by each slot
  std::array<std::pair<int64_t, int64_t>, kSlots> written{};  // (q, kv) cell whose dK/dV a slot holds
};

// The model's per-step data from the shared plan walk (sim/plan/walk.hpp): what each rank holds
// and computes, the grid's cells, transfers and collectives. Times come from the cost model.
class PlanModelWalk final : public WalkVisitor {
 public:
  PlanModelWalk(const Plan& plan, const std::vector<std::vector<Op>>& ops, ScheduleModel& model)
      : plan_(plan), ops_(ops), m_(model) {
    held_.resize(static_cast<size_t>(plan.ranks()));
    for (HeldBlocks& h : held_) {
      h.origin.fill(kNoBlock);
      h.written.fill({kNoBlock, kNoBlock});
    }
  }

  void visit(const WalkVisit& v) override {
    std::visit([&](const auto& body) { execute(v, body); }, v.op->body);
  }

  // A group's collective: drawn once, at the step of its op; its effect on every member's buffers.
  void completed(const CollectiveGathering& g) override {
    const CollectiveOp& c = *g.op;
    m_.collectives.push_back({global_step(op_at(g.entered.front())), c.collective, collective_name(c.collective),
                              c.members, c.send_bytes, 0, 0});
    for (int64_t member : c.members) {
      HeldBlocks& h = held(member);
      if (c.collective == Collective::all_gather_kv) h.origin[static_cast<size_t>(Slot::gathered_kv)] = kAllBlocks;
      if (c.collective == Collective::reduce_scatter_dkv) {
        h.origin[static_cast<size_t>(Slot::dkv0)] = plan_.ring_position(member);
      }
    }
  }

 private:
  int64_t global_step(const Op& op) const { return m_.phases[static_cast<size_t>(op.phase)].first_step + op.step; }
  const Op& op_at(const OpRef& at) const { return ops_[static_cast<size_t>(at.rank)][static_cast<size_t>(at.index)]; }
  HeldBlocks& held(int64_t rank) { return held_[static_cast<size_t>(rank)]; }
  RankStep& rank_step(int64_t rank, int64_t step) {
    return m_.rank_steps[static_cast<size_t>(rank)][static_cast<size_t>(step)];
  }
  BlockGrid& grid(Pass pass) { return m_.grids[pass == Pass::forward || m_.grids.size() == 1 ? 0 : 1]; }

  void execute(const WalkVisit& v, const ExchangeOp& e) {
    HeldBlocks& h = held(v.at.rank);
    if (v.sent) {
      const int64_t origin = h.origin[static_cast<size_t>(e.send_slot)];
      Transfer t{v.at.rank, e.send_to, e.payload, origin, global_step(*v.op), e.bytes, 0, 0};
      t.tag = e.tag;
      m_.transfers.push_back(t);
      message_origin_.resize(static_cast<size_t>(v.sent->id) + 1, kNoBlock);
      message_origin_[static_cast<size_t>(v.sent->id)] = origin;
    }
    if (e.recv_from >= 0) h.origin[static_cast<size_t>(e.recv_slot)] = kNoBlock;  // until the wait
  }

  void execute(const WalkVisit& v, const WaitOp&) {
    if (!v.exchange || !v.received) return;  // nothing arrives (a plan error the checker reports)
    held(v.at.rank).origin[static_cast<size_t>(v.exchange->recv_slot)] =
        message_origin_[static_cast<size_t>(v.received->id)];
  }

  void execute(const WalkVisit& v, const LoadKvOp& load) {
    held(v.at.rank).origin[static_cast<size_t>(load.slot)] = load.block;
  }

  void execute(const WalkVisit& v, const ComputeOp& c) {
    const int64_t rank = v.at.rank, step = global_step(*v.op);
    HeldBlocks& h = held(rank);
    RankLoad& load = m_.load.ranks[static_cast<size_t>(rank)];
    if (!c.kernels.empty()) load.computed += 1;
    if (c.shape == BlockShape::skipped) load.skipped += 1;
    if (c.shape == BlockShape::diagonal || c.shape == BlockShape::masked || c.shape == BlockShape::erratum ||
        c.shape == BlockShape::partial)
      load.masked += 1;
    load.flops += c.flops;

    RankStep& now = rank_step(rank, step);
    now.computed = c.kv_block;
    now.kv_block = h.origin[static_cast<size_t>(c.kv_slot)] == kAllBlocks ? kAllBlocks : c.kv_block;
    now.shape = c.shape;
    now.flops += c.flops;

    GridCell& cell = grid(c.pass).at(c.q_block, c.kv_block);
    cell.planned = true;
    cell.shape = c.shape;
    cell.step = step;
    cell.phase_step = v.op->step;
    cell.ranks.push_back(rank);
    cell.flops += c.flops;
    cell.pairs = c.pairs;
    if (erratum_mask_is_wrong(plan_, c)) cell.cause = ErrorCause::wrong_mask;

    if (c.pass == Pass::backward && c.grad_slot != Slot::gathered_dkv && !c.accumulate_grad) {
      h.origin[static_cast<size_t>(c.grad_slot)] = c.kv_block;
      h.written[static_cast<size_t>(c.grad_slot)] = {c.q_block, c.kv_block};
    }
  }

  // dK/dV added into another block's accumulator: the cell that produced them is misrouted.
  void execute(const WalkVisit& v, const AccumulateOp& a) {
    HeldBlocks& h = held(v.at.rank);
    const int64_t from = h.origin[static_cast<size_t>(a.from)], to = h.origin[static_cast<size_t>(a.to)];
    rank_step(v.at.rank, global_step(*v.op)).dkv_block = to;
    if (from < 0 || to < 0 || from == to) return;
    const auto [q, k] = h.written[static_cast<size_t>(a.from)];
    if (q < 0 || k < 0) return;
    GridCell& cell = grid(Pass::backward).at(q, k);
    if (cell.computed() && cell.cause == ErrorCause::none) {
      cell.cause = ErrorCause::misrouted_gradient;
      cell.misrouted_into = to;
    }
  }

  void execute(const WalkVisit& v, const PrepareBackwardOp&) {
    held(v.at.rank).origin[static_cast<size_t>(Slot::dkv0)] = plan_.ring_position(v.at.rank);
  }

  void execute(const WalkVisit&, const CollectiveOp&) {}  // drawn when the group completes it
  void execute(const WalkVisit&, const FinalizeOp&) {}
  void execute(const WalkVisit&, const StoreGradsOp&) {}

  const Plan& plan_;
  const std::vector<std::vector<Op>>& ops_;  // [rank]: the walked op lists
  ScheduleModel& m_;
  std::vector<HeldBlocks> held_;         // [rank]
  std::vector<int64_t> message_origin_;  // [message id]: the block its sender's slot held
};

// "0-127, 896-1023": a block's tokens as ranges, from its (ascending) layout units of `block`
// tokens each — O(units), not O(tokens), so a re-plan at S = 10^9 does not list every token.
std::string token_ranges(const std::vector<int64_t>& units, int64_t block) {
  std::string text;
  int ranges = 0;
  for (size_t i = 0; i < units.size();) {
    size_t j = i;
    while (j + 1 < units.size() && units[j + 1] == units[j] + 1) ++j;
    if (++ranges > 4) {
      text += ", ...";
      break;
    }
    const int64_t first = units[i] * block, last = units[j] * block + block - 1;
    if (!text.empty()) text += ", ";
    text += std::to_string(first);
    if (last > first) text += "-" + std::to_string(last);
    i = j + 1;
  }
  return text;
}

}  // namespace

// ---- [model of a plan] ----------------------------------------------------------------------

namespace {

// Phases, global steps, empty grids, token ranges and rows: everything but what the walk fills in.
ScheduleModel plan_skeleton(const Plan& plan) {
  ScheduleModel m;
  m.source = SourceKind::plan;
  m.title = plan.spec().describe();
  m.ranks = plan.ranks();
  m.ulysses = plan.ulysses();
  m.ring = plan.ring();
  m.causal = plan.spec().causal;
  m.mask = plan.spec().mask();
  int64_t first = 0;
  for (const Phase& phase : plan.phases()) {
    PhaseView view{phase.name, phase.pass, phase.family, phase.steps, first, false, false};
    for (const TemplateEntry& entry : phase.body) {
      view.has_compute |= std::holds_alternative<ComputeT>(entry.op);
      view.has_collective |= std::holds_alternative<CollectiveT>(entry.op);
    }
    for (int64_t s = 0; s < phase.steps; ++s) m.steps.push_back({static_cast<int>(m.phases.size()), s, 0, 0});
    m.phases.push_back(view);
    first += phase.steps;
  }
  m.rank_steps.assign(static_cast<size_t>(m.ranks), std::vector<RankStep>(m.steps.size()));
  for (Pass pass : {Pass::forward, Pass::backward}) {
    if (pass == Pass::backward && !plan.spec().backward) continue;
    m.grids.push_back(empty_grid(pass, m.ring));
  }
  m.unit_tokens = plan.layout().block();
  // Every block's tokens (for the true cell shapes under documents or a window, and the document
  // strips) only up to kMaxModelTokens: they are O(S), 16 GB at S = 2 x 10^9. Past it cells are
  // drawn by their shapes.
  const bool positions = plan.spec().dims.seq <= kMaxModelTokens;
  for (int64_t g = 0; g < m.ring; ++g) {
    m.block_units.push_back(plan.block_units(g));
    m.block_tokens.push_back(token_ranges(m.block_units.back(), plan.layout().block()));
    if (positions) {
      std::vector<int64_t> tokens = plan.block_positions(g);
      std::sort(tokens.begin(), tokens.end());
      m.block_positions.push_back(std::move(tokens));
    }
  }
  m.load.ranks.assign(static_cast<size_t>(m.ranks), {});
  for (int64_t r = 0; r < m.ranks; ++r)
    for (int lane = 0; lane < kTimelineLanes; ++lane) m.timeline.rows.push_back({r, lane, {}});
  return m;
}

}  // namespace

ScheduleModel model_from_plan(const Plan& plan, const Hardware& hardware) {
  ScheduleModel m = plan_skeleton(plan);
  const std::vector<std::vector<Op>> ops = expand_all(plan);
  PlanModelWalk walk(plan, ops, m);
  const WalkResult result = walk_plan(plan, ops, walk);
  for (BlockGrid& grid : m.grids)
    for (GridCell& cell : grid.cells) std::sort(cell.ranks.begin(), cell.ranks.end());  // walk order varies
  // The checker's findings name (rank, step) in words, deadlocks included; past the size where
  // the viewer runs it, the walk's own deadlock description stands in.
  if (plan.ranks() <= 256) {
    const PlanCheck check = check_plan(plan);
    m.findings = check.findings;
  } else {
    for (const BlockedRank& b : result.blocked) {
      m.findings.push_back({b.at.rank, b.step, plan.phases()[static_cast<size_t>(b.phase)].name,
                            "never completes: it " + b.what() + " (deadlock)"});
    }
  }
  attach_predicted_time(m, plan, hardware);
  locate_first_error(m);
  return m;
}

std::vector<LayoutBalance> layout_balances(const PlanSpec& spec) {
  std::vector<LayoutBalance> balances;
  for (const LayoutKind kind :
       {LayoutKind::contiguous, LayoutKind::zigzag, LayoutKind::striped, LayoutKind::balanced}) {
    PlanSpec other = spec;
    if (kind != spec.layout) other.block = 0;  // another layout: its own default unit
    other.layout = kind;
    LayoutBalance b{layout_name(kind), kind == spec.layout, false, 1, {}};
    // Weighing a layout plans and expands it, which costs time and memory in its units (striped's
    // default unit is one token: S = 10^8 took 20 s and a GB on every re-plan), so past a bound
    // it is not weighed. The Layout itself is O(1) to make; one that does not fit throws below.
    int64_t units = 0;
    try {
      units = Layout(kind, other.dims.seq, other.ranks, other.block).units();
    } catch (const UsageError&) {
    }
    if (units > kMaxBalanceUnits) {
      b.why = std::string(layout_name(kind)) + " cuts S=" + std::to_string(other.dims.seq) + " into " +
              std::to_string(units) + " units, too many to weigh on every re-plan (at most " +
              std::to_string(kMaxBalanceUnits) + "); ringlab plan --layout " + layout_name(kind) + " gives its balance";
      balances.push_back(std::move(b));
      continue;
    }
    try {
      const Plan plan = build_plan(other);
      std::vector<RankWork> work;
      for (int64_t r = 0; r < plan.ranks(); ++r) work.push_back(rank_work(plan, r, expand(plan, r)));
      b.imbalance = flops_balance(work).ratio;
      b.applies = true;
    } catch (const UsageError& error) {
      b.why = error.what();
    }
    balances.push_back(std::move(b));
  }
  return balances;
}

void check_viewer_limits(const Plan& plan) {
  if (plan.ring() > kMaxRing || plan.ranks() > kMaxRanks) {
    throw UsageError("the viewer draws at most " + std::to_string(kMaxRing) + " ring positions and " +
                     std::to_string(kMaxRanks) + " ranks, and this plan has " + std::to_string(plan.ring()) + " and " +
                     std::to_string(plan.ranks()) +
                     "; use fewer ranks P (or algorithm hybrid with a Ulysses degree U), or ringlab run --dry-run "
                     "for its numbers");
  }
  if (plan.layout().units() > kMaxUnits) {
    throw UsageError("the viewer draws at most " + std::to_string(kMaxUnits) + " layout units, and " +
                     plan.layout().to_string() + " cuts S=" + std::to_string(plan.spec().dims.seq) + " into " +
                     std::to_string(plan.layout().units()) +
                     "; use a larger --block or a smaller --seq, or ringlab run --dry-run for its numbers");
  }
}

ScheduleModel model_from_plan(const Plan& plan, const std::string& hardware) {
  return model_from_plan(plan, load_hardware(hardware, plan.spec().dims.dim));
}

}  // namespace ringlab::viz
