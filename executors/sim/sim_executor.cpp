// The sim executor: one thread per rank, each interpreting its ops.
// Sections: [shared] [layout moves] [rank] [driver] [contract]
#include "executors/sim/sim_executor.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <tuple>

#include "reference/error.hpp"
#include "reference/exact_attention.hpp"
#include "reference/flash_attention.hpp"
#include "reference/precision.hpp"
#include "sim/pipeline/config.hpp"
#include "sim/pipeline/op_interpreter.hpp"
#include "sim/plan/queries.hpp"
#include "sim/ranks/communicator.hpp"
#include "sim/ranks/world.hpp"

namespace ringlab {

namespace {

// What one simulation runs with: the world (watchdog, faults, tracing), the kernel threads per
// rank (0 = max(1, cores / P)), the progress counter and the diagnosis (ExecuteOptions').
struct SimOptions {
  WorldOptions world;
  SimPrecision precision;
  int threads_per_rank = 0;
  std::atomic<int64_t>* ops_done = nullptr;
  const AttentionInputs<double>* diagnose_inputs = nullptr;
  const ReferenceOutputs* diagnose_reference = nullptr;
};

// ---- [shared] --------------------------------------------------------------------------------

// Read-only facts every rank thread uses: the tokens of each ring position, and where each
// member's tokens land in its Ulysses group's block (sim/plan/queries.hpp).
struct Shared {
  std::vector<std::vector<int64_t>> block_positions;  // [ring position] -> ascending positions
  std::vector<int64_t> gathered_positions;            // all blocks in ring position order
  std::vector<std::vector<int64_t>> member_rows;      // [rank] -> its tokens' rows in its block
  bool uses_ring_collectives = false, uses_ulysses_collectives = false;

  explicit Shared(const Plan& plan)
      : gathered_positions(ringlab::gathered_positions(plan)), uses_ring_collectives(plan_uses(plan, Family::ring)),
        uses_ulysses_collectives(plan_uses(plan, Family::ulysses)) {
    for (int64_t g = 0; g < plan.ring(); ++g) block_positions.push_back(plan.block_positions(g));
    for (int64_t r = 0; r < plan.ranks(); ++r) member_rows.push_back(ringlab::member_rows(plan, r));
  }
};

// ---- [layout moves] --------------------------------------------------------------------------

// (B, n, H, D) -> (B, n, count, D): heads [first, first + count).
Tensor<float> slice_heads(const Tensor<float>& t, int64_t first, int64_t count) {
  const int64_t B = t.dim(0), n = t.dim(1), D = t.dim(3);
  Tensor<float> out({B, n, count, D});
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < n; ++i) std::copy_n(&t(b, i, first, 0), count * D, &out(b, i, 0, 0));
  return out;
}

// Writes `part` (B, n, count, D) into heads [first, first + count) of `t` (B, n, H, D).
void place_heads(const Tensor<float>& part, int64_t first, Tensor<float>& t) {
  const int64_t B = part.dim(0), n = part.dim(1), count = part.dim(2), D = part.dim(3);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < n; ++i) std::copy_n(&part(b, i, 0, 0), count * D, &t(b, i, first, 0));
}

// Rows `rows` of t (B, n, X, D), in that order -> (B, rows.size(), X, D).
Tensor<float> take_rows(const Tensor<float>& t, const std::vector<int64_t>& rows) { return gather_rows(t, rows, 1); }

// (B, H, n) lse <-> (B, n, H, 1), so that the 4-D moves apply to it.
Tensor<float> lse_as_rows(const Tensor<float>& lse) {
  const int64_t B = lse.dim(0), H = lse.dim(1), n = lse.dim(2);
  Tensor<float> t({B, n, H, 1});
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < n; ++i) t(b, i, h, 0) = lse(b, h, i);
  return t;
}
Tensor<float> rows_as_lse(const Tensor<float>& t) {
  const int64_t B = t.dim(0), n = t.dim(1), H = t.dim(2);
  Tensor<float> lse({B, H, n});
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < n; ++i) lse(b, h, i) = t(b, i, h, 0);
  return lse;
}

void append(Buffer& buffer, const Tensor<float>& t) { buffer.insert(buffer.end(), t.data(), t.data() + t.size()); }

Tensor<float> chunk_of(const Buffer& buffer, int64_t index, const Shape& shape) {
  const int64_t size = shape_elements(shape);
  return Tensor<float>(shape, std::vector<float>(buffer.begin() + index * size, buffer.begin() + (index + 1) * size));
}

// ---- [rank] ----------------------------------------------------------------------------------

struct PendingExchange {
  ExchangeOp op;
  std::vector<Request> sends, receives;
};

struct KvSlot {
  Tensor<float> k, v;  // (B, rows, kv heads, D)
};

class RankRun {
 public:
  RankRun(const Plan& plan, const Shared& shared, const AttentionInputs<float>& inputs, const SimOptions& options,
          Communicator& world, RunOutputs& outputs, std::mutex& outputs_mutex)
      : plan_(plan), shared_(shared), inputs_(inputs), options_(options), world_(world), outputs_(outputs),
        outputs_mutex_(outputs_mutex), rank_(world.world_rank()), g_(plan.ring_position(rank_)),
        u_(plan.ulysses_index(rank_)), interpreter_(plan, rank_, summary_, options.ops_done) {
    const int64_t cores = std::max<int64_t>(1, std::thread::hardware_concurrency());
    threads_ = options.threads_per_rank > 0 ? options.threads_per_rank
                                            : static_cast<int>(std::max<int64_t>(1, cores / plan.ranks()));
  }

  RankSummary run() {
    const AttentionDims& d = plan_.spec().dims;
    B_ = d.batch, D_ = d.dim, n_ = plan_.block_tokens();
    heads_ = plan_.heads_per_rank(), kv_heads_ = plan_.kv_heads_per_rank();
    acc_ = make_accumulator(B_, heads_, n_, D_);
    if (emulates()) running_ = {Tensor<float>({B_, n_, heads_, D_}), Tensor<float>({B_, heads_, n_}, -INFINITY)};
    // This rank's layout tokens, all heads (sequence-sharded).
    local_positions_ = plan_.layout().positions(rank_);
    local_q_ = gather_rows(inputs_.q, local_positions_, 1);
    local_k_ = gather_rows(inputs_.k, local_positions_, 1);
    local_v_ = gather_rows(inputs_.v, local_positions_, 1);
    if (!inputs_.dout.empty()) local_dout_ = gather_rows(inputs_.dout, local_positions_, 1);
    if (!shared_.uses_ulysses_collectives) {  // no all-to-all: the working set is the local set
      q_ = std::move(local_q_), k_ = std::move(local_k_), v_ = std::move(local_v_);
      dout_ = std::move(local_dout_);
    } else if (plan_.ulysses() == 1) {  // an all-to-all of one: it will copy them again
      q_ = local_q_, k_ = local_k_, v_ = local_v_, dout_ = local_dout_;
    }
    if (shared_.uses_ring_collectives) ring_.emplace(world_.split(static_cast<int>(u_), static_cast<int>(g_)));
    if (shared_.uses_ulysses_collectives) ulysses_.emplace(world_.split(static_cast<int>(g_), static_cast<int>(u_)));

    interpreter_.run_all(expand(plan_, rank_), *this);
    publish();
    return summary_;
  }

  std::vector<BlockError> block_errors;

 private:
  friend class ringlab::OpInterpreter;  // calls the handlers below

  // ---- [ops] ---------------------------------------------------------------------------------
  // The op interpreter's handlers (sim/pipeline/op_interpreter.hpp): the step label of the world's
  // traces and deadlock reports, then one execute per op kind.

  void begin_step(int64_t step, const std::string& phase) { world_.set_step(static_cast<int>(step), phase); }

  KvSlot& slot(Slot s) { return slots_[static_cast<size_t>(s)]; }
  // Buffers that go on living: a fresh multi-megabyte buffer costs a page fault per 4 KiB on first
  // touch (as much as the copy into it), so blocks a slot no longer needs go back to the world's
  // pool, where the next send of that size takes them, and zeroed slots reuse their storage.
  void recycle(KvSlot& s) {
    if (!s.k.empty()) world_.recycle(std::move(s.k).release());
    if (!s.v.empty()) world_.recycle(std::move(s.v).release());
  }
  static void zero(KvSlot& s, const Shape& k_shape, const Shape& v_shape) {
    auto zeroed = [](Tensor<float>& t, const Shape& shape) {
      if (t.shape() == shape) {
        std::fill(t.storage().begin(), t.storage().end(), 0.0f);
      } else {
        t = Tensor<float>(shape);
      }
    };
    zeroed(s.k, k_shape);
    zeroed(s.v, v_shape);
  }
  Shape kv_shape() const { return {B_, n_, kv_heads_, D_}; }

  // Copy-assignment keeps the slot's storage when it is large enough: no fresh pages.
  void execute(const Op&, const LoadKvOp& op, const TraceEvent&) {
    KvSlot& to = slot(op.slot);
    to.k = k_;
    to.v = v_;
  }

  void execute(const Op& at, const ExchangeOp& op, const TraceEvent&) {
    PendingExchange pending{op, {}, {}};
    if (op.send_to >= 0) {
      const KvSlot& from = slot(op.send_slot);
      pending.sends.push_back(world_.isend(static_cast<int>(op.send_to), 2 * op.tag, from.k.span()));
      pending.sends.push_back(world_.isend(static_cast<int>(op.send_to), 2 * op.tag + 1, from.v.span()));
    }
    if (op.recv_from >= 0) {
      pending.receives.push_back(world_.irecv(static_cast<int>(op.recv_from), 2 * op.tag));
      pending.receives.push_back(world_.irecv(static_cast<int>(op.recv_from), 2 * op.tag + 1));
    }
    pending_.emplace(std::tuple{at.phase, op.id, at.step}, std::move(pending));
  }

  void execute(const Op& op, const WaitOp& wait, const TraceEvent&) {
    auto found = pending_.find({op.phase, wait.exchange_id, wait.exchange_step});
    if (found == pending_.end()) {
      throw std::logic_error("rank " + std::to_string(rank_) + " waits for an exchange it never posted");
    }
    PendingExchange& pending = found->second;
    for (Request& request : pending.sends) request.wait();
    if (!pending.receives.empty()) {
      KvSlot& into = slot(pending.op.recv_slot);
      recycle(into);  // the slot's previous block goes back to the pool for later sends
      into.k = Tensor<float>(kv_shape(), pending.receives[0].wait());
      into.v = Tensor<float>(kv_shape(), pending.receives[1].wait());
    }
    pending_.erase(found);
  }

  // The world's compute scope records the trace event (its name, FLOPs and block labels).
  void execute(const Op& op, const ComputeOp& c, const TraceEvent& event) {
    const KvSlot& kv = slot(c.kv_slot);
    if (c.pass == Pass::backward && !c.accumulate_grad) {
      // A fresh contribution, zero even when the block is skipped: the next Accumulate adds it.
      zero(slot(c.grad_slot), kv.k.shape(), kv.v.shape());
    }
    if (c.kernels.empty()) return;
    const std::vector<int64_t>& k_pos =
        c.kv_slot == Slot::gathered_kv ? shared_.gathered_positions : shared_.block_positions[c.kv_block];
    const std::vector<int64_t> local_index = iota_positions(n_);
    const BlockLabels labels{event.q_block, event.kv_block, event.mask};
    if (c.pass == Pass::forward && emulates()) {
      world_.compute(event.name, event.flops, labels, [&] { forward_step(c, kv, k_pos, local_index); });
    } else if (c.pass == Pass::forward) {
      world_.compute(event.name, event.flops, labels, [&] {
        for (const KernelBlock& kb : c.kernels) {
          const std::span<const int64_t> q_pos = kb.erratum_local_query_index ? local_index : working_positions();
          flash_forward_accumulate(q_, kv.k, kv.v, q_pos, k_pos, kb.q_rows, shifted(kb.kv_rows, c.kv_row_offset),
                                   kb.mask, acc_, kernel_options(kb));
        }
      });
    } else {
      KvSlot& grad = slot(c.grad_slot);
      if (grad.k.empty()) grad = {Tensor<float>(kv.k.shape()), Tensor<float>(kv.v.shape())};
      if (emulates()) {
        world_.compute(event.name, event.flops, labels, [&] { backward_step(c, kv, grad, k_pos, local_index); });
        if (options_.diagnose_inputs) diagnose(op, c);
        return;
      }
      world_.compute(event.name, event.flops, labels, [&] {
        for (const KernelBlock& kb : c.kernels) {
          const std::span<const int64_t> q_pos = kb.erratum_local_query_index ? local_index : working_positions();
          flash_backward_accumulate(q_, kv.k, kv.v, dout_, lse_, delta_, q_pos, k_pos, kb.q_rows,
                                    shifted(kb.kv_rows, c.kv_row_offset), kb.mask, dq_, grad.k, grad.v,
                                    kernel_options(kb));
        }
      });
    }
    if (options_.diagnose_inputs) diagnose(op, c);
  }

  void execute(const Op&, const AccumulateOp& op, const TraceEvent&) {
    KvSlot& to = slot(op.to);
    const KvSlot& from = slot(op.from);
    for (int64_t i = 0; i < to.k.size(); ++i) to.k[i] += from.k[i];
    for (int64_t i = 0; i < to.v.size(); ++i) to.v[i] += from.v[i];
    round_accumulator(to.k, "dk (the travelling accumulator)");
    round_accumulator(to.v, "dv (the travelling accumulator)");
  }

  void execute(const Op&, const FinalizeOp&, const TraceEvent&) {
    if (emulates()) {  // the running (out, lse); the output is stored in the storage precision
      out_ = std::move(running_.out);
      lse_ = std::move(running_.lse);
      round_tensor(out_, options_.precision.storage, "out");
      return;
    }
    AttentionOutput<float> result = finalize_accumulator(acc_, B_, heads_, n_, D_, threads_);
    out_ = std::move(result.out);
    lse_ = std::move(result.lse);
  }

  void execute(const Op&, const PrepareBackwardOp&, const TraceEvent&) {
    delta_ = softmax_delta(dout_, out_, threads_);
    dq_ = Tensor<float>(q_.shape());
    slot(Slot::dkv0) = {Tensor<float>(kv_shape()), Tensor<float>(kv_shape())};
    slot(Slot::gathered_dkv) = {};
  }

  void execute(const Op&, const StoreGradsOp& op, const TraceEvent&) {
    dk_ = std::move(slot(op.slot).k);
    dv_ = std::move(slot(op.slot).v);
  }

  void execute(const Op&, const CollectiveOp& op, const TraceEvent&) {
    switch (op.collective) {
      case Collective::all_gather_kv: all_gather_kv(); break;
      case Collective::reduce_scatter_dkv: reduce_scatter_dkv(); break;
      case Collective::all_to_all_qkv:
        q_ = to_working(local_q_, heads_);
        k_ = to_working(local_k_, kv_heads_);
        v_ = to_working(local_v_, kv_heads_);
        break;
      case Collective::all_to_all_dout: dout_ = to_working(local_dout_, heads_); break;
      case Collective::all_to_all_out:
        local_out_ = to_local(out_, plan_.spec().dims.heads);
        local_lse_ = rows_as_lse(to_local(lse_as_rows(lse_), plan_.spec().dims.heads));
        break;
      case Collective::all_to_all_grads:
        local_dq_ = to_local(dq_, plan_.spec().dims.heads);
        local_dk_ = to_local(dk_, plan_.spec().dims.kv_heads);
        local_dv_ = to_local(dv_, plan_.spec().dims.kv_heads);
        break;
    }
  }

  // ---- [precision] ---------------------------------------------------------------------------
  // Low-precision emulation (SimPrecision): a compute step's partial results are computed in fp32
  // as a kernel does, with ringlab's GPU kernels' rounding points (P and dS rounded to the storage
  // precision before the GEMMs that take them, KernelOptions::operands); rounded to the storage
  // precision as the kernel stores them; and merged into the running output (forward; the LSE
  // form, fp32 arithmetic) or added into dq and the dK/dV accumulators (backward), which are
  // rounded after every merge with --accumulate storage.

  bool emulates() const { return options_.precision.emulates(); }

  void round_accumulator(Tensor<float>& t, const char* name) const {
    if (options_.precision.round_accumulators) round_tensor(t, options_.precision.storage, name);
  }

  // A kernel that stores its step's result (FlashAttention's own outputs) rounds it to the storage
  // precision; a fused one (--accumulate fused) adds it into the fp32 accumulators unrounded.
  void round_partial(Tensor<float>& t, const char* name) const {
    if (options_.precision.round_partials) round_tensor(t, options_.precision.storage, name);
  }

  void forward_step(const ComputeOp& c, const KvSlot& kv, const std::vector<int64_t>& k_pos,
                    const std::vector<int64_t>& local_index) {
    SoftmaxState<float> step = make_accumulator(B_, heads_, n_, D_);
    for (const KernelBlock& kb : c.kernels) {
      const std::span<const int64_t> q_pos = kb.erratum_local_query_index ? local_index : working_positions();
      flash_forward_accumulate(q_, kv.k, kv.v, q_pos, k_pos, kb.q_rows, shifted(kb.kv_rows, c.kv_row_offset), kb.mask,
                               step, emulation_kernel_options(kb));
    }
    AttentionOutput<float> part = finalize_accumulator(step, B_, heads_, n_, D_, threads_);
    round_partial(part.out, "out (a step's partial output)");
    for (int64_t b = 0; b < B_; ++b)
      for (int64_t h = 0; h < heads_; ++h)
        for (int64_t i = 0; i < n_; ++i)
          merge_lse_row(&running_.out(b, i, h, 0), running_.lse(b, h, i), &part.out(b, i, h, 0), part.lse(b, h, i), D_,
                        options_.precision.merge);
    round_accumulator(running_.out, "out (the running output)");
  }

  void backward_step(const ComputeOp& c, const KvSlot& kv, KvSlot& grad, const std::vector<int64_t>& k_pos,
                     const std::vector<int64_t>& local_index) {
    Tensor<float> dq(q_.shape()), dk(kv.k.shape()), dv(kv.v.shape());
    for (const KernelBlock& kb : c.kernels) {
      const std::span<const int64_t> q_pos = kb.erratum_local_query_index ? local_index : working_positions();
      flash_backward_accumulate(q_, kv.k, kv.v, dout_, lse_, delta_, q_pos, k_pos, kb.q_rows,
                                shifted(kb.kv_rows, c.kv_row_offset), kb.mask, dq, dk, dv,
                                emulation_kernel_options(kb));
    }
    round_partial(dq, "dq (a step's partial)");
    round_partial(dk, "dk (a step's partial)");
    round_partial(dv, "dv (a step's partial)");
    for (int64_t i = 0; i < dq.size(); ++i) dq_[i] += dq[i];
    for (int64_t i = 0; i < dk.size(); ++i) grad.k[i] += dk[i];
    for (int64_t i = 0; i < dv.size(); ++i) grad.v[i] += dv[i];
    round_accumulator(dq_, "dq (the accumulator)");
    round_accumulator(grad.k, "dk (the travelling accumulator)");
    round_accumulator(grad.v, "dv (the travelling accumulator)");
  }

  // ---- [collectives] -------------------------------------------------------------------------

  // Sequence-sharded (B, n_local, H_total, D) -> this group's block, this rank's heads
  // (B, n, per, D): chunk j of the all-to-all is the local rows' heads [j per, (j+1) per).
  Tensor<float> to_working(const Tensor<float>& local, int64_t per) {
    const int64_t U = plan_.ulysses();
    Buffer send;
    for (int64_t j = 0; j < U; ++j) append(send, slice_heads(local, j * per, per));
    const Buffer received = ulysses_->all_to_all(send);
    Tensor<float> working({B_, n_, per, D_});
    const Shape chunk{B_, local.dim(1), per, D_};
    for (int64_t m = 0; m < U; ++m) {
      const Tensor<float> part = chunk_of(received, m, chunk);
      const std::vector<int64_t>& rows = shared_.member_rows[plan_.rank_at(g_, m)];
      scatter_rows(part, rows, 1, working);
    }
    return working;
  }

  // The inverse: this rank's heads of the block (B, n, per, D) -> its own tokens, all heads
  // (B, n_local, per * U, D).
  Tensor<float> to_local(const Tensor<float>& working, int64_t total_heads) {
    const int64_t U = plan_.ulysses(), per = working.dim(2);
    Buffer send;
    for (int64_t m = 0; m < U; ++m) append(send, take_rows(working, shared_.member_rows[plan_.rank_at(g_, m)]));
    const Buffer received = ulysses_->all_to_all(send);
    const int64_t n_local = static_cast<int64_t>(local_positions_.size());
    Tensor<float> local({B_, n_local, total_heads, working.dim(3)});
    for (int64_t j = 0; j < U; ++j)
      place_heads(chunk_of(received, j, {B_, n_local, per, working.dim(3)}), j * per, local);
    return local;
  }

  // Every ring position's K/V, in ring order, as (B, R n, kv heads, D).
  void all_gather_kv() {
    KvSlot& gathered = slot(Slot::gathered_kv);
    gathered.k = blocks_to_rows(ring_->all_gather(k_.span()));
    gathered.v = blocks_to_rows(ring_->all_gather(v_.span()));
  }

  // Sums every rank's dK/dV of this rank's block (ring order) and keeps it in dkv0.
  void reduce_scatter_dkv() {
    const KvSlot& gathered = slot(Slot::gathered_dkv);
    slot(Slot::dkv0) = {Tensor<float>(kv_shape(), ring_->reduce_scatter(rows_to_blocks(gathered.k))),
                        Tensor<float>(kv_shape(), ring_->reduce_scatter(rows_to_blocks(gathered.v)))};
    round_accumulator(slot(Slot::dkv0).k, "dk (the reduce-scattered sum)");
    round_accumulator(slot(Slot::dkv0).v, "dv (the reduce-scattered sum)");
  }

  // (R blocks of (B, n, X, D)) <-> (B, R n, X, D).
  Tensor<float> blocks_to_rows(const Buffer& blocks) {
    const int64_t R = plan_.ring();
    Tensor<float> rows({B_, R * n_, kv_heads_, D_});
    const int64_t row = kv_heads_ * D_;
    for (int64_t g = 0; g < R; ++g)
      for (int64_t b = 0; b < B_; ++b)
        std::copy_n(blocks.begin() + ((g * B_ + b) * n_) * row, n_ * row, &rows(b, g * n_, 0, 0));
    return rows;
  }
  Buffer rows_to_blocks(const Tensor<float>& rows) {
    const int64_t R = plan_.ring();
    const int64_t row = kv_heads_ * D_;
    Buffer blocks(static_cast<size_t>(rows.size()));
    for (int64_t g = 0; g < R; ++g)
      for (int64_t b = 0; b < B_; ++b)
        std::copy_n(&rows(b, g * n_, 0, 0), n_ * row, blocks.begin() + ((g * B_ + b) * n_) * row);
    return blocks;
  }

  // Publishes this rank's outputs into the global tensors (disjoint rows per rank); the rank's
  // tensors are done and move into it.
  void publish() {
    // With one Ulysses rank the working tensors hold the local rows: scattered from where they are.
    const bool working = plan_.ulysses() == 1;
    LocalOutputs local{std::move(working ? out_ : local_out_), std::move(working ? lse_ : local_lse_), {}, {}, {}};
    if (plan_.spec().backward) {
      local.dq = std::move(working ? dq_ : local_dq_);
      local.dk = std::move(working ? dk_ : local_dk_);
      local.dv = std::move(working ? dv_ : local_dv_);
      if (emulates()) {  // gradients are stored in the storage precision
        round_tensor(local.dq, options_.precision.storage, "dq");
        round_tensor(local.dk, options_.precision.storage, "dk");
        round_tensor(local.dv, options_.precision.storage, "dv");
      }
    }
    std::lock_guard lock(outputs_mutex_);
    scatter_local_outputs(local, local_positions_, outputs_);
  }

  // ---- [diagnosis] ---------------------------------------------------------------------------

  // The block's own result against the exact result of the same (query, key) pairs, masked by
  // position as it should be.
  void diagnose(const Op& op, const ComputeOp& c) {
    const AttentionInputs<double>& x = *options_.diagnose_inputs;
    const ReferenceOutputs& ref = *options_.diagnose_reference;
    const std::vector<int64_t>& q_pos = working_positions();
    const std::vector<int64_t>& k_pos = shared_.block_positions[c.kv_block];
    const int64_t h0 = u_ * heads_, kh0 = u_ * kv_heads_;
    auto working_d = [&](const Tensor<double>& global, const std::vector<int64_t>& positions, int64_t first,
                         int64_t count) {
      Tensor<double> rows = gather_rows(global, positions, 1);
      Tensor<double> sliced({rows.dim(0), rows.dim(1), count, rows.dim(3)});
      for (int64_t b = 0; b < rows.dim(0); ++b)
        for (int64_t i = 0; i < rows.dim(1); ++i)
          std::copy_n(&rows(b, i, first, 0), count * rows.dim(3), &sliced(b, i, 0, 0));
      return sliced;
    };
    const Mask& mask = plan_.mask();
    const KvSlot& kv = slot(c.kv_slot);
    const Tensor<float> k_block =
        c.kv_slot == Slot::gathered_kv ? take_rows(kv.k, rows_range(c.kv_row_offset, n_)) : kv.k;
    const Tensor<float> v_block =
        c.kv_slot == Slot::gathered_kv ? take_rows(kv.v, rows_range(c.kv_row_offset, n_)) : kv.v;
    const Tensor<double> qd = working_d(x.q, q_pos, h0, heads_);
    const Tensor<double> kd = working_d(x.k, k_pos, kh0, kv_heads_), vd = working_d(x.v, k_pos, kh0, kv_heads_);
    const std::vector<int64_t> local_index = iota_positions(n_);
    BlockError error{rank_, op.phase, op.step, c.pass, c.q_block, c.kv_block, c.shape, 0, true};
    auto check = [&](const char* name, const Tensor<float>& actual, const Tensor<double>& expected) {
      const CompareResult r = compare(actual, expected, fp32_tolerance(name));
      error.max_abs_error = std::max(error.max_abs_error, r.max_abs_error);
      error.mask_mismatch = error.mask_mismatch || !std::isfinite(r.tolerance_used);
      error.ok = error.ok && r.ok;
    };
    if (c.pass == Pass::forward) {
      SoftmaxState<float> acc = make_accumulator(B_, heads_, n_, D_);
      AttentionOutput<double> exact{Tensor<double>({B_, n_, heads_, D_}), Tensor<double>({B_, heads_, n_}, -INFINITY)};
      for (const KernelBlock& kb : c.kernels) {
        flash_forward_accumulate(q_, k_block, v_block, kb.erratum_local_query_index ? local_index : q_pos, k_pos,
                                 kb.q_rows, kb.kv_rows, kb.mask, acc, kernel_options(kb));
        const std::vector<int64_t> qr = rows_range(kb.q_rows.begin, kb.q_rows.size());
        const std::vector<int64_t> kr = rows_range(kb.kv_rows.begin, kb.kv_rows.size());
        const std::vector<int64_t> qp = subset(q_pos, qr), kp = subset(k_pos, kr);
        const AttentionOutput<double> part =
            exact_attention(gather_rows(qd, qr, 1), gather_rows(kd, kr, 1), gather_rows(vd, kr, 1), mask, qp, kp);
        scatter_rows(part.out, qr, 1, exact.out);  // kernel blocks of one compute never share query rows
        scatter_rows(part.lse, qr, 2, exact.lse);
      }
      const AttentionOutput<float> got = finalize_accumulator(acc, B_, heads_, n_, D_, threads_);
      check("out", got.out, exact.out);
      check("lse", got.lse, exact.lse);
    } else {
      Tensor<float> dq(q_.shape()), dk(k_block.shape()), dv(v_block.shape());
      AttentionGrads<double> exact{Tensor<double>(qd.shape()), Tensor<double>(kd.shape()), Tensor<double>(vd.shape())};
      // The reference's lse and delta for this rank's rows and heads.
      const Tensor<double> lse_ref = working_lse(ref.forward.lse, q_pos, h0);
      Tensor<double> delta_ref({B_, heads_, n_});
      const Tensor<double> out_ref = working_d(ref.forward.out, q_pos, h0, heads_);
      const Tensor<double> dout_ref = working_d(x.dout, q_pos, h0, heads_);
      for (int64_t b = 0; b < B_; ++b)
        for (int64_t h = 0; h < heads_; ++h)
          for (int64_t i = 0; i < n_; ++i) {
            double sum = 0;
            for (int64_t e = 0; e < D_; ++e) sum += out_ref(b, i, h, e) * dout_ref(b, i, h, e);
            delta_ref(b, h, i) = sum;
          }
      for (const KernelBlock& kb : c.kernels) {
        flash_backward_accumulate(q_, k_block, v_block, dout_, lse_, delta_,
                                  kb.erratum_local_query_index ? local_index : q_pos, k_pos, kb.q_rows, kb.kv_rows,
                                  kb.mask, dq, dk, dv, kernel_options(kb));
        const std::vector<int64_t> qr = rows_range(kb.q_rows.begin, kb.q_rows.size());
        const std::vector<int64_t> kr = rows_range(kb.kv_rows.begin, kb.kv_rows.size());
        const AttentionGrads<double> part = exact_block_backward(
            gather_rows(qd, qr, 1), gather_rows(kd, kr, 1), gather_rows(vd, kr, 1), gather_rows(dout_ref, qr, 1),
            gather_rows(lse_ref, qr, 2), gather_rows(delta_ref, qr, 2), mask, subset(q_pos, qr), subset(k_pos, kr));
        add_rows(part.dq, qr, exact.dq);
        add_rows(part.dk, kr, exact.dk);
        add_rows(part.dv, kr, exact.dv);
      }
      check("dq", dq, exact.dq);
      check("dk", dk, exact.dk);
      check("dv", dv, exact.dv);
    }
    block_errors.push_back(error);
  }

  Tensor<double> working_lse(const Tensor<double>& global_lse, const std::vector<int64_t>& positions, int64_t h0) {
    Tensor<double> lse({B_, heads_, n_});
    for (int64_t b = 0; b < B_; ++b)
      for (int64_t h = 0; h < heads_; ++h)
        for (int64_t i = 0; i < n_; ++i) lse(b, h, i) = global_lse(b, h0 + h, positions[i]);
    return lse;
  }

  static void add_rows(const Tensor<double>& part, const std::vector<int64_t>& rows, Tensor<double>& into) {
    const int64_t inner = part.dim(2) * part.dim(3);
    for (int64_t b = 0; b < part.dim(0); ++b)
      for (size_t i = 0; i < rows.size(); ++i)
        for (int64_t e = 0; e < inner; ++e)
          into.data()[(b * into.dim(1) + rows[i]) * inner + e] +=
              part.data()[(b * part.dim(1) + int64_t(i)) * inner + e];
  }

  // ---- helpers -------------------------------------------------------------------------------

  static std::vector<int64_t> rows_range(int64_t first, int64_t count) { return iota_positions(count, first); }
  static std::vector<int64_t> subset(const std::vector<int64_t>& values, const std::vector<int64_t>& indices) {
    std::vector<int64_t> out;
    out.reserve(indices.size());
    for (int64_t i : indices) out.push_back(values[i]);
    return out;
  }
  static RowRange shifted(RowRange range, int64_t offset) { return {range.begin + offset, range.end + offset}; }
  const std::vector<int64_t>& working_positions() const { return shared_.block_positions[g_]; }
  KernelOptions kernel_options(const KernelBlock& kb) const { return {threads_, kb.skip_masked_tiles}; }
  // The emulation's kernel: the GPU kernels' rounding points (P, dS in the storage precision).
  KernelOptions emulation_kernel_options(const KernelBlock& kb) const {
    KernelOptions options = kernel_options(kb);
    options.operands = options_.precision.storage;
    return options;
  }

  const Plan& plan_;
  const Shared& shared_;
  const AttentionInputs<float>& inputs_;
  const SimOptions& options_;
  Communicator& world_;
  RunOutputs& outputs_;
  std::mutex& outputs_mutex_;
  const int64_t rank_, g_, u_;
  int threads_ = 1;
  std::optional<Communicator> ring_, ulysses_;
  int64_t B_ = 0, D_ = 0, n_ = 0, heads_ = 0, kv_heads_ = 0;

  std::vector<int64_t> local_positions_;
  Tensor<float> local_q_, local_k_, local_v_, local_dout_;  // sequence-sharded inputs
  Tensor<float> q_, k_, v_, dout_;                          // working set
  SoftmaxState<float> acc_;
  AttentionOutput<float> running_;                  // low-precision emulation: the running (out, lse) of the LSE merge
  Tensor<float> out_, lse_, delta_, dq_, dk_, dv_;  // working outputs
  Tensor<float> local_out_, local_lse_, local_dq_, local_dk_, local_dv_;  // sequence-sharded outputs
  std::array<KvSlot, static_cast<size_t>(Slot::count)> slots_;
  std::map<std::tuple<int, int, int64_t>, PendingExchange> pending_;  // (phase, exchange id, step)
  RankSummary summary_;
  OpInterpreter interpreter_;  // counts into summary_
};

}  // namespace

// ---- [driver] --------------------------------------------------------------------------------

namespace {

std::optional<RunFailure> failure_of(const RunReport& report) {
  if (report.ok()) return std::nullopt;
  const FailureKind kind = report.status == RunStatus::deadlock     ? FailureKind::deadlock
                           : report.status == RunStatus::comm_fault ? FailureKind::comm_fault
                                                                    : FailureKind::error;
  return RunFailure{kind, report.describe(), report.exit_status()};
}

std::string sim_label(const Plan& plan, const SimPrecision& precision) {
  return "sim executor, " + std::to_string(plan.ranks()) + (plan.ranks() == 1 ? " rank" : " ranks") + " (" +
         precision.describe() + ")";
}

ExecutionResult simulate(const Plan& plan, const AttentionInputs<float>& inputs, const SimOptions& options) {
  const Shared shared(plan);
  ExecutionResult result;
  result.executor = sim_label(plan, options.precision);
  result.outputs = allocate_outputs(plan);
  result.ranks.resize(static_cast<size_t>(plan.ranks()));
  std::vector<std::vector<BlockError>> errors(static_cast<size_t>(plan.ranks()));
  std::mutex outputs_mutex;
  WorldOptions world_options = options.world;
  world_options.ranks = static_cast<int>(plan.ranks());
  World world(world_options);
  std::optional<std::string> overflow;  // the first rank's low-precision overflow
  RunReport report = world.run([&](Communicator& comm) {
    RankRun rank(plan, shared, inputs, options, comm, result.outputs, outputs_mutex);
    try {
      result.ranks[comm.world_rank()] = rank.run();
    } catch (const PrecisionOverflow& error) {
      std::lock_guard lock(outputs_mutex);
      if (!overflow) overflow = "rank " + std::to_string(comm.world_rank()) + ": " + error.what();
      throw;
    }
    errors[comm.world_rank()] = std::move(rank.block_errors);
  });
  for (int64_t r = 0; r < plan.ranks(); ++r) {
    if (r < static_cast<int64_t>(report.counters.size())) result.ranks[r].counters = report.counters[r];
    result.block_errors.insert(result.block_errors.end(), errors[r].begin(), errors[r].end());
  }
  std::stable_sort(result.block_errors.begin(), result.block_errors.end(),
                   [](const BlockError& a, const BlockError& b) {
                     return std::tie(a.phase, a.step, a.rank) < std::tie(b.phase, b.step, b.rank);
                   });
  result.time = {TimeKind::wall_clock, report.wall_seconds};
  result.failure = failure_of(report);
  // A value the storage precision cannot hold is the run's numerical failure (exit 1), not a bug.
  if (overflow && result.failure) result.failure = RunFailure{FailureKind::error, *overflow, kExitMismatch};
  if (result.failure) result.outputs = {};
  result.trace = std::move(report.trace);
  for (const FaultRecord& fault : report.faults) result.faults.push_back(fault.describe());
  return result;
}

// The bytes of a problem's tensors: the global inputs and outputs (float32 and the float64
// oracle's copies) plus every rank's working set.
double tensor_bytes(const AttentionDims& d) {
  const double q = double(d.batch) * double(d.seq) * double(d.heads) * double(d.dim);
  const double kv = double(d.batch) * double(d.seq) * double(d.kv_heads) * double(d.dim);
  const double tensors = 4 * q + 6 * kv;  // q, out, dout, dq and k, v, dk, dv (+ slots)
  return tensors * (4 /*float*/ + 8 /*double*/ + 4 /*ranks' copies*/) * 1.5;
}

double physical_bytes() { return double(sysconf(_SC_PHYS_PAGES)) * double(sysconf(_SC_PAGE_SIZE)); }

// Refuses sizes whose tensors would not fit in memory, before allocating any of them.
void check_memory(const AttentionDims& d) {
  const double bytes = tensor_bytes(d), available = physical_bytes();
  if (bytes > 0.8 * available) {
    char text[256];
    std::snprintf(text, sizeof text,
                  "%s needs about %.1f GB of tensors but this machine has %.1f GB; use smaller --seq/--batch/--heads, "
                  "or --dry-run to cost it without tensors",
                  d.to_string().c_str(), bytes / 1e9, available / 1e9);
    throw UsageError(text);
  }
}

// A number from a /proc/sys file; `fallback` when it cannot be read.
int64_t proc_number(const char* path, int64_t fallback) {
  std::FILE* file = std::fopen(path, "r");
  if (!file) return fallback;
  long long value = 0;
  const bool read = std::fscanf(file, "%lld", &value) == 1;
  std::fclose(file);
  return read && value > 0 ? value : fallback;
}

// The threads one process can start here: the kernel's limit on threads, the user's on processes,
// and the memory maps (a thread's stack and its guard page take two), with a tenth kept back.
int64_t thread_limit() {
  int64_t limit = std::min(proc_number("/proc/sys/kernel/threads-max", 1 << 20),
                           proc_number("/proc/sys/vm/max_map_count", 1 << 21) / 2);
  rlimit processes{};
  if (getrlimit(RLIMIT_NPROC, &processes) == 0 && processes.rlim_cur != RLIM_INFINITY) {
    limit = std::min<int64_t>(limit, static_cast<int64_t>(processes.rlim_cur));
  }
  return limit - limit / 10;
}

// What a rank's expanded ops, messages and counters take per step of the ring, and what a rank
// thread takes besides its tensors (stack pages, its world state). Measured peak memory of
// `ringlab run --seq 64` on the simulator: 62 MB at P = 256, 141 MB at P = 512, 540 MB at P = 1024,
// about 430 bytes per rank-step at P = 1024 (and rising slowly with P); 448 keeps the estimate
// above what was measured.
constexpr double kBytesPerRankStep = 448;
constexpr double kBytesPerRank = 64 * 1024;

}  // namespace

// ---- [contract] ------------------------------------------------------------------------------

std::string SimPrecision::describe() const {
  std::string text = precision_name(storage);
  if (storage != Precision::fp32) {
    text += std::string(", accumulate ") + (round_accumulators ? text : round_partials ? "fp32" : "fused");
  }
  if (merge != MergeForm::exp) text += std::string(", ") + merge_form_name(merge) + " merge";
  return text;
}

// An element's error after the emulated run, in units of u (the unit roundoff), has three parts:
// the final rounding of the output (at most u of it), the rounding of each step's partial result
// (a convex combination of errors of at most u each: at most u again), and the kernels' own P
// and dS, rounded to the storage precision before their GEMMs as on the GPU (relative errors of
// at most u per element, which average out over the keys a row sums). fp32 accumulation thus
// bounds out by about 2u |out| plus the P term; 8u leaves
// room for the gradients, whose sums cancel (dq's dS = P (dP - delta)) so that an element's
// error is relative to the magnitudes summed rather than to itself: the abs term, 8u, covers
// elements of order 1 (the generated inputs are N(0, 1)). Rounding the accumulators after every
// merge adds up to u per merge: that is what --accumulate storage shows growing with P, and past
// about 8 merges' worth it exceeds these tolerances, as it should.
Tolerance precision_tolerance(Precision storage, const std::string& tensor) {
  if (storage == Precision::fp32 || tensor == "lse") return fp32_tolerance(tensor);  // lse stays fp32
  const double u = unit_roundoff(storage);
  return {8 * u, 8 * u};
}

namespace {
// precision_tolerance at one storage precision, as a ToleranceFunction (a plain function pointer).
template <Precision storage>
Tolerance tolerance_at(const std::string& tensor) {
  return precision_tolerance(storage, tensor);
}
}  // namespace

ToleranceFunction precision_tolerance_function(Precision storage) {
  switch (storage) {
    case Precision::fp32: return fp32_tolerance;
    case Precision::bf16: return tolerance_at<Precision::bf16>;
    case Precision::fp16: return tolerance_at<Precision::fp16>;
  }
  return fp32_tolerance;
}

SimExecutor::SimExecutor(WorldOptions world, int threads_per_rank)
    : world_(std::move(world)), threads_per_rank_(threads_per_rank) {}

void SimExecutor::configure(const RunConfig& config) {
  world_ = make_world_options(static_cast<int>(config.ranks), config.timeout, config.inject, false);
  precision_.storage = parse_precision(config.precision);
  precision_.round_accumulators = config.accumulate == "storage" && precision_.storage != Precision::fp32;
  precision_.round_partials = config.accumulate != "fused";
  precision_.merge = parse_merge_form(config.merge);
  inputs_from_files_ = !config.in_dir.empty();
}

void SimExecutor::prepare_inputs(AttentionInputs<double>& inputs) const {
  const Precision storage = precision_.storage;
  try {
    round_tensor(inputs.q, storage, "q");
    round_tensor(inputs.k, storage, "k");
    round_tensor(inputs.v, storage, "v");
    round_tensor(inputs.dout, storage, "dout");
  } catch (const PrecisionOverflow& error) {
    if (inputs_from_files_) throw UsageError(std::string("the --in files: ") + error.what());
    throw;
  }
}

void SimExecutor::check_sizes(const AttentionDims& dims) const { check_memory(dims); }

// One thread per rank; every rank holds its expanded ops for each step of its ring (P steps for
// ring and all-gather, P/U for the hybrid, one for Ulysses) and computes a block at each, twice
// with a backward pass.
ExecutionCost SimExecutor::cost(const PlanSpec& spec) const {
  const double P = double(spec.ranks);
  const double ring = spec.algo == Algorithm::ulysses  ? 1
                      : spec.algo == Algorithm::hybrid ? P / double(std::max<int64_t>(1, spec.ulysses))
                                                       : P;
  ExecutionCost cost;
  cost.threads = spec.ranks;
  cost.block_computations = P * ring * (spec.backward ? 2 : 1);
  cost.bytes = tensor_bytes(spec.dims) + cost.block_computations * kBytesPerRankStep + P * kBytesPerRank;
  const int64_t threads = thread_limit();
  const double available = physical_bytes();
  const bool too_many_threads = cost.threads > threads, too_much_memory = cost.bytes > 0.8 * available;
  if (!too_many_threads && !too_much_memory) return cost;
  char what[160], limit[96];
  std::snprintf(what, sizeof what, "%lld threads (one per rank), %.3g block computations, about %.3g GB of memory",
                static_cast<long long>(cost.threads), cost.block_computations, cost.bytes / 1e9);
  if (too_many_threads) {
    std::snprintf(limit, sizeof limit, "this machine starts at most %lld threads", static_cast<long long>(threads));
  } else {
    std::snprintf(limit, sizeof limit, "this machine has %.3g GB", available / 1e9);
  }
  // The fix is fewer ranks unless the tensors themselves are most of the memory (a large S, H or D).
  const bool tensors_dominate = !too_many_threads && tensor_bytes(spec.dims) >= cost.bytes / 2;
  cost.refusal = "the simulator cannot finish " +
                 (tensors_dominate ? spec.dims.to_string() + " at P=" : std::string("P=")) +
                 std::to_string(spec.ranks) + ": it would take " + what + ", and " + limit +
                 (tensors_dominate ? "; use smaller sizes (--batch, --seq, --heads, --dim)" : "; use fewer --ranks");
  return cost;
}

PipelineNeeds SimExecutor::needs() const {
  PipelineNeeds needs;
  needs.element_bytes = precision_bytes(precision_.storage);
  needs.tolerance = precision_tolerance_function(precision_.storage);
  if (precision_.storage != Precision::fp32) {
    needs.dtype = precision_name(precision_.storage);
    needs.single_rank_baseline = true;
  }
  needs.diagnoses = true;
  needs.counts_progress = true;
  return needs;
}

std::string SimExecutor::label(const Plan& plan) const { return sim_label(plan, precision_); }

ExecutionResult SimExecutor::execute(const Plan& plan, const AttentionInputs<float>& inputs,
                                     const ExecuteOptions& options) {
  SimOptions sim{
      world_, precision_, threads_per_rank_, options.ops_done, options.diagnose_inputs, options.diagnose_reference};
  sim.world.trace = options.trace;
  if (options.diagnose_inputs) sim.world.faults = {};  // a diagnosis checks the blocks of a fault-free run
  return simulate(plan, inputs, sim);
}

}  // namespace ringlab
