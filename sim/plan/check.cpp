// Plan checker: symbolic execution of every rank's ops, then the coverage table.
// Sections: [state] [ops] [collectives] [coverage] [driver]
#include "sim/plan/check.hpp"

#include <algorithm>
#include <array>
#include <deque>
#include <map>
#include <tuple>

#include "sim/plan/queries.hpp"

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
  int64_t origin = -1;  // ring position of the block; -2 = every block (gathered)
  Contributions grads;  // dkv: which query blocks' gradients are in it
  bool sending = false;  // a send of this slot is in flight (until its Wait)
};

struct Message {
  Payload payload;
  int64_t origin;
  int64_t bytes;
  Contributions grads;
};

struct PendingExchange {
  ExchangeOp op;
};

struct RankState {
  std::vector<Op> ops;
  size_t pc = 0;
  std::array<SlotState, static_cast<size_t>(Slot::count)> slots;
  std::map<std::tuple<int, int, int64_t>, PendingExchange> pending;  // (phase, exchange id, step)
  std::vector<Contributions> gathered_grads;                   // per ring position
  int64_t collectives_done = 0;
  bool at_collective = false;  // arrived at the current collective, waiting for the group
  int64_t stored_origin = -1;
  bool finalized = false;
  bool done() const { return pc >= ops.size(); }
};

struct Checker {
  const Plan& plan;
  PlanCheck result;
  std::vector<RankState> ranks;
  std::map<std::tuple<int64_t, int64_t, int>, std::deque<Message>> queues;  // (src, dst, tag)
  // Collective arrivals: (occurrence, family group key) -> members arrived, and the kind seen.
  std::map<std::pair<int64_t, int64_t>, std::pair<int64_t, Collective>> arrivals;

  explicit Checker(const Plan& p) : plan(p) {}

  SlotState& slot(int64_t rank, Slot s) { return ranks[rank].slots[static_cast<size_t>(s)]; }

  void report(int64_t rank, const Op& op, const std::string& message) {
    if (result.findings.size() >= 32) return;  // the first findings are the useful ones
    result.findings.push_back({rank, op.step, plan.phases()[op.phase].name, message});
  }

  // ---- [ops] ---------------------------------------------------------------------------------

  // Executes the op at the rank's pc; returns false when it must wait for another rank.
  bool execute(int64_t rank, const Op& op) {
    RankState& state = ranks[rank];
    return std::visit(
        [&](const auto& body) -> bool {
          using T = std::decay_t<decltype(body)>;
          if constexpr (std::is_same_v<T, ExchangeOp>) {
            if (body.send_to >= 0) {
              SlotState& from = slot(rank, body.send_slot);
              const Content expected = body.payload == Payload::kv ? Content::kv : Content::dkv;
              if (from.content != expected) {
                report(rank, op, std::string("sends ") + slot_name(body.send_slot) + " which holds no " +
                                     (body.payload == Payload::kv ? "K/V" : "dK/dV") + " yet");
              }
              queues[{rank, body.send_to, body.tag}].push_back({body.payload, from.origin, body.bytes, from.grads});
              from.sending = true;
            }
            if (body.recv_from >= 0) {
              SlotState& into = slot(rank, body.recv_slot);
              if (into.sending) {
                report(rank, op, std::string("receives into ") + slot_name(body.recv_slot) + " while it is still being sent");
              }
              into.content = Content::pending;
            }
            state.pending[{op.phase, body.id, op.step}] = {body};
            return true;
          } else if constexpr (std::is_same_v<T, WaitOp>) {
            auto found = state.pending.find({op.phase, body.exchange_id, body.exchange_step});
            if (found == state.pending.end()) {
              report(rank, op, "waits for exchange " + std::to_string(body.exchange_id) + " of step " +
                                   std::to_string(body.exchange_step) + ", which was never posted");
              return true;
            }
            const ExchangeOp& exchange = found->second.op;
            if (exchange.recv_from >= 0) {
              auto queue = queues.find({exchange.recv_from, rank, exchange.tag});
              if (queue == queues.end() || queue->second.empty()) return false;  // not sent yet
              const Message message = queue->second.front();
              queue->second.pop_front();
              ++result.messages;
              if (message.bytes != exchange.bytes) {
                report(rank, op, "receives " + std::to_string(exchange.bytes) + " bytes from rank " +
                                     std::to_string(exchange.recv_from) + ", which sends " +
                                     std::to_string(message.bytes));
              }
              if (message.payload != exchange.payload) report(rank, op, "receives dK/dV where K/V was expected, or the reverse");
              SlotState& into = slot(rank, exchange.recv_slot);
              into.content = message.payload == Payload::kv ? Content::kv : Content::dkv;
              into.origin = message.origin;
              into.grads = message.grads;
            }
            if (exchange.send_to >= 0) slot(rank, exchange.send_slot).sending = false;
            state.pending.erase(found);
            return true;
          } else if constexpr (std::is_same_v<T, LoadKvOp>) {
            SlotState& into = slot(rank, body.slot);
            if (into.sending || into.content == Content::pending) {
              report(rank, op, std::string("loads its K/V into ") + slot_name(body.slot) + ", which is busy");
            }
            into = {Content::kv, body.block, {}, false};
            return true;
          } else if constexpr (std::is_same_v<T, ComputeOp>) {
            check_compute(rank, op, body);
            return true;
          } else if constexpr (std::is_same_v<T, AccumulateOp>) {
            SlotState& from = slot(rank, body.from);
            SlotState& to = slot(rank, body.to);
            if (to.content != Content::dkv || from.content != Content::dkv) {
              report(rank, op, std::string("accumulates ") + slot_name(body.from) + " into " + slot_name(body.to) +
                                   " but one of them holds no dK/dV");
            } else if (from.origin != to.origin) {
              report(rank, op, "adds dK/dV of block " + std::to_string(from.origin) + " into the accumulator of block " +
                                   std::to_string(to.origin));
            }
            to.grads.add(from.grads);
            return true;
          } else if constexpr (std::is_same_v<T, CollectiveOp>) {
            return collective(rank, op, body);
          } else if constexpr (std::is_same_v<T, FinalizeOp>) {
            state.finalized = true;
            return true;
          } else if constexpr (std::is_same_v<T, PrepareBackwardOp>) {
            if (!state.finalized) report(rank, op, "starts the backward before the forward is finalized");
            slot(rank, Slot::dkv0) = {Content::dkv, plan.ring_position(rank), {}, false};
            state.gathered_grads.assign(static_cast<size_t>(plan.ring()), {});
            return true;
          } else if constexpr (std::is_same_v<T, StoreGradsOp>) {
            const SlotState& from = slot(rank, body.slot);
            const int64_t own = plan.ring_position(rank);
            if (from.content != Content::dkv) {
              report(rank, op, std::string("stores ") + slot_name(body.slot) + " which holds no dK/dV");
            } else if (from.origin != own) {
              report(rank, op, "stores the dK/dV of block " + std::to_string(from.origin) + " as its own (block " +
                                   std::to_string(own) + ")");
            } else if (!(from.grads == expected_grads(rank))) {
              report(rank, op, "its dK/dV holds contributions of " + std::to_string(from.grads.count) +
                                   " query blocks, not of the " + std::to_string(expected_grads(rank).count) +
                                   " whose queries see it");
            }
            state.stored_origin = from.origin;
            return true;
          }
          return true;
        },
        op.body);
  }

  // The query blocks whose backward touches this rank's block.
  Contributions expected_grads(int64_t rank) {
    Contributions expected;
    const int64_t own = plan.ring_position(rank);
    for (int64_t g = 0; g < plan.ring(); ++g) {
      const ComputeOp c = resolve_compute(plan, plan.rank_at(g, plan.ulysses_index(rank)), own, Pass::backward);
      if (!c.kernels.empty()) expected.add(g);
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
      report(rank, op, "computes with block " + std::to_string(c.kv_block) + " but " + slot_name(c.kv_slot) +
                           " holds block " + std::to_string(kv.origin));
    }
    if (c.pass == Pass::backward) {
      if (c.grad_slot == Slot::gathered_dkv) {
        if (!c.kernels.empty()) ranks[rank].gathered_grads[c.kv_block].add(plan.ring_position(rank));
      } else {
        SlotState& grad = slot(rank, c.grad_slot);
        if (grad.sending) report(rank, op, std::string("writes ") + slot_name(c.grad_slot) + " while it is being sent");
        grad = {Content::dkv, c.kv_block, {}, false};
        if (!c.kernels.empty()) grad.grads.add(plan.ring_position(rank));
      }
    }
    record_coverage(rank, op, c);
  }

  // ---- [collectives] -------------------------------------------------------------------------

  bool collective(int64_t rank, const Op& op, const CollectiveOp& c) {
    RankState& state = ranks[rank];
    const bool ulysses = is_ulysses_collective(c.collective);
    // The n-th collective of a group: every member must enter the same one.
    const std::pair<int64_t, int64_t> key{state.collectives_done, (ulysses ? 0 : 1) + 2 * c.group};
    auto& [arrived, kind] = arrivals[key];
    if (!state.at_collective) {
      state.at_collective = true;
      if (arrived == 0) kind = c.collective;
      if (kind != c.collective) {
        report(rank, op, std::string("enters ") + collective_name(c.collective) + " while its group is in " +
                             collective_name(kind));
      }
      ++arrived;
      if (arrived == static_cast<int64_t>(c.members.size())) complete_collective(c);
    }
    if (arrived < static_cast<int64_t>(c.members.size())) return false;
    state.at_collective = false;
    ++state.collectives_done;
    return true;
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
    for (const KernelBlock& k : c.kernels) {
      if (k.q_rows.begin % b || k.q_rows.end % b || k.kv_rows.begin % b || k.kv_rows.end % b) {
        report(rank, op, "a kernel block does not start and end on layout units");
        continue;
      }
      if (k.erratum_local_query_index) {
        // Masking by local query index equals masking by position only where the block's
        // queries sit at positions 0..n-1.
        const std::vector<int64_t> positions = plan.block_positions(c.q_block);
        bool same = true;
        for (size_t i = 0; i < positions.size() && same; ++i) same = positions[i] == static_cast<int64_t>(i);
        if (!same) report(rank, op, "masks by the query's index within its block, not its position (erratum kv-offset-mask)");
      }
      for (int64_t i = k.q_rows.begin / b; i < k.q_rows.end / b; ++i)
        for (int64_t j = k.kv_rows.begin / b; j < k.kv_rows.end / b; ++j) {
          const size_t index = static_cast<size_t>((u * units + q_units[i]) * units + k_units[j]);
          if (count[pass][index] < 255) ++count[pass][index];
          if (k.mask == MaskKind::none) unmasked[pass][index] = 1;
        }
    }
  }

  void verify_coverage() {
    if (!coverage) return;
    const bool causal = plan.spec().causal;
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
            if (!causal || c < a) {
              if (n != 1) problem = "is computed " + std::to_string(n) + " times, not once";
            } else if (c == a) {
              if (n != 1) problem = "(a diagonal unit) is computed " + std::to_string(n) + " times, not once";
              else if (unmasked[pass][index]) problem = "(a diagonal unit) is computed without the causal mask";
            } else if (unmasked[pass][index]) {
              problem = "is entirely in the future but computed without the causal mask";
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

  void run() {
    ranks.resize(static_cast<size_t>(plan.ranks()));
    for (int64_t r = 0; r < plan.ranks(); ++r) {
      ranks[r].ops = expand(plan, r);
      result.ops += static_cast<int64_t>(ranks[r].ops.size());
    }
    init_coverage();
    bool progress = true;
    while (progress) {
      progress = false;
      for (int64_t r = 0; r < plan.ranks(); ++r) {
        RankState& state = ranks[r];
        while (!state.done() && execute(r, state.ops[state.pc])) {
          ++state.pc;
          progress = true;
        }
      }
    }
    for (int64_t r = 0; r < plan.ranks(); ++r) {
      const RankState& state = ranks[r];
      if (!state.done()) {
        const Op& op = state.ops[state.pc];
        std::string what = "never completes: it waits";
        if (const auto* wait = std::get_if<WaitOp>(&op.body)) {
          const auto found = state.pending.find({op.phase, wait->exchange_id, wait->exchange_step});
          if (found != state.pending.end()) {
            what += " for rank " + std::to_string(found->second.op.recv_from) + " (tag " +
                    std::to_string(found->second.op.tag) + "), which never sends it";
          }
        } else if (const auto* c = std::get_if<CollectiveOp>(&op.body)) {
          what += std::string(" in ") + collective_name(c->collective) + " for ranks that never arrive";
        }
        report(r, op, what + " (deadlock)");
      } else if (plan.spec().backward && state.stored_origin < 0) {
        result.findings.push_back({r, -1, "", "ends without storing its dK/dV"});
      }
    }
    for (const auto& [key, queue] : queues) {
      if (!queue.empty()) {
        result.findings.push_back({std::get<0>(key), -1, "",
                                   std::to_string(queue.size()) + " message(s) to rank " +
                                       std::to_string(std::get<1>(key)) + " (tag " + std::to_string(std::get<2>(key)) +
                                       ") are never received"});
      }
    }
    verify_coverage();
  }
};

}  // namespace

PlanCheck check_plan(const Plan& plan) {
  Checker checker(plan);
  checker.run();
  return checker.result;
}

}  // namespace ringlab
