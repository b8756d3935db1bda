// Sections: [geometry] [fused finalize] [fused init] [stored grads] [construction] [local ops] [outputs] [all-to-all geometry]
#include "executors/gpu/gpu_rank.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <variant>

#include "gpu/kernels/kernel_mask.hpp"
#include "reference/layout.hpp"
#include "sim/plan/queries.hpp"

namespace ringlab::gpu {
namespace {

DeviceBuffer upload_tensor(const Tensor<float>& tensor, Dtype dtype) {
  const std::vector<unsigned char> bytes = encode(tensor.span(), dtype);
  DeviceBuffer buffer(bytes.size());
  buffer.upload(bytes.data(), bytes.size());
  return buffer;
}

DeviceBuffer upload_ints(const std::vector<int32_t>& ints) {
  DeviceBuffer buffer(ints.size() * sizeof(int32_t));
  buffer.upload(ints.data(), ints.size() * sizeof(int32_t));
  return buffer;
}

DeviceBuffer upload_ints(const std::vector<int64_t>& values) {
  return upload_ints(std::vector<int32_t>(values.begin(), values.end()));
}

DeviceBuffer zeroed(size_t bytes) {
  DeviceBuffer buffer(bytes);
  if (bytes) RINGLAB_CUDA_CHECK(cudaMemset(buffer.get(), 0, bytes));
  return buffer;
}

size_t floats(int64_t count) { return static_cast<size_t>(count) * sizeof(float); }

}  // namespace

// ---- [geometry] --------------------------------------------------------------------------------

RankGeometry::RankGeometry(const Plan& plan, int64_t rank_, Dtype dtype_)
    : rank(rank_), g(plan.ring_position(rank_)), u(plan.ulysses_index(rank_)), dtype(dtype_) {
  const AttentionDims& d = plan.spec().dims;
  B = d.batch, D = d.dim, H = d.heads, HKV = d.kv_heads;
  R = plan.ring(), U = plan.ulysses();
  n = plan.block_tokens();
  n_local = d.seq / plan.ranks();
  heads = plan.heads_per_rank(), kv_heads = plan.kv_heads_per_rank();
}

// ---- [fused finalize and init] -----------------------------------------------------------------

namespace {

// The launches that own every query row they cover, over the forward computes of `ops` (up to the
// FinalizeOp when `until_finalize`): a row's owner is the last (or the first) kernel block, in launch
// order, that covers it; blocks that launch nothing do not count. [compute][block] marks, or nothing
// when a row has no owner or its owner does not own all its rows (the fusion is all or nothing).
// `finalize_seen`: whether the walk met a FinalizeOp.
std::optional<std::vector<std::vector<bool>>> owning_launches(const std::vector<Op>& ops, int64_t rows, bool last,
                                                              bool until_finalize, bool& finalize_seen) {
  std::vector<const ComputeOp*> computes;
  constexpr std::pair<size_t, size_t> kNone{SIZE_MAX, SIZE_MAX};
  std::vector<std::pair<size_t, size_t>> owner(static_cast<size_t>(rows), kNone);
  auto launches = [](const KernelBlock& kb) { return !kb.q_rows.empty() && !kb.kv_rows.empty(); };
  finalize_seen = false;
  for (const Op& op : ops) {
    if (std::holds_alternative<FinalizeOp>(op.body)) {
      finalize_seen = true;
      if (until_finalize) break;
    }
    const auto* compute = std::get_if<ComputeOp>(&op.body);
    if (compute == nullptr || compute->pass != Pass::forward) continue;
    for (size_t k = 0; k < compute->kernels.size(); ++k) {
      const KernelBlock& kb = compute->kernels[k];
      if (!launches(kb)) continue;
      if (kb.q_rows.begin < 0 || kb.q_rows.end > rows) {
        throw std::logic_error("gpu rank: a kernel block's query rows lie outside the rank's block");
      }
      for (int64_t r = kb.q_rows.begin; r < kb.q_rows.end; ++r) {
        auto& at = owner[static_cast<size_t>(r)];
        if (last || at == kNone) at = {computes.size(), k};
      }
    }
    computes.push_back(compute);
  }
  std::vector<std::vector<bool>> marks;
  for (size_t c = 0; c < computes.size(); ++c) {
    const std::vector<KernelBlock>& kernels = computes[c]->kernels;
    std::vector<bool>& mark = marks.emplace_back(kernels.size(), false);
    for (size_t k = 0; k < kernels.size(); ++k) {
      const RowRange q = kernels[k].q_rows;
      mark[k] = launches(kernels[k]) && std::all_of(owner.begin() + q.begin, owner.begin() + q.end, [&](auto at) {
                  return at == std::pair<size_t, size_t>{c, k};
                });
    }
  }
  for (const auto& [c, k] : owner) {
    if (c == SIZE_MAX || !marks[c][k]) return std::nullopt;
  }
  return marks;
}

}  // namespace

FusedFinalize plan_fused_finalize(const std::vector<Op>& ops, int64_t rows, Dtype dtype) {
  if (dtype == Dtype::fp32) return {};
  bool finalize_op = false;
  auto marks = owning_launches(ops, rows, true, true, finalize_op);
  if (!finalize_op || !marks) return {};
  return {true, std::move(*marks)};
}

FusedInit plan_fused_init(const std::vector<Op>& ops, int64_t rows, Dtype dtype) {
  if (dtype == Dtype::fp32) return {};
  bool finalize_op = false;
  auto marks = owning_launches(ops, rows, false, false, finalize_op);
  if (!marks) return {};
  return {true, std::move(*marks)};
}

// ---- [stored grads] ----------------------------------------------------------------------------

bool backward_stores_grads(const ComputeOp& op, int64_t rows, const RankGeometry& geometry) {
  if (op.pass != Pass::backward || op.accumulate_grad || op.grad_slot == Slot::gathered_dkv) return false;
  if (geometry.dtype == Dtype::fp32 || geometry.heads != geometry.kv_heads || op.kernels.empty()) return false;
  std::vector<RowRange> keys;
  for (const KernelBlock& kb : op.kernels) {
    if (kb.q_rows.end <= kb.q_rows.begin || kb.kv_rows.end <= kb.kv_rows.begin) return false;
    keys.push_back(kb.kv_rows);
  }
  std::sort(keys.begin(), keys.end(), [](const RowRange& a, const RowRange& b) { return a.begin < b.begin; });
  int64_t next = 0;  // the key ranges must tile [0, rows): each begins where the one before ended
  for (const RowRange& k : keys) {
    if (k.begin != next) return false;
    next = k.end;
  }
  return next == rows;
}

// ---- [construction] ----------------------------------------------------------------------------

GpuRank::GpuRank(const Plan& plan, int64_t rank, Dtype dtype, const AttentionInputs<float>& inputs)
    : geo_(plan, rank, dtype), local_positions_(plan.layout().positions(rank)), backward_(plan.spec().backward),
      separate_working_(geo_.U > 1) {
  const std::vector<Op> ops = expand(plan, rank);
  fused_finalize_ = plan_fused_finalize(ops, geo_.n, dtype);
  fused_init_ = plan_fused_init(ops, geo_.n, dtype);
  const RankGeometry& g = geo_;
  const int64_t es = g.element_bytes();
  local_q_ = upload_tensor(gather_rows(inputs.q, local_positions_, 1), dtype);
  local_k_ = upload_tensor(gather_rows(inputs.k, local_positions_, 1), dtype);
  local_v_ = upload_tensor(gather_rows(inputs.v, local_positions_, 1), dtype);
  if (backward_) local_dout_ = upload_tensor(gather_rows(inputs.dout, local_positions_, 1), dtype);
  if (separate_working_) {
    const size_t q_bytes = static_cast<size_t>(g.B * g.n * g.heads * g.D * es);
    const size_t kv_bytes = static_cast<size_t>(g.B * g.n * g.kv_heads * g.D * es);
    working_q_ = zeroed(q_bytes);
    working_k_ = zeroed(kv_bytes);
    working_v_ = zeroed(kv_bytes);
    if (backward_) working_dout_ = zeroed(q_bytes);
    q_ = working_q_.get(), k_ = working_k_.get(), v_ = working_v_.get(), dout_ = working_dout_.get();
  } else {
    q_ = local_q_.get(), k_ = local_k_.get(), v_ = local_v_.get(), dout_ = local_dout_.get();
  }

  const int64_t rows = g.B * g.heads * g.n;  // accumulator rows (b, h, i)
  if (!fp32_state_unused(fused_init_, fused_finalize_)) {
    acc_max_ = DeviceBuffer(floats(rows));
    acc_sum_ = DeviceBuffer(floats(rows));
    acc_out_ = DeviceBuffer(floats(rows * g.D));
  }
  if (!fused_init_.fused) {  // else every row's first launch starts it from the empty state
    init_accumulator(acc_max_.as<float>(), acc_sum_.as<float>(), acc_out_.as<float>(), rows, static_cast<int>(g.D),
                     nullptr);
  }
  out_ = zeroed(static_cast<size_t>(g.B * g.n * g.heads * g.D * g.element_bytes()));  // in the dtype
  lse_ = zeroed(floats(g.B * g.heads * g.n));
  if (backward_) {
    delta_ = zeroed(floats(g.B * g.heads * g.n));
    dq_ = zeroed(floats(g.B * g.n * g.heads * g.D));
    dk_ = zeroed(floats(g.B * g.n * g.kv_heads * g.D));
    dv_ = zeroed(floats(g.B * g.n * g.kv_heads * g.D));
  }
  if (separate_working_) {
    local_out_ = zeroed(static_cast<size_t>(g.B * g.n_local * g.H * g.D * g.element_bytes()));
    local_lse_ = zeroed(floats(g.B * g.H * g.n_local));
    if (backward_) {
      local_dq_ = zeroed(floats(g.B * g.n_local * g.H * g.D));
      local_dk_ = zeroed(floats(g.B * g.n_local * g.HKV * g.D));
      local_dv_ = zeroed(floats(g.B * g.n_local * g.HKV * g.D));
    }
  }

  // Slots: zeroed, so that nothing reads uninitialised memory whatever the plan does.
  const bool gathers = plan_uses(plan, Collective::all_gather_kv);
  for (size_t s = 0; s < slots_.size(); ++s) {
    const Slot slot = static_cast<Slot>(s);
    const bool needed = slot == Slot::kv0 || slot == Slot::kv1 ||
                        (backward_ && (slot == Slot::dkv0 || slot == Slot::dkv1 || slot == Slot::dkv_local ||
                                       slot == Slot::dkv_home)) ||
                        (gathers && slot == Slot::gathered_kv) || (gathers && backward_ && slot == Slot::gathered_dkv);
    if (needed) slots_[s] = zeroed(static_cast<size_t>(g.slot_blocks(slot) * g.slot_block_bytes(slot)));
  }
  if (gathers) own_kv_ = zeroed(static_cast<size_t>(g.slot_block_bytes(Slot::kv0)));

  const std::vector<int64_t> gathered = gathered_positions(plan);
  positions_ = upload_ints(gathered);
  mask_ = plan.mask();
  if (mask_.general()) {
    const KernelMask km = kernel_mask(mask_, gathered);
    causal_ = km.causal, window_ = km.window;
    if (!km.doc_first.empty()) doc_first_ = upload_ints(km.doc_first), doc_last_ = upload_ints(km.doc_last);
  }
  local_index_ = upload_ints(iota_positions(g.n));
  for (int64_t m = 0; m < g.U; ++m) member_rows_.push_back(upload_ints(member_rows(plan, plan.rank_at(g.g, m))));
  // The executors' streams do not synchronise with the legacy default stream used above.
  RINGLAB_CUDA_CHECK(cudaDeviceSynchronize());
}

void* GpuRank::slot_block(Slot slot, int64_t block) {
  DeviceBuffer& buffer = slots_[static_cast<size_t>(slot)];
  if (buffer.empty() || block < 0 || block >= geo_.slot_blocks(slot)) {
    throw std::logic_error(std::string("gpu rank: slot ") + slot_name(slot) + " block " + std::to_string(block) +
                           " is not allocated for this plan");
  }
  return static_cast<char*>(buffer.get()) + block * geo_.slot_block_bytes(slot);
}

void GpuRank::pack_own_kv(cudaStream_t stream) {
  const size_t half = static_cast<size_t>(geo_.slot_block_bytes(Slot::kv0) / 2);
  char* to = static_cast<char*>(own_kv_.get());
  RINGLAB_CUDA_CHECK(cudaMemcpyAsync(to, k_, half, cudaMemcpyDeviceToDevice, stream));
  RINGLAB_CUDA_CHECK(cudaMemcpyAsync(to + half, v_, half, cudaMemcpyDeviceToDevice, stream));
}

// ---- [local ops] -------------------------------------------------------------------------------

void GpuRank::reset(cudaStream_t stream) {
  forward_computes_ = 0;
  if (fused_init_.fused) return;  // every row's first launch starts it from the empty state
  const int64_t rows = geo_.B * geo_.heads * geo_.n;
  init_accumulator(acc_max_.as<float>(), acc_sum_.as<float>(), acc_out_.as<float>(), rows, static_cast<int>(geo_.D),
                   stream);
}

void GpuRank::load_kv(const LoadKvOp& op, cudaStream_t stream) {
  const size_t half = static_cast<size_t>(geo_.slot_block_bytes(op.slot) / 2);
  char* to = static_cast<char*>(slot_block(op.slot));
  RINGLAB_CUDA_CHECK(cudaMemcpyAsync(to, k_, half, cudaMemcpyDeviceToDevice, stream));
  RINGLAB_CUDA_CHECK(cudaMemcpyAsync(to + half, v_, half, cudaMemcpyDeviceToDevice, stream));
}

void GpuRank::compute(const ComputeOp& op, cudaStream_t stream) {
  const RankGeometry& g = geo_;
  // A gathered slot is R blocks; the compute's rows start at block kv_row_offset / n.
  const bool gathered = op.kv_slot == Slot::gathered_kv;
  if (op.kv_row_offset % g.n != 0) throw std::logic_error("gpu rank: kv_row_offset is not a whole block");
  const int64_t block = gathered ? op.kv_row_offset / g.n : 0;
  // Overwrite: a skipped block contributes 0, so the slot is cleared and added into, unless the
  // launches own its keys and store them.
  const bool store_grads = backward_stores_grads(op, g.n, g);
  if (op.pass == Pass::backward && !op.accumulate_grad && !store_grads) {
    DeviceBuffer& grad = slots_[static_cast<size_t>(op.grad_slot)];
    RINGLAB_CUDA_CHECK(cudaMemsetAsync(slot_block(op.grad_slot), 0, grad.bytes(), stream));
  }
  // This op's rows of FusedFinalize::finalizes and FusedInit::inits (counted for skipped computes
  // too, as the passes count them).
  const std::vector<bool>* finalizes = nullptr;
  const std::vector<bool>* inits = nullptr;
  if (op.pass == Pass::forward) {
    const auto index = static_cast<size_t>(forward_computes_++);
    if (fused_finalize_.fused && index < fused_finalize_.finalizes.size())
      finalizes = &fused_finalize_.finalizes[index];
    if (fused_init_.fused) {
      if (index >= fused_init_.inits.size()) {
        throw std::logic_error("gpu rank: forward compute " + std::to_string(index) +
                               " after reset, where the plan has " + std::to_string(fused_init_.inits.size()));
      }
      inits = &fused_init_.inits[index];
    }
  }
  if (op.kernels.empty()) return;
  const int64_t half = g.B * g.n * g.kv_heads * g.D;  // elements of K (or V) in a block
  const char* kv = static_cast<const char*>(slot_block(op.kv_slot, block));
  AttentionParams a;
  a.q = q_;
  a.k = kv;
  a.v = kv + half * g.element_bytes();
  a.k_pos = positions_.as<int32_t>() + op.kv_block * g.n;
  a.batch = static_cast<int>(g.B);
  a.q_seq = static_cast<int>(g.n);
  a.kv_seq = static_cast<int>(g.n);
  a.heads = static_cast<int>(g.heads);
  a.kv_heads = static_cast<int>(g.kv_heads);
  a.dim = static_cast<int>(g.D);
  a.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(g.D)));
  for (size_t k = 0; k < op.kernels.size(); ++k) {
    const KernelBlock& kb = op.kernels[k];
    a.q_pos = kb.erratum_local_query_index ? local_index_.as<int32_t>() : positions_.as<int32_t>() + g.g * g.n;
    a.q_begin = static_cast<int>(kb.q_rows.begin);
    a.q_end = static_cast<int>(kb.q_rows.end);
    a.kv_begin = static_cast<int>(kb.kv_rows.begin);
    a.kv_end = static_cast<int>(kb.kv_rows.end);
    a.causal = kb.mask.causal();
    a.window = 0;
    a.q_doc_first = a.q_doc_last = nullptr;
    if (kb.mask.general()) {  // the plan's window / documents / padding, by the queries' global positions
      if (kb.erratum_local_query_index || !(kb.mask == mask_)) {
        throw std::logic_error("gpu rank: a kernel block's general mask is not the plan's");
      }
      a.causal = causal_;
      a.window = window_;
      if (!doc_first_.empty()) {
        a.q_doc_first = doc_first_.as<int32_t>() + g.g * g.n;
        a.q_doc_last = doc_last_.as<int32_t>() + g.g * g.n;
      }
    }
    a.skip_masked_tiles = kb.skip_masked_tiles;
    if (op.pass == Pass::forward) {
      ForwardParams p;
      p.a = a;
      p.acc_max = acc_max_.as<float>();
      p.acc_sum = acc_sum_.as<float>();
      p.acc_out = acc_out_.as<float>();
      if (finalizes != nullptr && (*finalizes)[k]) p.out = out_.get(), p.lse = lse_.as<float>();
      p.init = inits != nullptr && (*inits)[k];
      forward_accumulate(g.dtype, p, stream);
    } else {
      float* grad = static_cast<float*>(slot_block(op.grad_slot, op.grad_slot == Slot::gathered_dkv ? block : 0));
      BackwardParams p;
      p.a = a;
      p.dout = dout_;
      p.lse = lse_.as<float>();
      p.delta = delta_.as<float>();
      p.dq = dq_.as<float>();
      p.dk = grad;
      p.dv = grad + half;
      p.store_dkv = store_grads;
      backward_accumulate(g.dtype, p, stream);
    }
  }
}

void GpuRank::accumulate(const AccumulateOp& op, cudaStream_t stream) {
  const int64_t count = geo_.kv_block_elements() * std::min(geo_.slot_blocks(op.from), geo_.slot_blocks(op.to));
  add_into(static_cast<float*>(slot_block(op.to)), static_cast<const float*>(slot_block(op.from)), count, stream);
}

void GpuRank::finalize(cudaStream_t stream) {
  const RankGeometry& g = geo_;
  if (fused_finalize_.fused) {  // the forward's last launches wrote out and lse
    if (forward_computes_ != static_cast<int64_t>(fused_finalize_.finalizes.size())) {
      throw std::logic_error("gpu rank: FinalizeOp after " + std::to_string(forward_computes_) +
                             " forward computes, where the plan has " +
                             std::to_string(fused_finalize_.finalizes.size()));
    }
    return;
  }
  finalize_accumulator(g.dtype, acc_max_.as<float>(), acc_sum_.as<float>(), acc_out_.as<float>(), static_cast<int>(g.B),
                       static_cast<int>(g.heads), static_cast<int>(g.n), static_cast<int>(g.D), out_.get(),
                       lse_.as<float>(), stream);
}

void GpuRank::prepare_backward(cudaStream_t stream) {
  const RankGeometry& g = geo_;
  if (!backward_) throw std::logic_error("gpu rank: PrepareBackward in a forward-only run");
  softmax_delta(g.dtype, dout_, out_.get(), static_cast<int>(g.B), static_cast<int>(g.n), static_cast<int>(g.heads),
                static_cast<int>(g.D), delta_.as<float>(), stream);
  dq_.zero_async(stream);
  slots_[static_cast<size_t>(Slot::dkv0)].zero_async(stream);
  if (!slots_[static_cast<size_t>(Slot::gathered_dkv)].empty()) {
    slots_[static_cast<size_t>(Slot::gathered_dkv)].zero_async(stream);
  }
}

void GpuRank::store_grads(const StoreGradsOp& op, cudaStream_t stream) {
  const size_t half = static_cast<size_t>(geo_.slot_block_bytes(op.slot) / 2);
  const char* from = static_cast<const char*>(slot_block(op.slot));
  RINGLAB_CUDA_CHECK(cudaMemcpyAsync(dk_.get(), from, half, cudaMemcpyDeviceToDevice, stream));
  RINGLAB_CUDA_CHECK(cudaMemcpyAsync(dv_.get(), from + half, half, cudaMemcpyDeviceToDevice, stream));
}

// ---- [outputs] ---------------------------------------------------------------------------------

LocalOutputs GpuRank::download_outputs(bool backward) const {
  const RankGeometry& g = geo_;
  auto fetch = [](const void* device, Shape shape) {
    Tensor<float> t(std::move(shape));
    RINGLAB_CUDA_CHECK(cudaMemcpy(t.data(), device, floats(t.size()), cudaMemcpyDeviceToHost));
    return t;
  };
  LocalOutputs local;
  {  // out is in the dtype: its bytes, widened to float (exact) on the host
    local.out = Tensor<float>({g.B, g.n_local, g.H, g.D});
    std::vector<unsigned char> bytes(static_cast<size_t>(local.out.size() * g.element_bytes()));
    RINGLAB_CUDA_CHECK(cudaMemcpy(bytes.data(), local_output(0), bytes.size(), cudaMemcpyDeviceToHost));
    decode(bytes, g.dtype, {local.out.data(), static_cast<size_t>(local.out.size())});
  }
  local.lse = fetch(local_output(1), {g.B, g.H, g.n_local});
  if (backward) {
    local.dq = fetch(local_output(2), {g.B, g.n_local, g.H, g.D});
    local.dk = fetch(local_output(3), {g.B, g.n_local, g.HKV, g.D});
    local.dv = fetch(local_output(4), {g.B, g.n_local, g.HKV, g.D});
  }
  return local;
}

const void* GpuRank::local_output(int which) const {
  const DeviceBuffer* separate[] = {&local_out_, &local_lse_, &local_dq_, &local_dk_, &local_dv_};
  const DeviceBuffer* working[] = {&out_, &lse_, &dq_, &dk_, &dv_};
  return (separate_working_ ? separate : working)[which]->get();
}

// ---- [all-to-all geometry] ---------------------------------------------------------------------

std::vector<GpuRank::A2aTensor> GpuRank::a2a_tensors(Collective collective) {
  const int es = static_cast<int>(geo_.element_bytes());
  const int H = static_cast<int>(geo_.H), HKV = static_cast<int>(geo_.HKV);
  switch (collective) {
    case Collective::all_to_all_qkv:
      return {{local_q_.get(), q_, H, es, false},
              {local_k_.get(), k_, HKV, es, false},
              {local_v_.get(), v_, HKV, es, false}};
    case Collective::all_to_all_dout: return {{local_dout_.get(), dout_, H, es, false}};
    case Collective::all_to_all_out:
      return {{local_out_ptr(), out_.get(), H, es, false}, {local_lse_ptr(), lse_.get(), H, 4, true}};  // out in dtype
    case Collective::all_to_all_grads:
      return {{local_dq_ptr(), dq_.get(), H, 4, false},
              {local_dk_ptr(), dk_.get(), HKV, 4, false},
              {local_dv_ptr(), dv_.get(), HKV, 4, false}};
    default: throw std::logic_error(std::string("gpu rank: ") + collective_name(collective) + " is not an all-to-all");
  }
}

RowCopy GpuRank::a2a_copy(Collective collective, const A2aTensor& source, int64_t from, const A2aTensor& dest,
                          int64_t to) const {
  const RankGeometry& g = geo_;
  const int per = source.heads_total / static_cast<int>(g.U);
  RowCopy c;
  c.count = static_cast<int>(g.n_local);
  c.head_count = per;
  c.batch = static_cast<int>(g.B);
  c.dim = static_cast<int>(g.D);
  c.element_bytes = source.element_bytes;
  if (a2a_to_working(collective)) {  // member `from`'s tokens, heads of `to` -> `to`'s block rows
    c.src = source.local;
    c.src_rows = static_cast<int>(g.n_local), c.src_heads = source.heads_total,
    c.src_head0 = static_cast<int>(to) * per;
    c.dst = dest.working;
    c.dst_rows = static_cast<int>(g.n), c.dst_heads = per, c.dst_head0 = 0;
    c.dst_index = member_rows_[static_cast<size_t>(from)].as<int32_t>();
  } else {  // `to`'s tokens from `from`'s block rows, into heads of `from`
    c.src = source.working;
    c.src_rows = static_cast<int>(g.n), c.src_heads = per, c.src_head0 = 0;
    c.src_index = member_rows_[static_cast<size_t>(to)].as<int32_t>();
    c.dst = dest.local;
    c.dst_rows = static_cast<int>(g.n_local), c.dst_heads = dest.heads_total,
    c.dst_head0 = static_cast<int>(from) * per;
  }
  return c;
}

}  // namespace ringlab::gpu
