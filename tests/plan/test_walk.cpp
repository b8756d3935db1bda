// The plan walker (sim/plan/walk.hpp): over every algorithm, layout and P in {1, 2, 3, 4, 8} its
// order respects every dependency (each Wait after the Exchange that sent its message, each
// collective visited after all members entered, each rank in program order), it is the same on
// every call, and hand-broken op lists — a missing send, a wrong peer, a collective a member skips,
// mismatched collective kinds — end in a description naming each blocked rank, never a hang.
#include <catch2/catch.hpp>
#include <limits>
#include <map>
#include <random>
#include <set>

#include "sim/plan/queries.hpp"
#include "sim/plan/walk.hpp"
#include "tests/plan/plan_cases.hpp"

using namespace ringlab;

namespace {

PlanSpec spec_of(Algorithm algo, LayoutKind layout, int64_t P, bool causal, bool backward) {
  return test::matrix_spec(algo, layout, P, {1, 2 * P * 12, 4 * P, 2 * P, 8}, causal, true, backward);
}

// Records every callback with one sequence number across all of them, so order can be checked.
struct Recorder final : WalkVisitor {
  explicit Recorder(const std::vector<std::vector<Op>>& ops_) : ops(ops_) {
    for (const std::vector<Op>& list : ops) visited_at.emplace_back(list.size(), -1);
  }
  void visit(const WalkVisit& v) override {
    REQUIRE(v.op == &ops[static_cast<size_t>(v.at.rank)][static_cast<size_t>(v.at.index)]);
    CHECK(visited_at[static_cast<size_t>(v.at.rank)][static_cast<size_t>(v.at.index)] == -1);  // once
    visited_at[static_cast<size_t>(v.at.rank)][static_cast<size_t>(v.at.index)] = clock;
    order.push_back(v.at);
    visits.push_back({v.at, clock++, v.received ? *v.received : WalkMessage{}, v.received != nullptr,
                      v.exchange ? v.exchange_index : -1, v.gathering ? v.gathering->id : -1,
                      v.sent ? v.sent->id : -1});
  }
  void matched(const WalkMessage& message, const OpRef& receive) override {
    CHECK(matched_at.count(message.id) == 0);  // once per message
    matched_at[message.id] = clock++;
    matched_receive[message.id] = receive;
    messages[message.id] = message;
  }
  void entered(const CollectiveEntry& entry) override {
    entered_at[{entry.at.rank, entry.at.index}] = clock++;
    gathering_of[{entry.at.rank, entry.at.index}] = entry.gathering->id;
    if (entry.kind_mismatch) mismatched.insert(entry.at.rank);
  }
  void completed(const CollectiveGathering& gathering) override {
    CHECK(completed_at.count(gathering.id) == 0);  // once per gathering
    CHECK(gathering.complete());
    completed_at[gathering.id] = clock++;
    std::set<int64_t> in;
    for (const OpRef& e : gathering.entered) in.insert(e.rank);
    gathering_members[gathering.id] = in;
    gathering_entries[gathering.id] = gathering.entered;
  }

  struct Visit {
    OpRef at;
    int64_t time = 0;
    WalkMessage received;
    bool receives = false;
    int64_t exchange_index = -1;
    int64_t gathering = -1;
    int64_t sent = -1;  // Exchange: its message; Wait: its exchange's
  };
  const std::vector<std::vector<Op>>& ops;
  int64_t clock = 0;
  std::vector<OpRef> order;
  std::vector<Visit> visits;
  std::vector<std::vector<int64_t>> visited_at;  // [rank][index] -> time, -1 = never
  std::map<int64_t, int64_t> matched_at, completed_at;
  std::map<int64_t, OpRef> matched_receive;
  std::map<int64_t, WalkMessage> messages;
  std::map<std::pair<int64_t, int64_t>, int64_t> entered_at, gathering_of;
  std::map<int64_t, std::set<int64_t>> gathering_members;
  std::map<int64_t, std::vector<OpRef>> gathering_entries;
  std::set<int64_t> mismatched;
};

const Op& op_at(const std::vector<std::vector<Op>>& ops, const OpRef& at) {
  return ops[static_cast<size_t>(at.rank)][static_cast<size_t>(at.index)];
}

// Every dependency the walk promises, on a walk that finished; with rendezvous sends, also that a
// Wait comes after its own send met its receive (a dispatcher has enqueued that copy by then).
void check_order(const std::vector<std::vector<Op>>& ops, const Recorder& rec, const WalkResult& result,
                 bool rendezvous = false) {
  REQUIRE(result.finished());
  CHECK(result.unreceived.empty());
  int64_t total = 0;
  for (const std::vector<Op>& list : ops) total += static_cast<int64_t>(list.size());
  CHECK(result.visited == total);
  CHECK(static_cast<int64_t>(rec.order.size()) == total);
  // Program order within each rank.
  std::vector<int64_t> next(ops.size(), 0);
  for (const OpRef& at : rec.order) CHECK(at.index == next[static_cast<size_t>(at.rank)]++);
  int64_t received = 0;
  for (const Recorder::Visit& v : rec.visits) {
    const Op& op = op_at(ops, v.at);
    if (const auto* w = std::get_if<WaitOp>(&op.body)) {
      REQUIRE(v.exchange_index >= 0);  // every Wait of a built plan completes a posted exchange
      const Op& posted = op_at(ops, {v.at.rank, v.exchange_index});
      const auto& e = std::get<ExchangeOp>(posted.body);
      CHECK(posted.phase == op.phase);
      CHECK(e.id == w->exchange_id);
      CHECK(posted.step == w->exchange_step);
      CHECK(rec.visited_at[static_cast<size_t>(v.at.rank)][static_cast<size_t>(v.exchange_index)] < v.time);
      CHECK(v.receives == (e.recv_from >= 0));
      CHECK((v.sent >= 0) == (e.send_to >= 0));
      if (rendezvous && v.sent >= 0) {
        REQUIRE(rec.matched_at.count(v.sent) == 1);
        CHECK(rec.matched_at.at(v.sent) < v.time);
      }
      if (!v.receives) continue;
      ++received;
      // The message came from the peer's matching send, visited (and matched) before this Wait.
      const WalkMessage& m = v.received;
      CHECK(m.from() == e.recv_from);
      CHECK(m.to == v.at.rank);
      CHECK(m.tag == e.tag);
      const Op& sender = op_at(ops, m.sender);
      const auto& sent = std::get<ExchangeOp>(sender.body);
      CHECK(sent.send_to == v.at.rank);
      CHECK(sent.tag == m.tag);
      CHECK(sent.bytes == m.bytes);
      CHECK(sent.payload == m.payload);
      CHECK(sender.phase == m.phase);
      CHECK(sender.step == m.step);
      CHECK(rec.visited_at[static_cast<size_t>(m.from())][static_cast<size_t>(m.sender.index)] < v.time);
      REQUIRE(rec.matched_at.count(m.id) == 1);
      CHECK(rec.matched_at.at(m.id) < v.time);
      CHECK(rec.matched_receive.at(m.id) == (OpRef{v.at.rank, v.exchange_index}));
    } else if (const auto* c = std::get_if<CollectiveOp>(&op.body)) {
      // Visited after every member entered its gathering, and after the gathering completed.
      REQUIRE(v.gathering >= 0);
      CHECK(rec.gathering_of.at({v.at.rank, v.at.index}) == v.gathering);
      CHECK(rec.completed_at.at(v.gathering) < v.time);
      CHECK(rec.gathering_members.at(v.gathering) == std::set<int64_t>(c->members.begin(), c->members.end()));
      for (const OpRef& member : rec.gathering_entries.at(v.gathering)) {
        CHECK(rec.entered_at.at({member.rank, member.index}) < rec.completed_at.at(v.gathering));
        CHECK(std::get<CollectiveOp>(op_at(ops, member).body).collective == c->collective);
      }
    }
  }
  CHECK(result.delivered == received);
  CHECK(static_cast<int64_t>(rec.matched_at.size()) == received);  // every message matched once
  for (const auto& [id, time] : rec.matched_at) {
    const WalkMessage& m = rec.messages.at(id);
    const OpRef receive = rec.matched_receive.at(id);
    CHECK(rec.visited_at[static_cast<size_t>(m.from())][static_cast<size_t>(m.sender.index)] < time);
    CHECK(rec.visited_at[static_cast<size_t>(receive.rank)][static_cast<size_t>(receive.index)] < time);
  }
  CHECK(rec.mismatched.empty());
}

// Index of the first op of `rank` satisfying `pred`, or -1.
template <class Pred>
int64_t first_op(const std::vector<Op>& list, Pred pred) {
  for (size_t i = 0; i < list.size(); ++i)
    if (pred(list[i])) return static_cast<int64_t>(i);
  return -1;
}

// The first exchange of a rank's list that sends, and its first collective (-1 when none).
int64_t first_send(const std::vector<Op>& list) {
  return first_op(list, [](const Op& op) {
    const auto* e = std::get_if<ExchangeOp>(&op.body);
    return e && e->send_to >= 0;
  });
}

int64_t first_collective(const std::vector<Op>& list) {
  return first_op(list, [](const Op& op) { return std::holds_alternative<CollectiveOp>(op.body); });
}

// The fault tests' sweep of causal plans: the given algorithms, every layout that cuts S into
// chunks, P in {2, 3, 4, 8}, forward and backward.
struct FaultCase {
  Algorithm algo;
  LayoutKind layout;
  int64_t P;
  bool backward;
  Plan plan() const { return build_plan(spec_of(algo, layout, P, true, backward)); }
};

std::vector<FaultCase> fault_cases(std::initializer_list<Algorithm> algorithms) {
  std::vector<FaultCase> cases;
  for (Algorithm algo : algorithms)
    for (LayoutKind layout : {LayoutKind::contiguous, LayoutKind::zigzag, LayoutKind::striped})
      for (int64_t P : {2, 3, 4, 8})
        for (bool backward : {false, true}) cases.push_back({algo, layout, P, backward});
  return cases;
}

const BlockedRank* blocked_rank(const WalkResult& result, int64_t rank) {
  for (const BlockedRank& b : result.blocked)
    if (b.at.rank == rank) return &b;
  return nullptr;
}

// Walks op lists broken so that `victim` waits forever for a message from `culprit`: the walk must
// stop with victim blocked on that message. The walk's result and victim's record.
std::pair<WalkResult, BlockedRank> walk_blocked_on_message(const Plan& plan, const std::vector<std::vector<Op>>& ops,
                                                           int64_t victim, int64_t culprit) {
  Recorder rec(ops);
  WalkResult result = walk_plan(plan, ops, rec);
  REQUIRE_FALSE(result.finished());
  const BlockedRank* b = blocked_rank(result, victim);
  REQUIRE(b != nullptr);
  CHECK(b->waits == BlockedRank::Waits::message);
  CHECK(b->peer == culprit);
  const BlockedRank blocked = *b;
  return {std::move(result), blocked};
}

}  // namespace

TEST_CASE("walk order respects every dependency, the same on every call", "[plans][walk]") {
  const test::MatrixCase c = GENERATE(from_range(test::matrix_cases()));
  const Plan plan = build_plan(spec_of(c.algo, c.layout, c.ranks, c.causal, c.backward));
  INFO(plan.spec().describe());
  const std::vector<std::vector<Op>> ops = expand_all(plan);
  Recorder first(ops);
  check_order(ops, first, walk_plan(plan, ops, first));
  // Round robin from rank 0: rank 0 runs until it must wait, then rank 1 starts (a schedule that
  // opens with a collective makes rank 0 wait at once, with no visit).
  if (!std::holds_alternative<CollectiveOp>(ops[0][0].body)) {
    size_t lead = 0;
    while (lead < first.order.size() && first.order[lead].rank == 0) ++lead;
    CHECK(lead > 0);
    if (lead < ops[0].size()) CHECK(first.order[lead] == (OpRef{1, 0}));
  }
  Recorder again(ops);
  (void)walk_plan(plan, ops, again);
  CHECK(again.order == first.order);
  // Rendezvous sends (a dispatcher that enqueues copies) finish too, in an order that still holds.
  Recorder rendezvous(ops);
  check_order(ops, rendezvous, walk_plan(plan, ops, rendezvous, WalkOptions{true}), true);
}

TEST_CASE("a missing send: the receiver waits for the sender, which never sends it", "[plans][walk]") {
  const FaultCase c = GENERATE(from_range(fault_cases({Algorithm::ring, Algorithm::hybrid})));
  const Plan plan = c.plan();
  std::vector<std::vector<Op>> ops = expand_all(plan);
  const int64_t culprit = GENERATE_COPY(range<int64_t>(0, c.P));
  INFO(plan.spec().describe() << ", rank " << culprit << " drops its first send");
  const int64_t index = first_send(ops[static_cast<size_t>(culprit)]);
  if (index < 0) return;  // hybrid with U = P: no ring exchange
  auto& e = std::get<ExchangeOp>(ops[static_cast<size_t>(culprit)][static_cast<size_t>(index)].body);
  const int64_t victim = e.send_to;
  const int tag = e.tag;
  e.send_to = -1;
  const auto [result, victim_blocked] = walk_blocked_on_message(plan, ops, victim, culprit);
  const BlockedRank* b = &victim_blocked;
  CHECK(b->tag == tag);
  CHECK(std::holds_alternative<WaitOp>(op_at(ops, b->at).body));
  const Op& stopped = op_at(ops, b->at);
  const std::string text = describe_deadlock(plan, result);
  INFO(text);
  CHECK(text.find("rank " + std::to_string(victim) + ", step " + std::to_string(stopped.step) + " (" +
                  plan.phases()[static_cast<size_t>(stopped.phase)].name + "): waits for rank " +
                  std::to_string(culprit) + " (tag " + std::to_string(tag) + "), which never sends it") !=
        std::string::npos);
  // One line per blocked rank, each naming it.
  CHECK(static_cast<size_t>(std::count(text.begin(), text.end(), '\n')) == result.blocked.size());
  for (const BlockedRank& blocked : result.blocked)
    CHECK(text.find("rank " + std::to_string(blocked.at.rank) + ", step") != std::string::npos);
}

TEST_CASE("a wrong peer: the intended receiver is blocked, the message goes unreceived", "[plans][walk]") {
  const LayoutKind layout = GENERATE(LayoutKind::contiguous, LayoutKind::zigzag, LayoutKind::striped);
  const int64_t P = GENERATE(3, 4, 8);
  const Plan plan = build_plan(spec_of(Algorithm::ring, layout, P, true, true));
  std::vector<std::vector<Op>> ops = expand_all(plan);
  const int64_t culprit = GENERATE_COPY(range<int64_t>(0, P));
  INFO(plan.spec().describe() << ", rank " << culprit);
  const int64_t index = first_send(ops[static_cast<size_t>(culprit)]);
  REQUIRE(index >= 0);
  auto& e = std::get<ExchangeOp>(ops[static_cast<size_t>(culprit)][static_cast<size_t>(index)].body);
  const int64_t victim = e.send_to, wrong = (e.send_to + 1) % P;
  e.send_to = wrong;
  const WalkResult result = walk_blocked_on_message(plan, ops, victim, culprit).first;
  bool stray = false;
  for (const WalkMessage& m : result.unreceived) stray |= m.from() == culprit && m.to == wrong && m.tag == e.tag;
  CHECK(stray);
  CHECK(std::is_sorted(result.unreceived.begin(), result.unreceived.end(),
                       [](const WalkMessage& a, const WalkMessage& c) {
                         return std::tuple(a.from(), a.to, a.tag, a.id) < std::tuple(c.from(), c.to, c.tag, c.id);
                       }));
}

TEST_CASE("a collective a member never enters: the others wait for it, naming it", "[plans][walk]") {
  const FaultCase c = GENERATE(from_range(fault_cases({Algorithm::allgather, Algorithm::ulysses, Algorithm::hybrid})));
  const Plan plan = c.plan();
  std::vector<std::vector<Op>> ops = expand_all(plan);
  const int64_t culprit = GENERATE_COPY(range<int64_t>(0, c.P));
  INFO(plan.spec().describe() << ", rank " << culprit << " skips its first collective");
  std::vector<Op>& list = ops[static_cast<size_t>(culprit)];
  const int64_t index = first_collective(list);
  if (index < 0) return;  // hybrid with U = 1: no collective
  const CollectiveOp skipped = std::get<CollectiveOp>(list[static_cast<size_t>(index)].body);
  if (skipped.members.size() < 2) return;  // a group of one waits for nobody
  list.erase(list.begin() + index);
  Recorder rec(ops);
  const WalkResult result = walk_plan(plan, ops, rec);
  const std::string text = describe_deadlock(plan, result);
  INFO(text);
  REQUIRE_FALSE(result.finished());
  bool named = false;
  for (const BlockedRank& b : result.blocked) {
    if (b.waits != BlockedRank::Waits::collective) continue;
    CHECK(std::holds_alternative<CollectiveOp>(op_at(ops, b.at).body));
    CHECK(std::find(skipped.members.begin(), skipped.members.end(), b.at.rank) != skipped.members.end());
    named |= std::find(b.missing.begin(), b.missing.end(), culprit) != b.missing.end();
    CHECK(b.what().find("for ranks that never arrive") != std::string::npos);
  }
  CHECK(named);
  CHECK(text.find("missing:") != std::string::npos);
}

TEST_CASE("mismatched collective kinds are reported on entry, and the walk goes on", "[plans][walk]") {
  const Algorithm algo = GENERATE(Algorithm::allgather, Algorithm::ulysses, Algorithm::hybrid);
  const int64_t P = GENERATE(2, 4, 8);
  const Plan plan = build_plan(spec_of(algo, LayoutKind::zigzag, P, true, true));
  std::vector<std::vector<Op>> ops = expand_all(plan);
  const int64_t culprit = GENERATE_COPY(range<int64_t>(0, P));
  INFO(plan.spec().describe() << ", rank " << culprit);
  std::vector<Op>& list = ops[static_cast<size_t>(culprit)];
  const int64_t index = first_collective(list);
  REQUIRE(index >= 0);
  auto& c = std::get<CollectiveOp>(list[static_cast<size_t>(index)].body);
  if (c.members.size() < 2) return;
  // Another collective of the same family, so the same group's gathering takes it.
  c.collective = c.collective == Collective::all_gather_kv    ? Collective::reduce_scatter_dkv
                 : c.collective == Collective::all_to_all_qkv ? Collective::all_to_all_out
                                                              : Collective::all_to_all_qkv;
  Recorder rec(ops);
  const WalkResult result = walk_plan(plan, ops, rec);
  CHECK(result.finished());  // the gathering still completes: everyone entered
  const int64_t gathering = rec.gathering_of.at({culprit, index});
  const int64_t first = rec.gathering_entries.at(gathering).front().rank;
  std::set<int64_t> expected;
  if (first == culprit) {
    for (int64_t m : c.members)
      if (m != culprit) expected.insert(m);
  } else {
    expected.insert(culprit);
  }
  CHECK(rec.mismatched == expected);
}

TEST_CASE("rendezvous sends: a receive that is never posted blocks the sender's wait", "[plans][walk]") {
  const int64_t P = GENERATE(2, 3, 4);
  const Plan plan = build_plan(spec_of(Algorithm::ring, LayoutKind::zigzag, P, true, false));
  std::vector<std::vector<Op>> ops = expand_all(plan);
  const int64_t index = first_op(ops[1], [](const Op& op) {
    const auto* e = std::get_if<ExchangeOp>(&op.body);
    return e && e->recv_from >= 0;
  });
  REQUIRE(index >= 0);
  auto& e = std::get<ExchangeOp>(ops[1][static_cast<size_t>(index)].body);
  const int64_t sender = e.recv_from;
  e.recv_from = -1;
  Recorder eager(ops);
  const WalkResult buffered = walk_plan(plan, ops, eager);
  CHECK(buffered.finished());  // the message sits in a buffer nobody takes
  REQUIRE(buffered.unreceived.size() == 1);
  CHECK(buffered.unreceived[0].from() == sender);
  CHECK(buffered.unreceived[0].to == 1);
  Recorder strict(ops);
  const WalkResult rendezvous = walk_plan(plan, ops, strict, WalkOptions{true});
  REQUIRE_FALSE(rendezvous.finished());
  const BlockedRank* b = blocked_rank(rendezvous, sender);
  REQUIRE(b != nullptr);
  CHECK(b->waits == BlockedRank::Waits::receiver);
  CHECK(b->peer == 1);
  CHECK(b->what().find("to post the receive") != std::string::npos);
}

TEST_CASE("randomly broken op lists always end, every rank finished or described", "[plans][walk]") {
  std::mt19937_64 rng(11);
  const Algorithm algos[] = {Algorithm::ring, Algorithm::allgather, Algorithm::ulysses, Algorithm::hybrid};
  int blocked_runs = 0;
  for (int trial = 0; trial < 200; ++trial) {
    const int64_t P = std::uniform_int_distribution<int64_t>(1, 6)(rng);
    const Plan plan = build_plan(spec_of(algos[trial % 4], LayoutKind::zigzag, P, trial % 3 != 0, trial % 2 == 0));
    std::vector<std::vector<Op>> ops = expand_all(plan);
    for (int edit = 0; edit < 3; ++edit) {
      std::vector<Op>& list = ops[std::uniform_int_distribution<size_t>(0, ops.size() - 1)(rng)];
      if (list.size() < 2) continue;
      const size_t i = std::uniform_int_distribution<size_t>(0, list.size() - 2)(rng);
      switch (std::uniform_int_distribution<int>(0, 2)(rng)) {
        case 0: list.erase(list.begin() + static_cast<std::ptrdiff_t>(i)); break;
        case 1: list.insert(list.begin() + static_cast<std::ptrdiff_t>(i), list[i]); break;
        default: std::swap(list[i], list[i + 1]); break;
      }
    }
    Recorder rec(ops);
    const WalkResult result = walk_plan(plan, ops, rec);
    INFO("trial " << trial << ": " << plan.spec().describe() << "\n" << describe_deadlock(plan, result));
    int64_t stuck = 0;
    for (size_t r = 0; r < ops.size(); ++r) {
      const int64_t done = static_cast<int64_t>(
          std::count_if(rec.visited_at[r].begin(), rec.visited_at[r].end(), [](int64_t t) { return t >= 0; }));
      const BlockedRank* b = blocked_rank(result, static_cast<int64_t>(r));
      if (done == static_cast<int64_t>(ops[r].size())) {
        CHECK(b == nullptr);
      } else {
        REQUIRE(b != nullptr);
        CHECK(b->at.index == done);  // it stopped at its first op not run
        CHECK_FALSE(b->what().empty());
        ++stuck;
      }
    }
    CHECK(static_cast<int64_t>(result.blocked.size()) == stuck);
    blocked_runs += stuck > 0;
  }
  CHECK(blocked_runs > 0);  // the edits do break some plans
}

TEST_CASE("walk_plan refuses op lists that are not one per rank", "[plans][walk]") {
  const Plan plan = build_plan(spec_of(Algorithm::ring, LayoutKind::contiguous, 4, false, false));
  std::vector<std::vector<Op>> ops = expand_all(plan);
  ops.pop_back();
  Recorder rec(ops);
  CHECK_THROWS_AS(walk_plan(plan, ops, rec), std::invalid_argument);
}

// Tags match each receive to its send, so they must be distinct for every (phase, exchange, step),
// and 2 tag + 1 must fit an int (the simulator's V message). A factor of 10^6 per exchange would let
// exchange 0's step 10^6 take exchange 1's step 0: past its bounds the tag is refused, not wrapped.
TEST_CASE("exchange tags are distinct across phases, exchanges and steps, and refused past their bounds",
          "[plans][walk]") {
  std::set<int> seen;
  for (int64_t phase : {0, 1, 2, 255}) {
    for (int id = 0; id < 4; ++id) {
      for (int64_t step : {int64_t{0}, int64_t{1}, int64_t{999999}}) {
        const int tag = exchange_tag(phase, id, step);
        CHECK(tag >= 0);
        CHECK(tag <= (std::numeric_limits<int>::max() - 1) / 2);
        CHECK(exchange_of_tag(tag) == phase * 4 + id);
        CHECK(seen.insert(tag).second);
      }
    }
  }
  CHECK_THROWS_AS(exchange_tag(0, 0, 1000000), std::logic_error);
  CHECK_THROWS_AS(exchange_tag(0, 4, 0), std::logic_error);
  CHECK_THROWS_AS(exchange_tag(256, 0, 0), std::logic_error);
  CHECK_THROWS_AS(exchange_tag(0, 0, -1), std::logic_error);
  // The ops of a plan carry exactly these tags (the dry executor's trace computes them alike).
  const Plan plan = build_plan(spec_of(Algorithm::ring, LayoutKind::zigzag, 3, true, true));
  int exchanges = 0;
  for (const Op& op : expand(plan, 1)) {
    if (const auto* e = std::get_if<ExchangeOp>(&op.body)) {
      CHECK(e->tag == exchange_tag(op.phase, e->id, op.step));
      ++exchanges;
    }
  }
  CHECK(exchanges > 0);
}
