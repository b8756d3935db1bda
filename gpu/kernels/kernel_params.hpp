// Arguments of the attention kernels: plain structs shared by host code, the CUDA kernels and the
// CPU warp emulator (gpu/emulation). No CUDA headers, so any C++ file can fill them.
//
// One launch computes one *block* of a schedule exactly like the reference's
// flash_forward_accumulate / flash_backward_accumulate (reference/flash_attention.hpp): local query
// rows [q_begin, q_end) against key rows [kv_begin, kv_end), the mask comparing the global
// positions q_pos / k_pos of those rows. The mask is reference/mask.hpp's general one:
//   visible(i, j) = same_document(i, j) && (!causal || j <= i) && (W == 0 || within_window(i, j))
// for query position i = q_pos[row], key position j = k_pos[row']. Documents (and padding) come as
// per-query-row bounds q_doc_first / q_doc_last rather than a document id per row: documents are
// packed, so a query's document is one interval of positions and the visible keys of a row are
// one interval [first, last] (Mask::keys_of) — a tile is classified from the min/max of those
// interval ends against the key tile's position range, and an element is masked by comparing its
// key's position with them, with no key-side array: K/V blocks travelling the ring carry only
// positions, and a padding row is simply an empty interval (first > last). Positions and the
// window stay below 2^30 (kernel_mask.hpp checks). Shapes (elements of the launch's dtype unless
// noted):
//   q, dout: (B, Sq, H, D)        k, v: (B, Sk, HKV, D)         q_pos: Sq   k_pos: Sk (int32)
//   q_doc_first, q_doc_last: Sq (int32), both null or both set
//   acc_max, acc_sum: B*H*Sq fp32, rows (b, h, i) -> (b*H + h)*Sq + i;  acc_out: (B*H*Sq, D) fp32
//   lse, delta: (B, H, Sq) fp32   dq: (B, Sq, H, D) fp32        dk, dv: (B, Sk, HKV, D) fp32
// GQA: query head h reads kv head h / (H / HKV).
#pragma once

#include <cstdint>

namespace ringlab::gpu {

struct AttentionParams {
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  const int32_t* q_pos = nullptr;
  const int32_t* k_pos = nullptr;
  int batch = 1, q_seq = 0, kv_seq = 0, heads = 1, kv_heads = 1, dim = 64;
  int q_begin = 0, q_end = 0;    // local query rows, half-open
  int kv_begin = 0, kv_end = 0;  // key rows, half-open
  // Query row i sees no key outside [q_doc_first[i], q_doc_last[i]] (its document, inclusive
  // global positions; first > last for a padding row). Null: one document, no padding.
  const int32_t* q_doc_first = nullptr;
  const int32_t* q_doc_last = nullptr;
  bool causal = false;            // key visible only if k_pos[j] <= q_pos[i]
  int window = 0;                 // > 0: only if q_pos[i] - window < k_pos[j] (and < q_pos[i] + window when not causal)
  bool skip_masked_tiles = true;  // false: fully masked tiles are computed (same result)
  float scale = 0.125f;           // 1/sqrt(D)
};

// Forward of one block merged into the running online-softmax accumulator (in place).
struct ForwardParams {
  AttentionParams a;
  float* acc_max = nullptr;  // m, -inf where a row has seen no key yet
  float* acc_sum = nullptr;  // l
  float* acc_out = nullptr;  // o, unnormalised
  // Set (both) when this launch is the last to accumulate its query rows [q_begin, q_end): the
  // merged state is finalised in the kernel instead of stored, out = o / l (B, Sq, H, D) and
  // lse = m + log l (B, H, Sq) for those rows (0 and -inf for a row that saw no key), as
  // finalize_accumulator would; the accumulator rows are then left as they were. out is in the
  // input dtype T (rounded to nearest even, like the executors' out), lse fp32. Null: accumulate
  // only (every step but a row's last).
  void* out = nullptr;
  float* lse = nullptr;
  // Set when this launch is the first to accumulate its query rows [q_begin, q_end) (the fused
  // init): it starts those rows from the empty state m = -inf, l = 0, o = 0 in registers instead of
  // loading the accumulator, which may hold anything (init_accumulator need not have run), and it
  // stores its state even where the mask skips every key tile. With out / lse set as well (a row's
  // only block) the accumulator is neither read nor written. False: the state is loaded.
  bool init = false;
};

// Backward of one block, *added* into dq, dk, dv. lse and delta are those of the whole forward.
struct BackwardParams {
  AttentionParams a;
  const void* dout = nullptr;
  const float* lse = nullptr;
  const float* delta = nullptr;
  float* dq = nullptr;
  float* dk = nullptr;
  float* dv = nullptr;
};

}  // namespace ringlab::gpu
