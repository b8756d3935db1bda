// The plan walker: round robin over the ranks' op lists, matching messages and gathering
// collectives, until no rank can move.
// Sections: [descriptions] [state] [ops] [driver]
#include "sim/plan/walk.hpp"

#include <algorithm>
#include <array>
#include <deque>
#include <map>
#include <stdexcept>
#include <tuple>

#include "sim/plan/queries.hpp"

namespace ringlab {

// ---- [descriptions] --------------------------------------------------------------------------

std::vector<int64_t> CollectiveGathering::missing() const {
  std::vector<int64_t> absent;
  if (!op) return absent;
  for (int64_t member : op->members) {
    const bool in = std::any_of(entered.begin(), entered.end(), [&](const OpRef& e) { return e.rank == member; });
    if (!in) absent.push_back(member);
  }
  std::sort(absent.begin(), absent.end());
  return absent;
}

std::string BlockedRank::what() const {
  switch (waits) {
    case Waits::message:
      return "waits for rank " + std::to_string(peer) + " (tag " + std::to_string(tag) + "), which never sends it";
    case Waits::receiver:
      return "waits for rank " + std::to_string(peer) + " to post the receive of its message (tag " +
             std::to_string(tag) + "), which it never does";
    case Waits::collective:
      return std::string("waits in ") + collective_name(collective) + " for ranks that never arrive";
  }
  return "waits";
}

std::string describe_deadlock(const Plan& plan, const WalkResult& result) {
  std::string text;
  for (const BlockedRank& b : result.blocked) {
    const size_t phase = static_cast<size_t>(b.phase);
    text += "rank " + std::to_string(b.at.rank) + ", step " + std::to_string(b.step) + " (" +
            (phase < plan.phases().size() ? plan.phases()[phase].name : std::string("?")) + "): " + b.what();
    if (b.waits == BlockedRank::Waits::collective && !b.missing.empty()) {
      text += " (missing:";
      for (int64_t m : b.missing) text += " " + std::to_string(m);
      text += ")";
    }
    text += "\n";
  }
  return text;
}

std::vector<std::vector<Op>> expand_all(const Plan& plan) {
  std::vector<std::vector<Op>> ops(static_cast<size_t>(plan.ranks()));
  for (int64_t r = 0; r < plan.ranks(); ++r) ops[static_cast<size_t>(r)] = expand(plan, r);
  return ops;
}

namespace {

// ---- [state] ---------------------------------------------------------------------------------

// An Exchange a rank posted, until its Wait takes it.
struct Posted {
  int64_t rank = 0;
  int phase = 0;
  int id = 0;
  int64_t step = 0;
  int64_t index = 0;  // of the Exchange in the rank's list
  const ExchangeOp* op = nullptr;
  int64_t send = -1;     // its message
  int64_t receive = -1;  // the message its receive matched; -1 = none yet
};

struct MessageState {
  WalkMessage message;
  int64_t receiver = -1;  // the Posted whose receive matched it; -1 = none yet
  bool delivered = false;
};

struct Cursor {
  size_t pc = 0;
  bool entered = false;                  // entered the gathering of the op at pc
  int64_t gathering = -1;                // that gathering
  std::array<int64_t, 2> occurrences{};  // collectives entered, per family
  std::vector<size_t> pending;           // Posted indices, in order of posting
  std::vector<size_t> open_receives;     // Posted indices whose receive no send matched yet
  std::vector<int64_t> open_sends;       // messages to this rank no receive matched yet
};

class Walk {
 public:
  Walk(std::span<const std::vector<Op>> ops, WalkVisitor& visitor, const WalkOptions& options)
      : ops_(ops), visitor_(visitor), options_(options), cursors_(ops.size()) {
    // Exact sizes, so that the pointers handed to the visitor stay valid for the whole walk.
    size_t exchanges = 0, sends = 0;
    for (const std::vector<Op>& list : ops)
      for (const Op& op : list)
        if (const auto* e = std::get_if<ExchangeOp>(&op.body)) ++exchanges, sends += e->send_to >= 0 ? 1 : 0;
    posted_.reserve(exchanges);
    messages_.reserve(sends);
  }

  WalkResult run();

 private:
  bool step(int64_t rank);  // runs the op at the rank's pc; false when it must wait
  bool exchange(int64_t rank, const Op& op, const ExchangeOp& e);
  bool wait(int64_t rank, const Op& op, const WaitOp& w);
  bool collective(int64_t rank, const Op& op, const CollectiveOp& c);
  void post_send(int64_t rank, const Op& op, const ExchangeOp& e, size_t posted);
  void post_receive(int64_t rank, const ExchangeOp& e, size_t posted);
  void match(int64_t message, size_t posted);
  std::vector<size_t>::iterator find_pending(Cursor& cursor, int phase, int id, int64_t step);
  BlockedRank blocked_at(int64_t rank) const;

  std::span<const std::vector<Op>> ops_;
  WalkVisitor& visitor_;
  WalkOptions options_;
  std::vector<Cursor> cursors_;
  std::vector<Posted> posted_;
  std::vector<MessageState> messages_;
  std::deque<CollectiveGathering> gatherings_;                         // a deque: entries never move
  std::map<std::tuple<int, int64_t, int64_t>, int64_t> gathering_of_;  // (family, group, n) -> id
  std::vector<std::pair<int64_t, size_t>> just_matched_;               // (message, Posted) matched by the op being run
  WalkResult result_;
};

// ---- [ops] -----------------------------------------------------------------------------------

bool Walk::step(int64_t rank) {
  const Op& op = ops_[static_cast<size_t>(rank)][cursors_[static_cast<size_t>(rank)].pc];
  if (const auto* e = std::get_if<ExchangeOp>(&op.body)) return exchange(rank, op, *e);
  if (const auto* w = std::get_if<WaitOp>(&op.body)) return wait(rank, op, *w);
  if (const auto* c = std::get_if<CollectiveOp>(&op.body)) return collective(rank, op, *c);
  WalkVisit visit;
  visit.at = {rank, static_cast<int64_t>(cursors_[static_cast<size_t>(rank)].pc)};
  visit.op = &op;
  visitor_.visit(visit);
  return true;
}

std::vector<size_t>::iterator Walk::find_pending(Cursor& cursor, int phase, int id, int64_t step) {
  return std::find_if(cursor.pending.begin(), cursor.pending.end(), [&](size_t p) {
    return posted_[p].phase == phase && posted_[p].id == id && posted_[p].step == step;
  });
}

bool Walk::exchange(int64_t rank, const Op& op, const ExchangeOp& e) {
  Cursor& cursor = cursors_[static_cast<size_t>(rank)];
  const size_t posted = posted_.size();
  posted_.push_back({rank, op.phase, e.id, op.step, static_cast<int64_t>(cursor.pc), &e, -1, -1});
  // Posting the same exchange again replaces the first (its Wait takes the latest).
  const auto again = find_pending(cursor, op.phase, e.id, op.step);
  if (again != cursor.pending.end()) cursor.pending.erase(again);
  cursor.pending.push_back(posted);
  just_matched_.clear();
  if (e.send_to >= 0) post_send(rank, op, e, posted);
  if (e.recv_from >= 0) post_receive(rank, e, posted);
  WalkVisit visit;
  visit.at = {rank, posted_[posted].index};
  visit.op = &op;
  visit.sent = posted_[posted].send >= 0 ? &messages_[static_cast<size_t>(posted_[posted].send)].message : nullptr;
  visitor_.visit(visit);
  for (const auto& [message, receiver] : just_matched_) {
    visitor_.matched(messages_[static_cast<size_t>(message)].message,
                     {posted_[receiver].rank, posted_[receiver].index});
  }
  return true;
}

void Walk::post_send(int64_t rank, const Op& op, const ExchangeOp& e, size_t posted) {
  const int64_t id = static_cast<int64_t>(messages_.size());
  MessageState state;
  state.message = {id, {rank, posted_[posted].index}, e.send_to, e.tag, op.phase, op.step, e.payload, e.bytes};
  messages_.push_back(state);
  posted_[posted].send = id;
  if (e.send_to >= static_cast<int64_t>(cursors_.size())) return;  // nobody there: never received
  std::vector<size_t>& waiting = cursors_[static_cast<size_t>(e.send_to)].open_receives;
  const auto receive = std::find_if(waiting.begin(), waiting.end(), [&](size_t p) {
    return posted_[p].op->recv_from == rank && posted_[p].op->tag == e.tag;
  });
  if (receive == waiting.end()) {
    cursors_[static_cast<size_t>(e.send_to)].open_sends.push_back(id);
    return;
  }
  const size_t receiver = *receive;
  waiting.erase(receive);
  match(id, receiver);
}

void Walk::post_receive(int64_t rank, const ExchangeOp& e, size_t posted) {
  Cursor& cursor = cursors_[static_cast<size_t>(rank)];
  const auto send = std::find_if(cursor.open_sends.begin(), cursor.open_sends.end(), [&](int64_t m) {
    const WalkMessage& message = messages_[static_cast<size_t>(m)].message;
    return message.from() == e.recv_from && message.tag == e.tag;
  });
  if (send == cursor.open_sends.end()) {
    cursor.open_receives.push_back(posted);
    return;
  }
  const int64_t message = *send;
  cursor.open_sends.erase(send);
  match(message, posted);
}

void Walk::match(int64_t message, size_t posted) {
  messages_[static_cast<size_t>(message)].receiver = static_cast<int64_t>(posted);
  posted_[posted].receive = message;
  just_matched_.emplace_back(message, posted);
}

bool Walk::wait(int64_t rank, const Op& op, const WaitOp& w) {
  Cursor& cursor = cursors_[static_cast<size_t>(rank)];
  WalkVisit visit;
  visit.at = {rank, static_cast<int64_t>(cursor.pc)};
  visit.op = &op;
  const auto found = find_pending(cursor, op.phase, w.exchange_id, w.exchange_step);
  if (found != cursor.pending.end()) {
    const Posted& p = posted_[*found];
    if (p.op->recv_from >= 0 && p.receive < 0) return false;  // its message has not been sent
    if (options_.sends_need_receiver && p.send >= 0 && messages_[static_cast<size_t>(p.send)].receiver < 0)
      return false;
    visit.exchange = p.op;
    visit.exchange_index = p.index;
    if (p.send >= 0) visit.sent = &messages_[static_cast<size_t>(p.send)].message;
    if (p.receive >= 0) {
      MessageState& message = messages_[static_cast<size_t>(p.receive)];
      message.delivered = true;
      ++result_.delivered;
      visit.received = &message.message;
    }
    cursor.pending.erase(found);
  }
  visitor_.visit(visit);
  return true;
}

bool Walk::collective(int64_t rank, const Op& op, const CollectiveOp& c) {
  Cursor& cursor = cursors_[static_cast<size_t>(rank)];
  const OpRef at{rank, static_cast<int64_t>(cursor.pc)};
  if (!cursor.entered) {
    const Family family = collective_family(c.collective);
    int64_t& n = cursor.occurrences[family == Family::ulysses ? 0 : 1];
    const auto [it, fresh] =
        gathering_of_.try_emplace({static_cast<int>(family), c.group, n}, static_cast<int64_t>(gatherings_.size()));
    if (fresh) gatherings_.push_back({it->second, family, c.group, n, &c, {}});
    ++n;
    CollectiveGathering& gathering = gatherings_[static_cast<size_t>(it->second)];
    gathering.entered.push_back(at);
    cursor.entered = true;
    cursor.gathering = gathering.id;
    visitor_.entered({at, &op, &c, &gathering, c.collective != gathering.kind()});
    if (gathering.entered.size() == gathering.op->members.size()) visitor_.completed(gathering);
  }
  const CollectiveGathering& gathering = gatherings_[static_cast<size_t>(cursor.gathering)];
  if (!gathering.complete()) return false;
  cursor.entered = false;
  WalkVisit visit;
  visit.at = at;
  visit.op = &op;
  visit.gathering = &gathering;
  visitor_.visit(visit);
  return true;
}

// ---- [driver] --------------------------------------------------------------------------------

BlockedRank Walk::blocked_at(int64_t rank) const {
  const Cursor& cursor = cursors_[static_cast<size_t>(rank)];
  const Op& op = ops_[static_cast<size_t>(rank)][cursor.pc];
  BlockedRank b;
  b.at = {rank, static_cast<int64_t>(cursor.pc)};
  b.phase = op.phase;
  b.step = op.step;
  if (const auto* c = std::get_if<CollectiveOp>(&op.body)) {
    const CollectiveGathering& gathering = gatherings_[static_cast<size_t>(cursor.gathering)];
    b.waits = BlockedRank::Waits::collective;
    b.collective = c->collective;
    b.missing = gathering.missing();
  } else if (const auto* w = std::get_if<WaitOp>(&op.body)) {
    for (size_t p : cursor.pending) {
      const Posted& posted = posted_[p];
      if (posted.phase != op.phase || posted.id != w->exchange_id || posted.step != w->exchange_step) continue;
      const bool receiving = posted.op->recv_from >= 0 && posted.receive < 0;
      b.waits = receiving ? BlockedRank::Waits::message : BlockedRank::Waits::receiver;
      b.peer = receiving ? posted.op->recv_from : posted.op->send_to;
      b.tag = posted.op->tag;
    }
  }
  return b;
}

WalkResult Walk::run() {
  const int64_t P = static_cast<int64_t>(cursors_.size());
  // Round robin: each rank runs until it must wait for another; stops when nobody can move.
  for (bool progress = true; progress;) {
    progress = false;
    for (int64_t r = 0; r < P; ++r) {
      Cursor& cursor = cursors_[static_cast<size_t>(r)];
      const size_t end = ops_[static_cast<size_t>(r)].size();
      while (cursor.pc < end && step(r)) {
        ++cursor.pc;
        ++result_.visited;
        progress = true;
      }
    }
  }
  for (int64_t r = 0; r < P; ++r)
    if (cursors_[static_cast<size_t>(r)].pc < ops_[static_cast<size_t>(r)].size())
      result_.blocked.push_back(blocked_at(r));
  for (const MessageState& m : messages_)
    if (!m.delivered) result_.unreceived.push_back(m.message);
  std::sort(result_.unreceived.begin(), result_.unreceived.end(), [](const WalkMessage& a, const WalkMessage& b) {
    return std::tuple(a.from(), a.to, a.tag, a.id) < std::tuple(b.from(), b.to, b.tag, b.id);
  });
  return std::move(result_);
}

}  // namespace

WalkResult walk_plan(const Plan& plan, std::span<const std::vector<Op>> ops, WalkVisitor& visitor,
                     const WalkOptions& options) {
  if (static_cast<int64_t>(ops.size()) != plan.ranks()) {
    throw std::invalid_argument("walk_plan: " + std::to_string(ops.size()) + " op lists for a plan of " +
                                std::to_string(plan.ranks()) + " ranks");
  }
  return Walk(ops, visitor, options).run();
}

}  // namespace ringlab
