// Point-to-point operations, requests, labels and compute scopes. Collectives and
// sub-communicators are in collectives.cpp.
#include "sim/ranks/communicator.hpp"

#include <algorithm>
#include <utility>

#include "reference/error.hpp"
#include "sim/ranks/rank_ops.hpp"

namespace ringlab {

using detail::Clock;
using detail::Wait;
using detail::WaitKind;

// ---- Request ------------------------------------------------------------------------------

Request::Request() = default;
Request::~Request() = default;

Request::Request(Request&& other) noexcept { *this = std::move(other); }

// The moved-from request is left empty (done, nothing to wait for).
Request& Request::operator=(Request&& other) noexcept {
  if (this == &other) return *this;
  world_ = other.world_;
  rank_ = other.rank_;
  kind_ = std::exchange(other.kind_, Kind::none);
  complete_ = std::exchange(other.complete_, true);
  taken_ = std::exchange(other.taken_, false);
  context_ = other.context_;
  peer_ = other.peer_;
  tag_ = other.tag_;
  ticket_ = other.ticket_;
  rendezvous_id_ = other.rendezvous_id_;
  group_ = std::move(other.group_);
  arrived_ = std::move(other.arrived_);
  return *this;
}

Buffer Request::wait() {
  if (kind_ == Kind::none) return {};
  const Clock::time_point start = Clock::now();
  if (kind_ == Kind::send) {
    if (!complete_) {
      world_->wait_matched(rank_, Wait{WaitKind::match,
                                       "wait (isend, rendezvous)",
                                       {context_, rank_, tag_, false},
                                       0,
                                       rendezvous_id_,
                                       peer_,
                                       tag_,
                                       -1});
      complete_ = true;
    }
    detail::trace_comm(*world_, rank_, "wait (isend)", start, peer_, tag_, -1, group_);
    return {};
  }
  if (taken_) {
    throw UsageError("rank " + std::to_string(rank_) + ": wait() called twice on the receive from rank " +
                     std::to_string(peer_) + " tag " + std::to_string(tag_) + "; its buffer was already handed out");
  }
  arrive();
  taken_ = true;
  Buffer payload = std::move(arrived_->payload);
  arrived_.reset();
  detail::trace_comm(*world_, rank_, "wait (irecv)", start, peer_, tag_,
                     static_cast<int64_t>(payload.size() * sizeof(float)), group_);
  return payload;
}

void Request::arrive() {
  if (complete_) return;
  arrived_ = std::make_unique<detail::Message>(world_->take(
      rank_, Wait{WaitKind::message, "wait (irecv)", {context_, peer_, tag_, false}, ticket_, 0, peer_, tag_, -1}));
  detail::accept_message(*world_, rank_, *arrived_);
  complete_ = true;
}

void Request::wait_into(std::span<float> out) {
  if (kind_ != Kind::recv || taken_) {
    throw UsageError("rank " + std::to_string(rank_) +
                     ": wait_into() needs a receive request that has not been waited for; use wait() for sends");
  }
  const Clock::time_point start = Clock::now();
  arrive();
  taken_ = true;
  detail::copy_payload(*world_, rank_, *arrived_, out, "wait_into");
  arrived_.reset();
  detail::trace_comm(*world_, rank_, "wait (irecv)", start, peer_, tag_, static_cast<int64_t>(out.size_bytes()),
                     group_);
}

bool Request::test() {
  if (complete_) return true;
  if (kind_ == Kind::send) {
    complete_ = world_->test_matched(rank_, Wait{WaitKind::match,
                                                 "test (isend, rendezvous)",
                                                 {context_, rank_, tag_, false},
                                                 0,
                                                 rendezvous_id_,
                                                 peer_,
                                                 tag_,
                                                 -1});
    return complete_;
  }
  std::optional<detail::Message> message = world_->try_take(
      rank_, Wait{WaitKind::message, "test (irecv)", {context_, peer_, tag_, false}, ticket_, 0, peer_, tag_, -1});
  if (!message) return false;
  detail::accept_message(*world_, rank_, *message);
  arrived_ = std::make_unique<detail::Message>(std::move(*message));
  complete_ = true;
  return true;
}

// ---- Communicator: identity and checks ----------------------------------------------------

Communicator::Communicator(detail::WorldState& world, int world_rank, uint64_t context, std::vector<int> members)
    : world_(&world), world_rank_(world_rank), context_(context), members_(std::move(members)),
      rank_(static_cast<int>(std::find(members_.begin(), members_.end(), world_rank) - members_.begin())),
      name_(context == 0 ? "world" : detail::group_name(members_)), trace_group_(context == 0 ? "" : name_) {}

int Communicator::world_size() const { return world_->ranks(); }

SendMode Communicator::send_mode() const { return world_->options().send_mode; }

int Communicator::peer_world(int peer, int tag, const char* call) const {
  if (peer < 0 || peer >= size()) {
    throw UsageError("rank " + std::to_string(world_rank_) + ": " + call + " with peer " + std::to_string(peer) +
                     ", but " + name_ + " has " + std::to_string(size()) + " ranks; peers are 0.." +
                     std::to_string(size() - 1));
  }
  if (tag < 0) {
    throw UsageError("rank " + std::to_string(world_rank_) + ": " + call + " with tag " + std::to_string(tag) +
                     "; tags must be >= 0");
  }
  return members_[static_cast<size_t>(peer)];
}

// ---- Communicator: point-to-point ---------------------------------------------------------

Request Communicator::start_send(int dst, int tag, std::span<const float> data, bool rendezvous, const char* call) {
  const int peer = peer_world(dst, tag, call);
  const detail::MessageRoute route{context_, peer, tag, detail::CollectiveKind::none, -1, rendezvous};
  const uint64_t rendezvous_id = detail::send_message(*world_, world_rank_, route, data);
  Request request = new_request(Request::Kind::send, peer, tag);
  request.complete_ = rendezvous_id == 0;
  request.rendezvous_id_ = rendezvous_id;
  return request;
}

Request Communicator::new_request(Request::Kind kind, int peer, int tag) const {
  Request request;
  request.world_ = world_;
  request.rank_ = world_rank_;
  request.kind_ = kind;
  request.context_ = context_;
  request.peer_ = peer;
  request.tag_ = tag;
  request.group_ = trace_group_;
  return request;
}

detail::Message Communicator::receive_message(int src, int tag, const char* call) {
  const int peer = peer_world(src, tag, call);
  detail::Message message =
      world_->receive(world_rank_, Wait{WaitKind::message, call, {context_, peer, tag, false}, 0, 0, peer, tag, -1});
  detail::accept_message(*world_, world_rank_, message);
  return message;
}

void Communicator::send(int dst, int tag, std::span<const float> data) {
  const Clock::time_point start = Clock::now();
  Request request = start_send(dst, tag, data, send_mode() == SendMode::rendezvous, "send");
  if (!request.complete_) {
    world_->wait_matched(world_rank_, Wait{WaitKind::match,
                                           "send (rendezvous)",
                                           {context_, world_rank_, tag, false},
                                           0,
                                           request.rendezvous_id_,
                                           request.peer_,
                                           tag,
                                           -1});
  }
  detail::trace_comm(*world_, world_rank_, "send", start, request.peer_, tag, static_cast<int64_t>(data.size_bytes()),
                     trace_group_);
}

Buffer Communicator::recv(int src, int tag) {
  const Clock::time_point start = Clock::now();
  detail::Message message = receive_message(src, tag, "recv");
  detail::trace_comm(*world_, world_rank_, "recv", start, message.source, tag,
                     static_cast<int64_t>(message.payload.size() * sizeof(float)), trace_group_);
  return std::move(message.payload);
}

void Communicator::recv_into(int src, int tag, std::span<float> out) {
  const Clock::time_point start = Clock::now();
  detail::Message message = receive_message(src, tag, "recv_into");
  detail::copy_payload(*world_, world_rank_, message, out, "recv_into");
  detail::trace_comm(*world_, world_rank_, "recv", start, message.source, tag, static_cast<int64_t>(out.size_bytes()),
                     trace_group_);
}

Request Communicator::isend(int dst, int tag, std::span<const float> data) {
  const Clock::time_point start = Clock::now();
  Request request = start_send(dst, tag, data, send_mode() == SendMode::rendezvous, "isend");
  detail::trace_comm(*world_, world_rank_, "isend", start, request.peer_, tag, static_cast<int64_t>(data.size_bytes()),
                     trace_group_);
  return request;
}

Request Communicator::irecv(int src, int tag) {
  const Clock::time_point start = Clock::now();
  const int peer = peer_world(src, tag, "irecv");
  Request request = new_request(Request::Kind::recv, peer, tag);
  request.complete_ = false;
  request.ticket_ = world_->post_receive(world_rank_, {context_, peer, tag, false});
  detail::trace_comm(*world_, world_rank_, "irecv", start, peer, tag, -1, trace_group_);
  return request;
}

void Communicator::finish_sendrecv(const Request& outgoing, int send_tag, int64_t bytes, const char* send_part,
                                   Clock::time_point start) {
  if (!outgoing.complete_) {
    world_->wait_matched(world_rank_, Wait{WaitKind::match,
                                           send_part,
                                           {context_, world_rank_, send_tag, false},
                                           0,
                                           outgoing.rendezvous_id_,
                                           outgoing.peer_,
                                           send_tag,
                                           -1});
  }
  detail::trace_comm(*world_, world_rank_, "sendrecv", start, outgoing.peer_, send_tag, bytes, trace_group_);
}

Buffer Communicator::sendrecv(int dst, int send_tag, std::span<const float> data, int src, int recv_tag) {
  const Clock::time_point start = Clock::now();
  Request outgoing = start_send(dst, send_tag, data, send_mode() == SendMode::rendezvous, "sendrecv");
  detail::Message message = receive_message(src, recv_tag, "sendrecv (receive part)");
  finish_sendrecv(outgoing, send_tag, static_cast<int64_t>(data.size_bytes()), "sendrecv (send part)", start);
  return std::move(message.payload);
}

void Communicator::sendrecv_into(int dst, int send_tag, std::span<const float> data, int src, int recv_tag,
                                 std::span<float> out) {
  const Clock::time_point start = Clock::now();
  Request outgoing = start_send(dst, send_tag, data, send_mode() == SendMode::rendezvous, "sendrecv_into");
  detail::Message message = receive_message(src, recv_tag, "sendrecv_into (receive part)");
  detail::copy_payload(*world_, world_rank_, message, out, "sendrecv_into");
  finish_sendrecv(outgoing, send_tag, static_cast<int64_t>(data.size_bytes()), "sendrecv_into (send part)", start);
}

// ---- Communicator: labels, compute, buffers -----------------------------------------------

void Communicator::set_step(int step) {
  detail::RankLocal& local = world_->local(world_rank_);
  local.step = step;
  world_->set_labels(world_rank_, step, local.label);
}

void Communicator::set_step(int step, std::string label) {
  detail::RankLocal& local = world_->local(world_rank_);
  local.step = step;
  local.label = std::move(label);
  world_->set_labels(world_rank_, step, local.label);
}

void Communicator::set_label(std::string label) { set_step(step(), std::move(label)); }

int Communicator::step() const { return world_->local(world_rank_).step; }

const std::string& Communicator::label() const { return world_->local(world_rank_).label; }

void Communicator::compute(std::string_view name, double flops, const BlockLabels& labels,
                           const std::function<void()>& work) {
  ComputeScope scope(*this, std::string(name), flops, labels);
  work();
}

void Communicator::recycle(Buffer&& buffer) { world_->pool().give_back(std::move(buffer)); }

const RankCounters& Communicator::counters() const { return world_->local(world_rank_).counters; }

// ---- ComputeScope -------------------------------------------------------------------------

ComputeScope::ComputeScope(Communicator& comm, std::string name, double flops, BlockLabels labels)
    : world_(comm.world_), rank_(comm.world_rank_), name_(std::move(name)), flops_(flops), labels_(std::move(labels)),
      group_(comm.trace_group_) {
  world_->check_alive();
  world_->begin_compute();
  start_ = Clock::now();
}

ComputeScope::~ComputeScope() {
  const Clock::time_point end = Clock::now();
  detail::RankLocal& local = world_->local(rank_);
  local.counters.compute_seconds += std::chrono::duration<double>(end - start_).count();
  local.counters.flops += std::max(flops_, 0.0);
  if (world_->options().trace) {
    TraceEvent event;
    event.name = name_;
    event.rank = rank_;
    event.lane = TraceLane::compute;
    event.start_us = world_->since_origin_us(start_);
    event.duration_us = world_->since_origin_us(end) - event.start_us;
    event.step = local.step;
    event.label = local.label;
    event.flops = std::max(flops_, 0.0);
    event.q_block = labels_.q_block;
    event.kv_block = labels_.kv_block;
    event.mask = labels_.mask;
    event.group = group_;
    local.trace.push_back(std::move(event));
  }
  world_->end_compute();
}

}  // namespace ringlab
