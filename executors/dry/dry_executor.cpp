// The dry executor: template entries evaluated for all ranks at once.
// Sections: [state] [exchange and wait] [compute] [collectives] [elementwise] [first touch] [driver]
//           [summary] [contract]
#include "executors/dry/dry_executor.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <numeric>
#include <ostream>
#include <stdexcept>

#include "executors/dry/dry_report.hpp"
#include "reference/error.hpp"
#include "reference/formulas.hpp"
#include "sim/cost/block_work.hpp"
#include "sim/pipeline/config.hpp"
#include "sim/pipeline/op_interpreter.hpp"  // the trace's names
#include "sim/plan/queries.hpp"

namespace ringlab {

namespace {

constexpr double kNever = -std::numeric_limits<double>::infinity();

int64_t wrap(int64_t value, int64_t modulus) { return ((value % modulus) + modulus) % modulus; }

// ---- [state] ---------------------------------------------------------------------------------

// An exchange posted for all ranks, until its Wait: completion and "both ends posted" times.
struct PendingExchange {
  int64_t step = -1;  // the step that posted it; -1 = free
  bool sends = true, receives = true;
  std::vector<char> sent, received;  // per rank: took part (a trimmed ring's ranks may not)
  std::vector<double> send_done, send_ready, recv_done, recv_ready, recv_extra, recv_duration;
  void size(int64_t ranks) {
    for (auto* v : {&send_done, &send_ready, &recv_done, &recv_ready, &recv_extra, &recv_duration})
      v->assign(ranks, 0.0);
    sent.assign(ranks, 0), received.assign(ranks, 0);
  }
};

class DryRun {
 public:
  DryRun(const Plan& plan, const Hardware& hw, const DryOptions& options)
      : plan_(plan), hw_(hw), options_(options), P_(plan.ranks()), R_(plan.ring()), U_(plan.ulysses()), span_(R_),
        classifier_(plan, hw.device.q_tile, hw.device.kv_tile) {
    const size_t P = static_cast<size_t>(P_);
    for (auto* v : {&clock_, &compute_, &other_, &exposed_, &idle_, &comm_, &hidden_, &flops_, &send_free_, &recv_free_,
                    &step_compute_})
      v->assign(P, 0.0);
    for (auto* v :
         {&pairs_, &computed_, &skipped_, &masked_, &bytes_sent_, &bytes_received_, &messages_, &messages_received_})
      v->assign(P, 0);
    node_.resize(P);
    shared_ = hw.device.ranks_per_device > 1;
    if (shared_) {
      kernel_start_.assign(P, 0.0), kernel_work_.assign(P, 0.0), kernel_floor_.assign(P, 0.0), kernel_block_.resize(P);
      device_free_.assign(static_cast<size_t>((P_ + hw.device.ranks_per_device - 1) / hw.device.ranks_per_device), 0.0);
    }
    const int64_t G = std::max<int64_t>(1, hw.ranks_per_node);
    for (int64_t r = 0; r < P_; ++r) node_[r] = r / G;
    copy_share_ = std::min(1.0, hw.device.rank_share(P_));
    host_copy_ = hw.intra_node.host_copy || hw.inter_node.host_copy;
  }

  DryResult run();

 private:
  // ---- [folding] -----------------------------------------------------------------------------
  // A phase whose every step costs every rank the same (its compute classes cost alike, no
  // collective, no per-rank trimming) keeps a state that is periodic along the ring with the
  // node period T (ranks p and p + T U share everything: their link classes to their peers, their
  // clocks). Then only ring positions 0..T-1 need walking: a peer outside them is its
  // representative mod T. The result is the full walk's, bit for bit (tests/executors compare).

  // The ring positions this phase needs walking: T when it folds, R otherwise.
  int64_t fold_span(const Phase& phase) {
    const int64_t span = static_span(phase);
    if (span == R_) return R_;
    // The state entering the phase must have that period too.
    const int64_t period = span * U_;
    for (const std::vector<double>* v : doubles())
      for (int64_t r = period; r < P_; ++r)
        if ((*v)[r] != (*v)[r % period]) return R_;
    for (const std::vector<int64_t>* v : integers())
      for (int64_t r = period; r < P_; ++r)
        if ((*v)[r] != (*v)[r % period]) return R_;
    return span;
  }

  // What fold_span gives when the state entering the phase is periodic: the phase's own verdict.
  int64_t static_span(const Phase& phase) {
    if (!options_.fold || tracing_ || R_ < 2) return R_;
    if (hw_.device.ranks_per_device > 1) return R_;  // ranks sharing a device: their kernels meet
    for (const TemplateEntry& entry : phase.body)
      if (std::holds_alternative<CollectiveT>(entry.op)) return R_;
    if (!phase.travel.empty() &&
        std::adjacent_find(phase.travel.begin(), phase.travel.end(), std::not_equal_to<>()) != phase.travel.end())
      return R_;                                      // a trimmed ring whose blocks travel differently
    if (classifier_.memo_class(0, 0) < 0) return R_;  // blocks classified one by one (a mask, the erratum)
    // Below and above the diagonal (a step with d != 0 has both): the same cost, or no fold.
    const BlockWork below = classifier_.classify(1, 0), above = classifier_.classify(0, 1);
    auto masked = [](const BlockWork& w) {
      return w.shape == BlockShape::diagonal || w.shape == BlockShape::masked || w.shape == BlockShape::erratum ||
             w.shape == BlockShape::partial;
    };
    if (below.kernels != above.kernels || below.full_area != above.full_area ||
        below.masked_area != above.masked_area || below.pairs != above.pairs || masked(below) != masked(above))
      return R_;
    // The node period in ring positions: the smallest T with T U a multiple of G.
    const int64_t G = std::max<int64_t>(1, hw_.ranks_per_node);
    int64_t span = 1;
    if (G < P_) {
      if (P_ % G != 0) return R_;  // a partial last node: no period
      span = G / std::gcd(G, U_);
    }
    if (span >= R_ || R_ % span != 0) return R_;
    return span;
  }

  // A phase's walked rank-steps, weighted by what one costs: blocks classified one by one (a
  // mask: padding, documents, a window) take about 8 times a plain causal block's (measured:
  // ~375 against ~40 ns per rank-step).
  int64_t walk_weight() const { return classifier_.memo_class(0, 0) < 0 ? 8 : 1; }

  // Refuses a walk past options_.max_walk_work (walked ranks x steps, weighted), one line with the
  // fix: a ring whose ranks differ at every step is walked rank by rank, P x P, which at P = 65536
  // would take minutes. `work`: the walk's so far or, before it, the estimate.
  void check_walk(int64_t work) const {
    if (work <= options_.max_walk_work) return;
    refuse_walk("more than it walks in seconds");
  }

  // The timed check (DryOptions::max_walk_s): `done` rank-steps walked since `start`, at least
  // `left` still to walk.
  void check_walk_time(std::chrono::steady_clock::time_point start, int64_t done, int64_t left) const {
    if (options_.max_walk_s <= 0 || done == 0) return;
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (elapsed < options_.judge_after_s) return;
    const double projected = elapsed * double(done + left) / double(done);
    if (projected <= options_.max_walk_s) return;
    refuse_walk("about " + std::to_string(static_cast<int64_t>(std::ceil(projected))) + " s at the pace of its first " +
                std::to_string(done) + " rank-steps");
  }

  [[noreturn]] void refuse_walk(const std::string& why) const {
    throw UsageError("this dry run would walk its P=" + std::to_string(P_) + " ranks one by one at every ring step, " +
                     why +
                     ": they differ at every step (a contiguous causal ring, padding, documents, a window, a "
                     "balanced layout, --trace); use fewer --ranks, or --layout zigzag or striped with S a multiple "
                     "of 2P (ranks the same up to rotation are walked once)");
  }

  // Back to every rank: each takes its representative's state.
  void unfold() {
    const int64_t period = span_ * U_;
    span_ = R_;
    if (period == P_) return;
    for (std::vector<double>* v : doubles())
      for (int64_t r = period; r < P_; ++r) (*v)[r] = (*v)[r % period];
    for (std::vector<int64_t>* v : integers())
      for (int64_t r = period; r < P_; ++r) (*v)[r] = (*v)[r % period];
  }

  std::array<std::vector<double>*, 11> doubles() {
    return {&clock_,  &compute_, &other_,     &exposed_,   &idle_,        &comm_,
            &hidden_, &flops_,   &send_free_, &recv_free_, &step_compute_};
  }
  std::array<std::vector<int64_t>*, 8> integers() {
    return {&pairs_, &computed_, &skipped_, &masked_, &bytes_sent_, &bytes_received_, &messages_, &messages_received_};
  }

  // ---- [exchange and wait] -------------------------------------------------------------------

  void exchange(const ExchangeT& t, int phase, int64_t step, PendingExchange& pending) {
    if (!t.sends || !t.receives) {
      throw std::logic_error("dry executor: exchange " + std::to_string(t.id) + " of phase '" + label_ +
                             "' has a send or a receive alone; it needs both in one template entry");
    }
    const int64_t send_delta = wrap(t.send_to.offset + t.send_to.per_step * step, R_);
    const int64_t recv_delta = wrap(t.recv_from.offset + t.recv_from.per_step * step, R_);
    if ((send_delta + recv_delta) % R_ != 0) {
      throw std::logic_error("dry executor: exchange " + std::to_string(t.id) + " of phase '" + label_ + "' at step " +
                             std::to_string(step) + " sends to a rank that receives from another");
    }
    if (pending.step >= 0) {
      throw std::logic_error("dry executor: phase '" + label_ + "' posts exchange " + std::to_string(t.id) +
                             " at step " + std::to_string(step) + " while that of step " +
                             std::to_string(pending.step) + " is still not waited for");
    }
    pending.step = step;
    pending.sends = t.sends, pending.receives = t.receives;
    std::fill_n(pending.sent.begin(), span_ * U_, 0);
    std::fill_n(pending.received.begin(), span_ * U_, 0);
    const int64_t bytes = payload_bytes(plan_, t.payload);
    const bool host = host_copy_;
    const double intra = hw_.intra_node.seconds(double(bytes)) / (host ? copy_share_ : 1.0);
    const double inter = hw_.inter_node.seconds(double(bytes)) / (host ? copy_share_ : 1.0);
    const double verify_intra = hw_.intra_node.verify_seconds(double(bytes)) / copy_share_;
    const double verify_inter = hw_.inter_node.verify_seconds(double(bytes)) / copy_share_;
    for (int64_t g = 0; g < span_; ++g) {
      int64_t to_g = g + send_delta;
      if (to_g >= R_) to_g -= R_;
      // Every rank sends one message of `bytes` and receives one, but in a trimmed ring (Route).
      const bool sends = phase_->route_sends(t.route, g, step);
      if (sends != phase_->route_receives(t.route, to_g, step)) {
        throw std::logic_error("dry executor: phase '" + label_ + "' step " + std::to_string(step) +
                               ": ring position " + std::to_string(g) + "'s send and " + std::to_string(to_g) +
                               "'s receive disagree");
      }
      if (!sends) continue;
      for (int64_t u = 0; u < U_; ++u) {
        // Folded: the receiver's state is that of its representative (the same up to rotation).
        const int64_t r = g * U_ + u, to_rank = to_g * U_ + u, to = (to_g % span_) * U_ + u;
        pending.sent[r] = pending.received[to] = 1;
        bytes_sent_[r] += bytes, bytes_received_[to] += bytes, ++messages_[r], ++messages_received_[to];
        const bool same_node = node_[r] == node_[to_rank];
        const double duration = same_node ? intra : inter;
        double start = 0, end = 0;
        if (host) {
          // The sending thread copies now; the message is in the queue when the copy ends.
          start = clock_[r];
          end = start + duration;
          clock_[r] = end;
          exposed_[r] += duration;
          comm_[r] += duration;
          pending.send_done[r] = pending.send_ready[r] = end;
          pending.recv_done[to] = end;
          pending.recv_ready[to] = end;
          pending.recv_extra[to] = same_node ? verify_intra : verify_inter;
        } else {
          const double ready = std::max(clock_[r], clock_[to]);
          start = std::max(std::max(ready, send_free_[r]), recv_free_[to]);
          end = start + duration;
          send_free_[r] = recv_free_[to] = end;
          pending.send_done[r] = pending.recv_done[to] = end;
          pending.send_ready[r] = pending.recv_ready[to] = ready;
          pending.recv_duration[to] = duration;
          comm_[to] += duration;
        }
        if (tracing_) {
          TraceEvent event = event_at(r, TraceLane::comm, host ? "isend (copy)" : "send", start, end, step);
          event.peer = static_cast<int>(to_rank);
          event.tag = exchange_tag(phase, t.id, step);  // traces exist only well below 10^6 steps
          event.bytes = bytes;
          trace_.push_back(std::move(event));
        }
      }
    }
  }

  void wait(const WaitT& w, int64_t step, PendingExchange& pending) {
    if (pending.step != step - w.lag) {
      throw std::logic_error("dry executor: phase '" + label_ + "' step " + std::to_string(step) +
                             " waits for exchange " + std::to_string(w.exchange_id) + " of step " +
                             std::to_string(step - w.lag) + ", which was never posted");
    }
    pending.step = -1;
    for (int64_t r = 0; r < span_ * U_; ++r) {
      double target = kNever, ready = kNever;
      const bool sent = pending.sends && pending.sent[r], received = pending.receives && pending.received[r];
      if (sent) target = pending.send_done[r], ready = pending.send_ready[r];
      if (received && pending.recv_done[r] > target) target = pending.recv_done[r], ready = pending.recv_ready[r];
      const double now = clock_[r];
      if (received && !host_copy_) {
        // Of the incoming transfer's own duration, what did not stall this rank was hidden.
        const double exposed = std::max(0.0, pending.recv_done[r] - std::max(now, pending.recv_ready[r]));
        hidden_[r] += pending.recv_duration[r] - std::min(pending.recv_duration[r], exposed);
      }
      if (target > now) {
        const double stall = target - now;
        const double late_peer = std::clamp(ready - now, 0.0, stall);
        idle_[r] += late_peer;
        exposed_[r] += stall - late_peer;
        clock_[r] = target;
        if (tracing_) {  // the part spent waiting for the peer to post, then the exposed transfer
          if (late_peer > 0)
            trace_.push_back(event_at(r, TraceLane::comm, "wait (peer late)", now, now + late_peer, step));
          if (stall > late_peer) trace_.push_back(event_at(r, TraceLane::comm, "wait", now + late_peer, target, step));
        }
      }
      if (host_copy_ && received && pending.recv_extra[r] > 0) {  // host copies: the receiver's checksum
        const double start = clock_[r];
        clock_[r] += pending.recv_extra[r];
        exposed_[r] += pending.recv_extra[r];
        if (tracing_) trace_.push_back(event_at(r, TraceLane::comm, "wait (checksum)", start, clock_[r], step));
      }
    }
  }

  // ---- [compute] -----------------------------------------------------------------------------

  void compute(const ComputeT& t, Needs needs, int64_t step) {
    const bool backward = t.pass == Pass::backward;
    const AttentionDims& d = plan_.spec().dims;
    // FLOPs per (query, key) pair over the rank's heads and batch.
    const double per_pair = double(backward ? kBackwardFlopsPerPairPerDim : kForwardFlopsPerPairPerDim) *
                            double(d.dim) * double(plan_.heads_per_rank()) * double(d.batch);
    const double full_rate = hw_.device.rank_flops(backward, MaskedWork::full, P_);
    const double masked_rate = hw_.device.rank_flops(backward, MaskedWork::masked, P_);
    const double launch = hw_.device.kernel_launch_s / std::min(1.0, hw_.device.rank_share(P_));
    const int64_t delta = wrap(t.origin.offset + t.origin.per_step * step, R_);
    // What a block costs, from its classification (the same for every block of a memo class).
    struct Cost {
      double seconds = 0, flops = 0;
      double floor = 0;  // DeviceModel::forward_floor_s: the call ends no sooner (a latency, not work)
      int64_t pairs = 0;
      bool skipped = false, masked = false;
      BlockShape shape = BlockShape::full;
    };
    auto cost_of = [&](const BlockWork& work) {
      Cost c;
      const double rows = work.kernels > 0 ? hw_.device.shape_factor(backward, plan_.block_tokens(), work.q_rows.size(),
                                                                     work.kv_rows.size())
                                           : 1.0;
      c.seconds = work.kernels * launch + double(work.full_area) * per_pair / full_rate / rows +
                  double(work.masked_area) * per_pair / masked_rate / rows;
      if (work.kernels > 0 && !backward)
        c.floor = hw_.device.forward_floor_s(d.dim, work.kv_rows.size(), full_rate * rows);
      c.flops = double(work.pairs) * per_pair;
      c.pairs = work.pairs;
      c.skipped = work.kernels == 0;
      c.masked = work.shape == BlockShape::diagonal || work.shape == BlockShape::masked ||
                 work.shape == BlockShape::erratum || work.shape == BlockShape::partial;
      c.shape = work.shape;
      return c;
    };
    std::array<Cost, 3> class_cost{};
    std::array<bool, 3> known{};
    for (int64_t g = 0; g < span_; ++g) {
      if (!phase_->runs(needs, g, step)) continue;  // a trimmed ring: the block never reached g
      int64_t kv = g + delta;
      if (kv >= R_) kv -= R_;
      const int memo = classifier_.memo_class(g, kv);
      Cost single;
      const Cost* cost = &single;
      if (memo >= 0) {
        const size_t key = static_cast<size_t>(memo);
        if (!known[key]) class_cost[key] = cost_of(classifier_.classify(g, kv)), known[key] = true;
        cost = &class_cost[key];
      } else {
        single = cost_of(classifier_.classify(g, kv));
      }
      for (int64_t u = 0; u < U_; ++u) {
        const int64_t r = g * U_ + u;
        if (cost->skipped) {
          ++skipped_[r];
          continue;
        }
        ++computed_[r];
        masked_[r] += cost->masked ? 1 : 0;
        pairs_[r] += cost->pairs;
        flops_[r] += cost->flops;
        if (shared_) {  // priced below, when every rank on the device has said what it runs
          kernel_start_[r] = clock_[r], kernel_work_[r] = cost->seconds, kernel_floor_[r] = cost->floor;
          kernel_block_[r] = {g, kv, cost->flops, cost->shape};
          continue;
        }
        const double seconds = std::max(cost->seconds, cost->floor);
        if (tracing_) trace_compute(t.pass, r, {g, kv, cost->flops, cost->shape}, clock_[r] + seconds, step);
        clock_[r] += seconds;
        compute_[r] += seconds;
        step_compute_[r] += seconds;
      }
    }
    if (shared_) share_devices(t.pass, step);
  }

  struct KernelBlock {
    int64_t q = 0, kv = 0;
    double flops = 0;
    BlockShape shape = BlockShape::full;
  };
  void trace_compute(Pass pass, int64_t r, const KernelBlock& block, double end, int64_t step) {
    TraceEvent event = event_at(r, TraceLane::compute, compute_trace_name(pass), clock_[r], end, step);
    event.flops = block.flops;
    event.q_block = static_cast<int>(block.q);
    event.kv_block = static_cast<int>(block.kv);
    event.mask = block_shape_name(block.shape);
    trace_.push_back(std::move(event));
  }

  // Ranks sharing a device (ranks_per_device > 1): the kernels this compute entry launched on one
  // device run under processor sharing (hardware.hpp), each from its rank's clock, but not before
  // the device has finished the kernels priced before them (a rank that finished its step early
  // finds the device busy with the others' kernels: the device's time is conserved, not doubled).
  void share_devices(Pass pass, int64_t step) {
    const int64_t n = hw_.device.ranks_per_device;
    std::vector<double> start, work;
    for (int64_t first = 0; first < P_; first += n) {
      const int64_t last = std::min(P_, first + n);
      double& device_free = device_free_[static_cast<size_t>(first / n)];
      start.assign(kernel_start_.begin() + first, kernel_start_.begin() + last);
      for (double& t : start) t = std::max(t, device_free);
      work.assign(kernel_work_.begin() + first, kernel_work_.begin() + last);
      const std::vector<double> finish = processor_sharing(start, work);
      for (int64_t r = first; r < last; ++r) {
        const size_t i = static_cast<size_t>(r - first);
        // The floor delays the rank, not the device: its share is free once the work is done.
        const double end = std::max(finish[i], start[i] + kernel_floor_[r]);
        if (kernel_work_[r] > 0) device_free = std::max(device_free, finish[i]);
        if (kernel_work_[r] > 0) {
          if (tracing_) trace_compute(pass, r, kernel_block_[r], end, step);
          compute_[r] += end - clock_[r];
          step_compute_[r] += end - clock_[r];
          clock_[r] = end;
        }
        kernel_work_[r] = 0, kernel_floor_[r] = 0;
      }
    }
  }

  // ---- [collectives] -------------------------------------------------------------------------

  // All-to-all among `count` consecutive ranks from `first`, chunk bytes per peer: NCCL's grouped
  // send/recv (all peers at once), so intra- and inter-node traffic flow side by side.
  double all_to_all_seconds(int64_t first, int64_t count, int64_t member, double chunk) const {
    const int64_t G = std::max<int64_t>(1, hw_.ranks_per_node);
    const int64_t node = node_[member];
    const int64_t same = std::min(first + count, (node + 1) * G) - std::max(first, node * G);
    const double intra_peers = double(same - 1), inter_peers = double(count - same);
    const LinkClass &a = hw_.intra_node, &b = hw_.inter_node;
    if (a.host_copy || b.host_copy) {  // the rank's thread copies every chunk out and checks every chunk in
      return (intra_peers * (a.seconds(chunk) + a.verify_seconds(chunk)) +
              inter_peers * (b.seconds(chunk) + b.verify_seconds(chunk))) /
             copy_share_;
    }
    const double latency = std::max(intra_peers > 0 ? a.latency_s : 0.0, inter_peers > 0 ? b.latency_s : 0.0);
    return latency + std::max(chunk * intra_peers / a.bandwidth_Bps, chunk * inter_peers / b.bandwidth_Bps);
  }

  // Ring all-gather / reduce-scatter over `count` ranks, `chunk` bytes per rank: count-1 steps,
  // each paced by the slowest link of the ring.
  double ring_collective_seconds(int64_t count, double chunk, bool crosses_nodes) const {
    const LinkClass& link = crosses_nodes ? hw_.inter_node : hw_.intra_node;
    const double steps = double(count - 1);
    if (link.host_copy) return steps * (link.seconds(chunk) + link.verify_seconds(chunk)) / copy_share_;
    return steps * link.seconds(chunk);
  }

  void collective(const CollectiveT& t, int64_t step) {
    if (span_ != R_) throw std::logic_error("dry executor: a collective in a folded phase");
    const int64_t bytes = collective_bytes(plan_, t.collective);
    const bool ulysses_family = is_ulysses_collective(t.collective);
    const char* name = collective_trace_name(t.collective);
    const int64_t count = ulysses_family ? U_ : R_;
    if (count <= 1) return;           // a group of one: nothing moves
    for (int64_t r = 0; r < P_; ++r)  // every rank, the same
      bytes_sent_[r] += bytes, bytes_received_[r] += bytes, messages_[r] += count - 1,
          messages_received_[r] += count - 1;
    const int64_t groups = ulysses_family ? R_ : U_;
    const double chunk = double(bytes) / double(count - 1);
    // Reduce-scatter also adds what it receives: read two, write one, at memory bandwidth.
    const double reduce =
        t.collective == Collective::reduce_scatter_dkv ? hw_.device.memory_seconds(3.0 * double(bytes), P_) : 0;
    for (int64_t group = 0; group < groups; ++group) {
      auto member = [&](int64_t i) { return ulysses_family ? group * U_ + i : i * U_ + group; };
      double start = 0, duration = 0;
      bool crosses = false;
      for (int64_t i = 0; i < count; ++i) {
        const int64_t r = member(i);
        start = std::max(start, clock_[r]);
        if (ulysses_family) {
          duration = std::max(duration, all_to_all_seconds(group * U_, U_, r, chunk));
        } else {
          crosses = crosses || node_[r] != node_[member((i + 1) % count)];
        }
      }
      if (!ulysses_family) duration = ring_collective_seconds(count, chunk, crosses) + reduce;
      for (int64_t i = 0; i < count; ++i) {
        const int64_t r = member(i);
        if (tracing_ && start > clock_[r]) {
          trace_.push_back(event_at(r, TraceLane::comm, "wait (peer late)", clock_[r], start, step));
        }
        idle_[r] += start - clock_[r];
        exposed_[r] += duration;
        comm_[r] += duration;
        clock_[r] = start + duration;
        if (tracing_) {
          TraceEvent event = event_at(r, TraceLane::comm, name, start, start + duration, step);
          event.bytes = bytes;
          event.group = (ulysses_family ? "ulysses group " : "ring group ") + std::to_string(group);
          trace_.push_back(std::move(event));
        }
      }
    }
  }

  // ---- [elementwise] -------------------------------------------------------------------------

  void elementwise(double bytes) { elementwise_seconds(hw_.device.memory_seconds(bytes, P_)); }
  // Only on the ranks that run the entry (a trimmed ring's Needs).
  void elementwise(double bytes, Needs needs, int64_t step) {
    const double seconds = hw_.device.memory_seconds(bytes, P_);
    for (int64_t r = 0; r < span_ * U_; ++r)
      if (phase_->runs(needs, r / U_, step)) clock_[r] += seconds, other_[r] += seconds;
  }
  void elementwise_seconds(double seconds) {
    if (seconds <= 0) return;
    for (int64_t r = 0; r < span_ * U_; ++r) clock_[r] += seconds, other_[r] += seconds;
  }

  // Bytes each op moves through memory (read + written), on every rank.
  double finalize_bytes() const {  // o, m, l (fp32) read; out and lse written
    const int64_t rows = plan_.block_tokens() * plan_.heads_per_rank() * plan_.spec().dims.batch;
    const int64_t D = plan_.spec().dims.dim;
    return double(rows) * double((D + 2) * 4 + D * plan_.spec().element_bytes + 4);
  }
  double prepare_backward_bytes() const {  // delta = rowsum(dout o out); dq = 0 (fp32); dK/dV = 0
    const int64_t rows = plan_.block_tokens() * plan_.heads_per_rank() * plan_.spec().dims.batch;
    const int64_t D = plan_.spec().dims.dim;
    return double(rows) * double(2 * D * plan_.spec().element_bytes + 4 + D * 4) +
           double(payload_bytes(plan_, Payload::dkv));
  }

  TraceEvent event_at(int64_t rank, TraceLane lane, const char* name, double start_s, double end_s,
                      int64_t step) const {
    TraceEvent event;
    event.name = name;
    event.rank = static_cast<int>(rank);
    event.lane = lane;
    event.start_us = start_s * 1e6;
    event.duration_us = (end_s - start_s) * 1e6;
    event.step = static_cast<int>(step);
    event.label = label_;
    return event;
  }

  const Plan& plan_;
  const Hardware& hw_;
  const DryOptions& options_;
  const int64_t P_, R_, U_;
  int64_t span_;  // ring positions walked: R_, or the node period T in a folded phase
  BlockClassifier classifier_;
  double copy_share_ = 1;
  std::vector<double> clock_, compute_, other_, exposed_, idle_, comm_, hidden_, flops_, send_free_, recv_free_,
      step_compute_;
  bool shared_ = false;  // ranks share devices (DeviceModel::ranks_per_device)
  std::vector<double> kernel_start_, kernel_work_, kernel_floor_;  // with shared_: this compute entry's kernels
  std::vector<KernelBlock> kernel_block_;
  std::vector<double> device_free_;  // with shared_: per device, when the kernels priced so far end
  std::vector<int64_t> pairs_, computed_, skipped_, masked_, node_;
  // Every rank runs every template entry, so each sends and receives the same: one count for all.
  std::vector<int64_t> bytes_sent_, bytes_received_, messages_, messages_received_;  // per rank
  const Phase* phase_ = nullptr;                                                     // the phase being run
  bool host_copy_ = false;
  std::string label_;
  bool tracing_ = false;
  std::vector<TraceEvent> trace_;
};

// ---- [first touch] ---------------------------------------------------------------------------

// Per phase, the seconds a rank spends writing fresh memory at its start (hardware.hpp, "first
// touch"): the memory model's bytes (inputs aside: they exist before the plan runs) beyond the
// largest total of every earlier phase — memory freed within a run is reused, a new peak is not.
std::vector<double> first_touch_seconds(const MemoryReport& memory, const DeviceModel& device, int64_t ranks) {
  std::vector<double> seconds;
  int64_t peak = 0;
  for (const PhaseMemory& phase : memory.phases) {
    const int64_t bytes = phase.total() - phase.bytes[static_cast<size_t>(MemoryCategory::inputs)];
    seconds.push_back(device.first_touch_seconds(double(std::max<int64_t>(0, bytes - peak)), ranks));
    peak = std::max(peak, bytes);
  }
  return seconds;
}

// ---- [driver] --------------------------------------------------------------------------------

DryResult DryRun::run() {
  DryResult result;
  result.memory = memory_per_rank(plan_);
  const std::vector<double> first_touch = first_touch_seconds(result.memory, hw_.device, P_);
  tracing_ = options_.trace;
  if (tracing_) {
    const int64_t estimate = 3 * total_ops(plan_);  // up to three events per op (a wait: late peer, transfer)
    if (estimate > options_.max_trace_events) {
      throw UsageError("a trace of this dry run would hold about " + std::to_string(estimate) + " events (P=" +
                       std::to_string(P_) + "), more than the " + std::to_string(options_.max_trace_events) +
                       " a trace viewer handles; drop --trace or use fewer --ranks");
    }
    trace_.reserve(static_cast<size_t>(estimate));
  }
  // Before walking: the rank-steps of the phases that cannot fold whatever state enters them (a
  // lower bound: a phase that could fold may still not, which the walk's own count catches).
  int64_t bound = 0, rank_steps_left = 0;
  for (const Phase& phase : plan_.phases()) {
    bound += static_span(phase) * U_ * phase.steps * walk_weight();
    rank_steps_left += static_span(phase) * U_ * phase.steps;  // at least
  }
  check_walk(bound);
  int64_t walked = 0, rank_steps_done = 0;
  const auto walk_start = std::chrono::steady_clock::now();
  for (size_t p = 0; p < plan_.phases().size(); ++p) {
    const Phase& phase = plan_.phases()[p];
    label_ = phase.name;
    phase_ = &phase;
    DryPhase phase_result{phase.name, phase.steps, *std::min_element(clock_.begin(), clock_.end()), 0};
    // One pending record per (exchange id, step parity window): a Wait lags at most max_lag steps.
    int max_id = -1;
    int64_t max_lag = 0;
    bool computes = false;
    for (const TemplateEntry& entry : phase.body) {
      if (const auto* e = std::get_if<ExchangeT>(&entry.op)) max_id = std::max(max_id, e->id);
      if (const auto* w = std::get_if<WaitT>(&entry.op)) max_lag = std::max(max_lag, w->lag);
      computes = computes || std::holds_alternative<ComputeT>(entry.op);
    }
    if (p < first_touch.size()) elementwise_seconds(first_touch[p]);
    span_ = fold_span(phase);
    phase_result.walked_positions = span_;
    walked += span_ * U_ * phase.steps * walk_weight();
    check_walk(walked);
    const int64_t depth = max_lag + 1;
    std::vector<PendingExchange> pending(static_cast<size_t>((max_id + 1) * depth));
    for (PendingExchange& record : pending) record.size(P_);
    auto record_of = [&](int id, int64_t step) -> PendingExchange& {
      if (id < 0 || id > max_id) {
        throw std::logic_error("dry executor: phase '" + phase.name + "' waits for exchange " + std::to_string(id) +
                               ", which it never posts");
      }
      return pending[static_cast<size_t>(id * depth + wrap(step, depth))];
    };
    for (int64_t step = 0; step < phase.steps; ++step) {
      // The walked positions only: in a folded phase they are a node's period, and clearing all P
      // entries at each of P steps was most of a large ring's time (P = 262144: 9 s).
      if (computes) std::fill_n(step_compute_.begin(), span_ * U_, 0.0);
      for (const TemplateEntry& entry : phase.body) {
        if (!entry.when.contains(step, phase.steps)) continue;
        std::visit(
            [&](const auto& t) {
              using T = std::decay_t<decltype(t)>;
              if constexpr (std::is_same_v<T, ExchangeT>) {
                exchange(t, static_cast<int>(p), step, record_of(t.id, step));
              } else if constexpr (std::is_same_v<T, WaitT>) {
                wait(t, step, record_of(t.exchange_id, step - t.lag));
              } else if constexpr (std::is_same_v<T, ComputeT>) {
                compute(t, entry.needs, step);
              } else if constexpr (std::is_same_v<T, CollectiveT>) {
                collective(t, step);
              } else if constexpr (std::is_same_v<T, LoadKvT>) {
                elementwise(2.0 * double(payload_bytes(plan_, Payload::kv)));  // own K/V into the slot
              } else if constexpr (std::is_same_v<T, AccumulateT>) {
                elementwise(3.0 * double(payload_bytes(plan_, Payload::dkv)), entry.needs, step);
              } else if constexpr (std::is_same_v<T, FinalizeT>) {
                elementwise(finalize_bytes());
              } else if constexpr (std::is_same_v<T, PrepareBackwardT>) {
                elementwise(prepare_backward_bytes());
              } else if constexpr (std::is_same_v<T, StoreGradsT>) {
                // a move: nothing to time
              }
            },
            entry.op);
      }
      if (computes) {
        DryStep s{static_cast<int>(p), step, INFINITY, 0, 0, 0};
        double sum = 0;
        for (int64_t r = 0; r < span_ * U_; ++r) {
          s.compute_min_s = std::min(s.compute_min_s, step_compute_[r]);
          s.compute_max_s = std::max(s.compute_max_s, step_compute_[r]);
          sum += step_compute_[r];
          s.end_s = std::max(s.end_s, clock_[r]);
        }
        // Every rank alike: that time (a sum of P equal terms would round differently).
        // (Folded: the representatives' mean is every rank's, the state being periodic.)
        s.compute_mean_s = s.compute_min_s == s.compute_max_s ? s.compute_min_s : sum / double(span_ * U_);
        result.steps.push_back(s);
      }
      rank_steps_done += span_ * U_;
      rank_steps_left = std::max<int64_t>(0, rank_steps_left - span_ * U_);
      check_walk_time(walk_start, rank_steps_done, rank_steps_left);
    }
    unfold();
    for (const PendingExchange& record : pending) {
      if (record.step >= 0) {
        throw std::logic_error("dry executor: phase '" + phase.name + "' posts an exchange at step " +
                               std::to_string(record.step) + " that nothing waits for");
      }
    }
    phase_result.end_s = *std::max_element(clock_.begin(), clock_.end());
    result.phases.push_back(phase_result);
  }
  result.ranks.resize(static_cast<size_t>(P_));
  for (int64_t r = 0; r < P_; ++r) {
    DryRank& out = result.ranks[static_cast<size_t>(r)];
    out.compute_s = compute_[r];
    out.other_s = other_[r];
    out.exposed_comm_s = exposed_[r];
    out.idle_s = idle_[r];
    out.comm_s = comm_[r];
    out.hidden_comm_s = hidden_[r];
    out.finish_s = clock_[r];
    out.bytes_sent = bytes_sent_[r];
    out.bytes_received = bytes_received_[r];
    out.messages_sent = messages_[r];
    out.messages_received = messages_received_[r];
    out.blocks_computed = computed_[r];
    out.blocks_skipped = skipped_[r];
    out.blocks_masked = masked_[r];
    out.pairs = pairs_[r];
    out.flops = flops_[r];
    result.makespan_s = std::max(result.makespan_s, clock_[r]);
  }
  result.trace = std::move(trace_);
  return result;
}

}  // namespace

DryResult run_dry_plan(const Plan& plan, const Hardware& hardware, const DryOptions& options) {
  return DryRun(plan, hardware, options).run();
}

// ---- [summary] -------------------------------------------------------------------------------

DrySummary summarize(const DryResult& result) {
  DrySummary s;
  s.time_s = result.makespan_s;
  if (result.ranks.empty()) return s;
  double compute_sum = 0, exposed_sum = 0, comm_sum = 0, hidden_sum = 0, flops_max = 0;
  for (const DryRank& r : result.ranks) {
    s.compute_max_s = std::max(s.compute_max_s, r.compute_s);
    s.exposed_max_s = std::max(s.exposed_max_s, r.exposed_comm_s);
    s.idle_max_s = std::max(s.idle_max_s, r.idle_s);
    s.bytes_sent_max = std::max(s.bytes_sent_max, r.bytes_sent);
    flops_max = std::max(flops_max, r.flops);
    compute_sum += r.compute_s, exposed_sum += r.exposed_comm_s, comm_sum += r.comm_s, hidden_sum += r.hidden_comm_s;
    s.flops_total += r.flops;
  }
  const double n = double(result.ranks.size());
  s.compute_mean_s = compute_sum / n;
  s.exposed_mean_s = exposed_sum / n;
  s.comm_mean_s = comm_sum / n;
  s.hidden_fraction = comm_sum > 0 ? hidden_sum / comm_sum : 1.0;
  if (s.flops_total > 0) s.flops_imbalance = flops_max / (s.flops_total / n);
  if (compute_sum > 0) s.compute_imbalance = s.compute_max_s / s.compute_mean_s;
  return s;
}

// ---- [contract] ------------------------------------------------------------------------------

RankSummary rank_summary(const DryRank& rank) {
  RankSummary s;
  s.blocks_computed = rank.blocks_computed;
  s.blocks_skipped = rank.blocks_skipped;
  s.blocks_masked = rank.blocks_masked;
  s.pairs = rank.pairs;
  s.flops = rank.flops;
  s.counters.messages_sent = rank.messages_sent;
  s.counters.bytes_sent = rank.bytes_sent;
  s.counters.messages_received = rank.messages_received;
  s.counters.bytes_received = rank.bytes_received;
  s.counters.blocked_seconds = rank.exposed_comm_s + rank.idle_s;
  s.counters.compute_seconds = rank.compute_s;
  s.counters.flops = rank.flops;
  return s;
}

DryExecutor::DryExecutor(Hardware hardware, DryOptions options) : hardware_(std::move(hardware)), options_(options) {}

void DryExecutor::configure(const RunConfig& config) {
  if (!config.inject.empty()) {
    throw UsageError("--inject needs messages to fault, but --dry-run sends none; drop one of them");
  }
  hardware_ = load_hardware(config.hw, config.dims.dim);
}

const Hardware& DryExecutor::hardware() const {
  if (!hardware_) throw std::logic_error("dry executor: no machine yet (construct it with one, or configure it)");
  return *hardware_;
}

PipelineNeeds DryExecutor::needs() const {
  PipelineNeeds needs;
  needs.element_bytes = hardware().element_bytes;  // the machine's precision on the wire and in memory
  needs.computes_outputs = false;
  return needs;
}

std::string DryExecutor::label(const Plan& plan) const {
  return "dry executor, " + std::to_string(plan.ranks()) + (plan.ranks() == 1 ? " rank" : " ranks") + " on " +
         hardware().name + " (cost model)";
}

ExecutionResult DryExecutor::execute(const Plan& plan, const AttentionInputs<float>&, const ExecuteOptions& options) {
  DryOptions dry = options_;
  dry.trace = dry.trace || options.trace;
  detail_ = run_dry_plan(plan, hardware(), dry);
  ExecutionResult result;
  result.executor = label(plan);
  result.ranks.reserve(detail_.ranks.size());
  for (const DryRank& rank : detail_.ranks) result.ranks.push_back(rank_summary(rank));
  result.trace = std::move(detail_.trace);
  detail_.trace.clear();
  result.time = {TimeKind::predicted, detail_.makespan_s};
  return result;
}

bool DryExecutor::print_own_report(std::ostream& out, const Plan& plan, const ExecutionResult&, bool json) const {
  if (json) {
    out << dry_report_json(plan, hardware(), detail_).dump() << "\n";
  } else {
    print_dry_report(out, plan, hardware(), detail_);
  }
  return true;
}

}  // namespace ringlab
