// One rank's device state and its *local* operations — everything of the op vocabulary
// (sim/plan/plan.hpp) that needs no communication: LoadKv, Compute, Accumulate, Finalize,
// PrepareBackward, StoreGrads. Both GPU executors own GpuRanks and add the communication their
// way (gpu-streams: device copies between ranks on one GPU; gpu-nccl: NCCL between GPUs).
//
// Semantics mirror the sim executor (executors/sim/sim_executor.cpp) op for op:
//   * a rank starts with its layout tokens (Layout::positions, ascending) of q, k, v, dout, all
//     heads — the "local" tensors (B, S/P, H|HKV, D); its "working" tensors are its ring
//     position's block (Plan::block_positions) and its heads [u H/U, (u+1) H/U) — the same
//     buffers when U = 1, filled by all_to_all_qkv / all_to_all_dout otherwise;
//   * outputs are computed in the working layout and brought back by all_to_all_out /
//     all_to_all_grads (again the same buffers when U = 1);
//   * a compute's keys are at the positions of its kv block (gathered slots: the whole gathered
//     list); the kv-offset-mask erratum masks queries by their local row index instead;
//   * a compute whose block the plan masks with the general mask (window, documents, padding)
//     passes the kernels the window and its queries' document bounds (kernel_params.hpp); padding
//     rows (uneven S) are empty rows there, as the sim's mask makes them;
//   * a backward compute that does not accumulate zeroes its grad slot first, unless its launches
//     own the slot's keys and store dk and dv (backward_stores_grads); PrepareBackward computes
//     delta, zeroes dq, dkv0 and gathered_dkv;
//   * with bf16 / fp16, a rank whose every row is finished by a launch that finishes all of its
//     rows has those launches finalise in the kernel and its FinalizeOp does nothing
//     (plan_fused_finalize); otherwise FinalizeOp runs finalize_accumulator;
//   * likewise, a rank whose every row is started by a launch that starts all of its rows has
//     those launches begin from the empty state in registers (plan_fused_init), and neither the
//     constructor nor reset runs init_accumulator; with both fused, a rank whose every block is its
//     rows' only one neither reads nor writes the fp32 accumulator.
// Slots hold K then V (or dK then dV): [2][B][n][HKV/U][D]; gathered slots hold R such blocks in
// ring order, so a compute on block g of a gathered slot reads block g like any other slot.
// Sections: [geometry] [fused finalize] [fused init] [stored grads] [buffers] [local ops] [all-to-all geometry]
#pragma once

#include <cuda_runtime_api.h>

#include <array>
#include <cstdint>
#include <vector>

#include "gpu/device.hpp"
#include "gpu/dtype.hpp"
#include "gpu/kernels/attention_kernels.hpp"
#include "reference/attention.hpp"
#include "sim/pipeline/executor.hpp"  // LocalOutputs
#include "sim/plan/plan.hpp"

namespace ringlab::gpu {

// ---- [geometry] --------------------------------------------------------------------------------

struct RankGeometry {
  int64_t rank = 0, g = 0, u = 0;  // world rank, ring position, Ulysses index
  int64_t B = 1, D = 64;
  int64_t n = 0;                    // working rows: block tokens S / R
  int64_t n_local = 0;              // local rows: S / P
  int64_t H = 1, HKV = 1;           // all heads
  int64_t heads = 1, kv_heads = 1;  // working heads: H / U, HKV / U
  int64_t R = 1, U = 1;
  Dtype dtype = Dtype::bf16;

  RankGeometry(const Plan& plan, int64_t rank, Dtype dtype);
  int64_t element_bytes() const { return dtype_bytes(dtype); }
  int64_t kv_block_elements() const { return 2 * B * n * kv_heads * D; }  // K and V of one block
  int64_t slot_blocks(Slot slot) const { return slot == Slot::gathered_kv || slot == Slot::gathered_dkv ? R : 1; }
  static bool is_grad_slot(Slot slot) {
    return slot == Slot::dkv0 || slot == Slot::dkv1 || slot == Slot::dkv_local || slot == Slot::dkv_home ||
           slot == Slot::gathered_dkv;
  }
  // Bytes of one block of a slot: K/V in the dtype, dK/dV in fp32.
  int64_t slot_block_bytes(Slot slot) const { return kv_block_elements() * (is_grad_slot(slot) ? 4 : element_bytes()); }
};

// ---- [fused finalize] --------------------------------------------------------------------------

// Which of a rank's forward kernel launches finalise their query rows in the kernel
// (ForwardParams::out / lse: out = o / l, lse = m + log l) instead of leaving that to FinalizeOp's
// finalize_accumulator.
struct FusedFinalize {
  bool fused = false;
  // [forward ComputeOp, counted in op order][its kernel block]: that launch finalises. Empty when
  // not fused.
  std::vector<std::vector<bool>> finalizes;
};

// The rule, over a rank's ops (expand(plan, rank)) and its `rows` working query rows. A row's last
// block is the last kernel block, in launch order (op order, then block order within an op), of a
// forward ComputeOp before FinalizeOp whose query rows contain it (a block with no query or no key
// rows launches nothing and does not count). A block finalises when it is the last block of every
// row it covers. A launch that finalises leaves its rows' accumulator state un-updated, so a later
// finalize_accumulator over all rows would be wrong for them: the fusion is all or nothing. It
// happens only if the dtype has the fused kernel (bf16 / fp16: fp32 refuses it), there is a
// FinalizeOp, and every row has a last block that finalises; otherwise nothing is fused (a row that
// no block touches included: nothing would write its out and lse).
FusedFinalize plan_fused_finalize(const std::vector<Op>& ops, int64_t rows, Dtype dtype);

// ---- [fused init] ------------------------------------------------------------------------------

// Which of a rank's forward kernel launches start their query rows from the empty state in the
// kernel (ForwardParams::init: m = -inf, l = 0, o = 0, the accumulator not read) instead of
// loading the state init_accumulator left.
struct FusedInit {
  bool fused = false;
  // [forward ComputeOp, counted in op order][its kernel block]: that launch starts its rows. Empty
  // when not fused.
  std::vector<std::vector<bool>> inits;
};

// The rule, the finalize's mirrored: a row's first block is the first kernel block, in launch order,
// of a forward ComputeOp whose query rows contain it (blocks that launch nothing do not count). A
// block starts its rows when it is the first block of every row it covers. A launch that starts
// its rows overwrites their state, so a row whose first block does not start it would read what
// init_accumulator left: the fusion is all or nothing, since init_accumulator clears every row.
// It happens only if the dtype has the fused kernel (bf16 / fp16) and every row has a first block
// that starts it; otherwise (fp32, a row that no block touches, a row whose first block also
// covers rows an earlier block touched) nothing is fused and init_accumulator runs as before.
FusedInit plan_fused_init(const std::vector<Op>& ops, int64_t rows, Dtype dtype);

// Whether no kernel touches the fp32 state (m, l, o): both fused, and every launch both starts and
// finalises its rows (each row has one block: a rank whose block is its only block). GpuRank then
// allocates no state at all, and the launches get null accumulator pointers.
inline bool fp32_state_unused(const FusedInit& init, const FusedFinalize& finalize) {
  return init.fused && finalize.fused && init.inits == finalize.finalizes;
}

// ---- [stored grads] ----------------------------------------------------------------------------

// Whether a backward compute's launches store dk and dv (BackwardParams::store_dkv) into its grad
// slot instead of clearing the slot and adding: the compute overwrites the slot (accumulate_grad
// false), which is one block (not the gathered one), and its kernel blocks own the keys — their
// kv rows are disjoint and together the slot's rows [0, rows), each block has query rows — with
// H = HKV on the rank (no GQA group adds into one kv head) and bf16 / fp16 (the fp32 kernel only
// adds). Then every key row of the slot has exactly one launch that writes it, zeros for keys no
// query sees, and the memset before goes: FlashAttention-2's backward writes dK and dV once too.
// The diagonal step of a ring, a rank's only block (P = 1, Ulysses) are such computes; a zig-zag
// block split in query halves over the same keys is not.
bool backward_stores_grads(const ComputeOp& op, int64_t rows, const RankGeometry& geometry);

class GpuRank {
 public:
  // Allocates this rank's buffers on the current device and uploads its local inputs (rounded to
  // the dtype). inputs are the global (B, S, H|HKV, D) tensors; dout may be empty.
  GpuRank(const Plan& plan, int64_t rank, Dtype dtype, const AttentionInputs<float>& inputs);
  GpuRank(const GpuRank&) = delete;
  GpuRank& operator=(const GpuRank&) = delete;

  const RankGeometry& geometry() const { return geo_; }
  const std::vector<int64_t>& local_positions() const { return local_positions_; }

  // ---- [buffers] -------------------------------------------------------------------------------

  // Slot `slot`, block `block` (0 unless gathered): its first byte, and its size.
  void* slot_block(Slot slot, int64_t block = 0);
  int64_t slot_block_bytes(Slot slot) const { return geo_.slot_block_bytes(slot); }
  // The rank's own K/V block of the working set, packed as a slot block is ([K; V]) — the
  // all-gather's contribution (filled by pack_own_kv).
  void* own_kv_block() { return own_kv_.get(); }
  void pack_own_kv(cudaStream_t stream);

  // ---- [local ops] -----------------------------------------------------------------------------

  // Each enqueues its work on `stream` and returns.
  // Before every run: the accumulator back to m = -inf, l = 0, o = 0 (unless the init is fused: the
  // first launches start from there), the forward computes' count to 0.
  void reset(cudaStream_t stream);
  void load_kv(const LoadKvOp& op, cudaStream_t stream);
  void compute(const ComputeOp& op, cudaStream_t stream);
  void accumulate(const AccumulateOp& op, cudaStream_t stream);
  void finalize(cudaStream_t stream);
  void prepare_backward(cudaStream_t stream);
  void store_grads(const StoreGradsOp& op, cudaStream_t stream);

  // Downloads the local outputs, the host-side tensors the rank ends with (synchronous: call
  // after the streams are done).
  LocalOutputs download_outputs(bool backward) const;

  // ---- [all-to-all geometry] -------------------------------------------------------------------

  // One tensor of an all-to-all: `local` (B, n_local, heads_total, D) <-> `working`
  // (B, n, heads_total / U, D), or (B, heads, rows) tensors when lse.
  struct A2aTensor {
    void* local = nullptr;
    void* working = nullptr;
    int heads_total = 0;
    int element_bytes = 4;
    bool lse = false;
  };
  // The tensors a Ulysses collective moves, and whether it moves local -> working.
  std::vector<A2aTensor> a2a_tensors(Collective collective);
  static bool a2a_to_working(Collective collective) {
    return collective == Collective::all_to_all_qkv || collective == Collective::all_to_all_dout;
  }
  // The copy of tensor `index` of the collective from group member `from` (whose tensors are
  // `source`) to member `to` (`dest`). Row lists come from this rank (all members share them).
  RowCopy a2a_copy(Collective collective, const A2aTensor& source, int64_t from, const A2aTensor& dest,
                   int64_t to) const;

 private:
  RankGeometry geo_;
  std::vector<int64_t> local_positions_;
  bool backward_ = false;
  bool separate_working_ = false;  // U > 1: working tensors are their own buffers
  FusedFinalize fused_finalize_;   // computed once from the plan
  FusedInit fused_init_;           // likewise
  int64_t forward_computes_ = 0;   // forward ComputeOps run since reset: FusedFinalize's first index

  // Inputs, dtype: local (B, n_local, H|HKV, D) and working (B, n, heads|kv_heads, D).
  DeviceBuffer local_q_, local_k_, local_v_, local_dout_;
  DeviceBuffer working_q_, working_k_, working_v_, working_dout_;
  void* q_ = nullptr;
  void* k_ = nullptr;
  void* v_ = nullptr;
  void* dout_ = nullptr;
  DeviceBuffer own_kv_;  // [K; V] of the working set, for the all-gather
  // Accumulator (empty where fp32_state_unused) and working outputs (fp32).
  DeviceBuffer acc_max_, acc_sum_, acc_out_;
  DeviceBuffer out_, lse_, delta_, dq_, dk_, dv_;
  // Local outputs when U > 1 (else the working ones).
  DeviceBuffer local_out_, local_lse_, local_dq_, local_dk_, local_dv_;
  std::array<DeviceBuffer, static_cast<size_t>(Slot::count)> slots_;
  // Positions (int32): every block's in ring order (the gathered list), and 0..n-1 (erratum).
  DeviceBuffer positions_, local_index_;
  // The plan's mask as the kernels take it (gpu/kernels/kernel_mask.hpp): causal and window, and
  // with documents or padding the document bounds of every gathered position (int32, like positions_).
  Mask mask_;
  bool causal_ = false;
  int window_ = 0;
  DeviceBuffer doc_first_, doc_last_;
  // [member] -> rows of that member's tokens within this group's block (int32, n_local each).
  std::vector<DeviceBuffer> member_rows_;

  void* local_out_ptr() { return separate_working_ ? local_out_.get() : out_.get(); }
  void* local_lse_ptr() { return separate_working_ ? local_lse_.get() : lse_.get(); }
  void* local_dq_ptr() { return separate_working_ ? local_dq_.get() : dq_.get(); }
  void* local_dk_ptr() { return separate_working_ ? local_dk_.get() : dk_.get(); }
  void* local_dv_ptr() { return separate_working_ ? local_dv_.get() : dv_.get(); }
  const void* local_output(int which) const;
};

}  // namespace ringlab::gpu
