// Plan checker: symbolic execution of every rank's ops in the plan walker's order (sim/plan/walk.hpp),
// then the coverage table.
// Sections: [state] [ops] [collectives] [coverage] [driver]
#include "sim/plan/check.hpp"

#include <array>

#include "reference/bytes_text.hpp"
#include "sim/plan/queries.hpp"
#include "sim/plan/walk.hpp"

namespace ringlab {

std::string PlanFinding::describe() const {
  std::string text;
  if (rank >= 0) text += "rank " + std::to_string(rank);
  if (step >= 0) text += (text.empty() ? "step " : ", step ") + std::to_string(step);
  if (!phase.empty()) text += " (" + phase + ")";
  return text.empty() ? message : text + ": " + message;
}

namespace {

// ---- [state] ---------------------------------------------------------------------------------

// A multiset of query blocks, as (count, sum, sum of squares): enough to tell whether a dK/dV
// accumulator holds exactly the contributions it should, in O(1) memory.
struct Contributions {
  int64_t count = 0, sum = 0, squares = 0;
  void add(int64_t q_block) { ++count, sum += q_block + 1, squares += (q_block + 1) * (q_block + 1); }
  void add(const Contributions& other) { count += other.count, sum += other.sum, squares += other.squares; }
  friend bool operator==(const Contributions&, const Contributions&) = default;
};

enum class Content : uint8_t { empty, kv, dkv, pending };

struct SlotState {
  Content content = Content::empty;
  int64_t origin = -1;   // ring position of the block; -2 = every block (gathered)
  Contributions grads;   // dkv: which query blocks' gradients are in it
  bool sending = false;  // a send of this slot is in flight (until its Wait)
};

// What a message carried when it was sent: the sender's slot at the time of its Exchange.
struct MessageContent {
  int64_t origin = -1;
  Contributions grads;
};

struct RankState {
  std::array<SlotState, static_cast<size_t>(Slot::count)> slots;
  std::vector<Contributions> gathered_grads;  // per ring position
  int64_t stored_origin = -1;
  bool finalized = false;
};

class Checker final : public WalkVisitor {
 public:
  explicit Checker(const Plan& p) : plan(p) {}

  PlanCheck run();

 private:
  SlotState& slot(int64_t rank, Slot s) { return ranks[static_cast<size_t>(rank)].slots[static_cast<size_t>(s)]; }

  void report(int64_t rank, const Op& op, const std::string& message) {
    if (result.findings.size() >= 32) return;  // the first findings are the useful ones
    result.findings.push_back({rank, op.step, plan.phases()[static_cast<size_t>(op.phase)].name, message});
  }

  // ---- [ops] ---------------------------------------------------------------------------------

  void visit(const WalkVisit& v) override {
    std::visit([&](const auto& body) { execute(v.at.rank, *v.op, body, v); }, v.op->body);
  }

  void execute(int64_t rank, const Op& op, const ExchangeOp& e, const WalkVisit& v) {
    if (e.send_to >= 0) {
      SlotState& from = slot(rank, e.send_slot);
      const Content expected = e.payload == Payload::kv ? Content::kv : Content::dkv;
      if (from.content != expected) {
        report(rank, op,
               std::string("sends ") + slot_name(e.send_slot) + " which holds no " +
                   (e.payload == Payload::kv ? "K/V" : "dK/dV") + " yet");
      }
      contents.resize(static_cast<size_t>(v.sent->id) + 1);
      contents[static_cast<size_t>(v.sent->id)] = {from.origin, from.grads};
      from.sending = true;
    }
    if (e.recv_from >= 0) {
      SlotState& into = slot(rank, e.recv_slot);
      if (into.sending) {
        report(rank, op, std::string("receives into ") + slot_name(e.recv_slot) + " while it is still being sent");
      }
      into.content = Content::pending;
    }
  }

  void execute(int64_t rank, const Op& op, const WaitOp& w, const WalkVisit& v) {
    if (!v.exchange) {
      report(rank, op,
             "waits for exchange " + std::to_string(w.exchange_id) + " of step " + std::to_string(w.exchange_step) +
                 ", which was never posted");
      return;
    }
    const ExchangeOp& exchange = *v.exchange;
    if (v.received) {
      const WalkMessage& message = *v.received;
      ++result.messages;
      if (message.bytes != exchange.bytes) {
        report(rank, op,
               "receives " + bytes_text_exact(exchange.bytes) + " from rank " + std::to_string(exchange.recv_from) +
                   ", which sends " + bytes_text_exact(message.bytes));
      }
      if (message.payload != exchange.payload)
        report(rank, op, "receives dK/dV where K/V was expected, or the reverse");
      const MessageContent& content = contents[static_cast<size_t>(message.id)];
      SlotState& into = slot(rank, exchange.recv_slot);
      into.content = message.payload == Payload::kv ? Content::kv : Content::dkv;
      into.origin = content.origin;
      into.grads = content.grads;
    }
    if (exchange.send_to >= 0) slot(rank, exchange.send_slot).sending = false;
  }

  void execute(int64_t rank, const Op& op, const LoadKvOp& load, const WalkVisit&) {
    SlotState& into = slot(rank, load.slot);
    if (into.sending || into.content == Content::pending) {
      report(rank, op, std::string("loads its K/V into ") + slot_name(load.slot) + ", which is busy");
    }
    into = {Content::kv, load.block, {}, false};
  }

  void execute(int64_t rank, const Op& op, const ComputeOp& c, const WalkVisit&) { check_compute(rank, op, c); }

  void execute(int64_t rank, const Op& op, const AccumulateOp& a, const WalkVisit&) {
    SlotState& from = slot(rank, a.from);
    SlotState& to = slot(rank, a.to);
    if (to.content != Content::dkv || from.content != Content::dkv) {
      report(rank, op,
             std::string("accumulates ") + slot_name(a.from) + " into " + slot_name(a.to) +
                 " but one of them holds no dK/dV");
    } else if (from.origin != to.origin) {
      report(rank, op,
             "adds dK/dV of block " + std::to_string(from.origin) + " into the accumulator of block " +
                 std::to_string(to.origin));
    }
    to.grads.add(from.grads);
  }

  // Entering and completing are the walker's calls (entered, completed); passing it does nothing.
  void execute(int64_t, const Op&, const CollectiveOp&, const WalkVisit&) {}

  void execute(int64_t rank, const Op&, const FinalizeOp&, const WalkVisit&) {
    ranks[static_cast<size_t>(rank)].finalized = true;
  }

  void execute(int64_t rank, const Op& op, const PrepareBackwardOp&, const WalkVisit&) {
    RankState& state = ranks[static_cast<size_t>(rank)];
    if (!state.finalized) report(rank, op, "starts the backward before the forward is finalized");
    slot(rank, Slot::dkv0) = {Content::dkv, plan.ring_position(rank), {}, false};
    state.gathered_grads.assign(static_cast<size_t>(plan.ring()), {});
  }

  void execute(int64_t rank, const Op& op, const StoreGradsOp& store, const WalkVisit&) {
    const SlotState& from = slot(rank, store.slot);
    const int64_t own = plan.ring_position(rank);
    if (from.content != Content::dkv) {
      report(rank, op, std::string("stores ") + slot_name(store.slot) + " which holds no dK/dV");
    } else if (from.origin != own) {
      report(rank, op,
             "stores the dK/dV of block " + std::to_string(from.origin) + " as its own (block " + std::to_string(own) +
                 ")");
    } else if (!(from.grads == expected_grads(rank))) {
      report(rank, op,
             "its dK/dV holds contributions of " + std::to_string(from.grads.count) + " query blocks, not of the " +
                 std::to_string(expected_grads(rank).count) + " whose queries see it");
    }
    ranks[static_cast<size_t>(rank)].stored_origin = from.origin;
  }

  // The query blocks whose queries see keys of this rank's block: their backward must reach it (a
  // fully masked block computed under --no-skip contributes zeros, and counts on neither side).
  Contributions expected_grads(int64_t rank) {
    Contributions expected;
    const int64_t own = plan.ring_position(rank);
    for (int64_t g = 0; g < plan.ring(); ++g) {
      const ComputeOp c = resolve_compute(plan, plan.rank_at(g, plan.ulysses_index(rank)), own, Pass::backward);
      if (!c.kernels.empty() && c.pairs > 0) expected.add(g);
    }
    return expected;
  }

  void check_compute(int64_t rank, const Op& op, const ComputeOp& c) {
    const SlotState& kv = slot(rank, c.kv_slot);
    if (kv.content == Content::pending) {
      report(rank, op, std::string("computes on ") + slot_name(c.kv_slot) + " before waiting for its receive");
    } else if (kv.content != Content::kv) {
      report(rank, op, std::string("computes on ") + slot_name(c.kv_slot) + ", which holds no K/V");
    } else if (kv.origin != -2 && kv.origin != c.kv_block) {
      report(rank, op,
             "computes with block " + std::to_string(c.kv_block) + " but " + slot_name(c.kv_slot) + " holds block " +
                 std::to_string(kv.origin));
    }
    if (c.pass == Pass::backward) {
      if (c.grad_slot == Slot::gathered_dkv) {
        if (!c.kernels.empty() && c.pairs > 0) ranks[rank].gathered_grads[c.kv_block].add(plan.ring_position(rank));
      } else {
        SlotState& grad = slot(rank, c.grad_slot);
        if (grad.sending) report(rank, op, std::string("writes ") + slot_name(c.grad_slot) + " while it is being sent");
        grad = {Content::dkv, c.kv_block, {}, false};
        if (!c.kernels.empty() && c.pairs > 0) grad.grads.add(plan.ring_position(rank));
      }
    }
    record_coverage(rank, op, c);
  }

  // ---- [collectives] -------------------------------------------------------------------------

  // A rank enters its group's n-th collective: it must be the same one as the others'.
  void entered(const CollectiveEntry& entry) override {
    if (!entry.kind_mismatch) return;
    report(entry.at.rank, *entry.op,
           std::string("enters ") + collective_name(entry.collective->collective) + " while its group is in " +
               collective_name(entry.gathering->kind()));
  }

  // Every member has entered: the collective's effect, as the last one to enter states it.
  void completed(const CollectiveGathering& gathering) override {
    const OpRef last = gathering.entered.back();
    complete_collective(
        std::get<CollectiveOp>(ops[static_cast<size_t>(last.rank)][static_cast<size_t>(last.index)].body));
  }

  void complete_collective(const CollectiveOp& c) {
    if (c.collective == Collective::all_gather_kv) {
      for (int64_t member : c.members) slot(member, Slot::gathered_kv) = {Content::kv, -2, {}, false};
    } else if (c.collective == Collective::reduce_scatter_dkv) {
      for (int64_t member : c.members) {
        Contributions total;
        for (int64_t other : c.members) total.add(ranks[other].gathered_grads[plan.ring_position(member)]);
        slot(member, Slot::dkv0) = {Content::dkv, plan.ring_position(member), total, false};
      }
    }
  }

  // ---- [coverage] ----------------------------------------------------------------------------

  int64_t units = 0;
  bool coverage = false;
  std::array<std::vector<uint8_t>, 2> count;      // [pass] (u, query unit, key unit) -> times computed
  std::array<std::vector<uint8_t>, 2> unmasked;   // computed without a mask at least once
  std::vector<std::vector<int64_t>> block_units;  // per ring position

  void init_coverage() {
    units = plan.layout().units();
    const int64_t entries = plan.ulysses() * units * units;
    coverage = entries <= (int64_t(1) << 26);
    result.coverage_checked = coverage;
    if (!coverage) return;
    for (int pass = 0; pass < 2; ++pass) {
      count[pass].assign(static_cast<size_t>(entries), 0);
      unmasked[pass].assign(static_cast<size_t>(entries), 0);
    }
    for (int64_t g = 0; g < plan.ring(); ++g) block_units.push_back(plan.block_units(g));
  }

  void record_coverage(int64_t rank, const Op& op, const ComputeOp& c) {
    if (!coverage) return;
    const int pass = c.pass == Pass::forward ? 0 : 1;
    const int64_t b = plan.layout().block(), u = plan.ulysses_index(rank);
    const std::vector<int64_t>& q_units = block_units[c.q_block];
    const std::vector<int64_t>& k_units = block_units[c.kv_block];
    if (const std::string problem = erratum_mask_problem(plan, c); !problem.empty()) report(rank, op, problem);
    for (const KernelBlock& k : c.kernels) {
      if (k.q_rows.begin % b || k.q_rows.end % b || k.kv_rows.begin % b || k.kv_rows.end % b) {
        report(rank, op, "a kernel block does not start and end on layout units");
        continue;
      }
      for (int64_t i = k.q_rows.begin / b; i < k.q_rows.end / b; ++i)
        for (int64_t j = k.kv_rows.begin / b; j < k.kv_rows.end / b; ++j) {
          const size_t index = static_cast<size_t>((u * units + q_units[i]) * units + k_units[j]);
          if (count[pass][index] < 255) ++count[pass][index];
          if (k.mask.none()) unmasked[pass][index] = 1;
        }
    }
  }

  // How much of (query unit a) x (key unit c) the mask shows.
  Cover unit_cover(int64_t a, int64_t c) const {
    const Mask& mask = plan.mask();
    if (!plan.spec().masked()) return Cover::all;
    if (!mask.general()) return c < a ? Cover::all : (c == a ? Cover::some : Cover::none);
    const int64_t b = plan.layout().block();
    const int64_t pairs = mask.range_pairs(a * b, a * b + b - 1, c * b, c * b + b - 1);
    return pairs == 0 ? Cover::none : (pairs == b * b ? Cover::all : Cover::some);
  }

  void verify_coverage() {
    if (!coverage) return;
    const bool general = plan.mask().general();
    const char* mask_name = general ? "the mask" : "the causal mask";
    for (int pass = 0; pass < (plan.spec().backward ? 2 : 1); ++pass) {
      const char* name = pass == 0 ? "forward" : "backward";
      int reported = 0;
      for (int64_t u = 0; u < plan.ulysses(); ++u)
        for (int64_t a = 0; a < units; ++a)
          for (int64_t c = 0; c < units; ++c) {
            const size_t index = static_cast<size_t>((u * units + a) * units + c);
            const int n = count[pass][index];
            ++result.pairs_checked;
            std::string problem;
            const Cover cover = unit_cover(a, c);
            const std::string partly = general ? "(partly visible)" : "(a diagonal unit)";
            if (cover == Cover::all) {
              if (n != 1) problem = "is computed " + std::to_string(n) + " times, not once";
            } else if (cover == Cover::some) {
              if (n != 1)
                problem = partly + " is computed " + std::to_string(n) + " times, not once";
              else if (unmasked[pass][index])
                problem = partly + " is computed without " + mask_name;
            } else if (unmasked[pass][index]) {
              problem = std::string(general ? "is entirely masked" : "is entirely in the future") +
                        " but computed without " + mask_name;
            } else if (n > 1) {
              problem = "is entirely masked but computed " + std::to_string(n) + " times";
            }
            if (!problem.empty() && reported++ < 4 && result.findings.size() < 32) {
              result.findings.push_back({-1, -1, name,
                                         "query unit " + std::to_string(a) + " x key unit " + std::to_string(c) +
                                             (plan.ulysses() > 1 ? " of head group " + std::to_string(u) : "") + " " +
                                             problem});
            }
          }
    }
  }

  // ---- [driver] ------------------------------------------------------------------------------

  // The ranks that cannot move, in rank order, interleaved with the ranks that finished
  // without storing their gradients; then the messages nobody took, per (source, destination, tag).
  void report_ends(const WalkResult& walk) {
    auto blocked = walk.blocked.begin();
    for (int64_t r = 0; r < plan.ranks(); ++r) {
      if (blocked != walk.blocked.end() && blocked->at.rank == r) {
        const Op& op = ops[static_cast<size_t>(r)][static_cast<size_t>(blocked->at.index)];
        report(r, op, "never completes: it " + blocked->what() + " (deadlock)");
        ++blocked;
      } else if (plan.spec().backward && ranks[static_cast<size_t>(r)].stored_origin < 0) {
        result.findings.push_back({r, -1, "", "ends without storing its dK/dV"});
      }
    }
    for (size_t i = 0; i < walk.unreceived.size();) {
      const WalkMessage& first = walk.unreceived[i];
      size_t j = i;
      while (j < walk.unreceived.size() && walk.unreceived[j].from() == first.from() &&
             walk.unreceived[j].to == first.to && walk.unreceived[j].tag == first.tag) {
        ++j;
      }
      result.findings.push_back({first.from(), -1, "",
                                 std::to_string(j - i) + " message(s) to rank " + std::to_string(first.to) + " (tag " +
                                     std::to_string(first.tag) + ") are never received"});
      i = j;
    }
  }

  const Plan& plan;
  PlanCheck result;
  std::vector<std::vector<Op>> ops;  // [rank]: expand(plan, rank)
  std::vector<RankState> ranks;
  std::vector<MessageContent> contents;  // [message id]
};

PlanCheck Checker::run() {
  ops = expand_all(plan);
  for (const std::vector<Op>& list : ops) result.ops += static_cast<int64_t>(list.size());
  ranks.resize(static_cast<size_t>(plan.ranks()));
  init_coverage();
  const WalkResult walk = walk_plan(plan, ops, *this);
  report_ends(walk);
  verify_coverage();
  return std::move(result);
}

}  // namespace

PlanCheck check_plan(const Plan& plan) { return Checker(plan).run(); }

}  // namespace ringlab
