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
#include <initializer_list>
#include <string>

// The functions below that the kernels call too (nvcc: host and device; otherwise plain C++, as
// under the warp emulator).
#if defined(__CUDACC__)
#define RINGLAB_HOST_DEVICE __host__ __device__
#else
#define RINGLAB_HOST_DEVICE
#endif

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
  // Set by forward_launch, not by callers: the grid is (section, tiles, B H / section), its blocks
  // heaviest first (the forward's block order, below); false: (tiles, B H).
  bool heavy_first = false;
  // The plain grid even under the causal mask: bench_gpu_kernels times the block order against it.
  bool plain_order = false;
};

// ---- the forward's block order ----------------------------------------------------------------
//
// A launch's blocks start in the order of their linear index (x fastest, then y, then z) as SMs
// free up. Under the causal mask a query tile's work grows with its position (tile i of a
// diagonal block sees the keys of i + 1 query tiles); in the plain grid (query tiles, B H) the heaviest
// tiles of the last heads start last and run on alone: the launch's tail. The causal forward
// launches its blocks heaviest first instead (the longest-processing-time-first rule of list
// scheduling, as FlashAttention-3's scheduler does): grid (section, tiles, B H / section), y
// counting tiles down from the last, x the heads of one section, so that every head of a section
// starts a tile before any starts a lighter one. A section's heads are few enough that the K/V
// the blocks in flight read stays in L2. ringlab's layouts list a rank's rows in ascending position
// (zig-zag's second chunk after its first), so the last tiles are the heaviest under the causal mask.

inline constexpr int kMaxTilesHeavyFirst = 65535;  // CUDA's limit on a grid's y dimension

// Whether a forward launch of `tiles` query tiles orders its blocks heaviest first.
inline bool heavy_tiles_first(const AttentionParams& a, int tiles) { return a.causal && tiles <= kMaxTilesHeavyFirst; }

// The bytes of K and V of one section's heads, at most: about half an H100's 50 MB of L2.
inline constexpr int64_t kOrderSectionBytes = int64_t(24) << 20;

// Query heads per section: the largest divisor of B H whose kv heads' K and V (the launch's keys,
// 2-byte elements; GQA: H / HKV query heads per kv head) fit `bytes`; at least 1.
inline int order_section(const AttentionParams& a, int64_t bytes = kOrderSectionBytes) {
  const int64_t kv_head_bytes = int64_t(a.kv_end - a.kv_begin) * a.dim * 2 * 2;
  const int64_t group = a.kv_heads > 0 && a.heads >= a.kv_heads ? a.heads / a.kv_heads : 1;
  const int64_t most = kv_head_bytes > 0 ? bytes / kv_head_bytes * group : group;
  const int batch_heads = a.batch * a.heads;
  int section = static_cast<int>(most < batch_heads ? most : batch_heads);  // down to the first divisor
  while (section > 1 && batch_heads % section != 0) --section;
  return section > 1 ? section : 1;
}

struct LaunchGrid {
  int x = 1, y = 1, z = 1;
};

// A forward launch of `tiles` query tiles: its grid, and `p` with heavy_first saying which order
// the grid is in (the kernel reads its tile and head back with forward_block). `section_bytes`:
// order_section's budget (tests make sections of a few heads with a small one).
struct ForwardLaunch {
  LaunchGrid grid;
  ForwardParams params;
};
inline ForwardLaunch forward_launch(ForwardParams p, int tiles, int64_t section_bytes = kOrderSectionBytes) {
  p.heavy_first = !p.plain_order && heavy_tiles_first(p.a, tiles);
  if (!p.heavy_first) return {{tiles, p.a.batch * p.a.heads, 1}, p};
  const int section = order_section(p.a, section_bytes);
  return {{section, tiles, p.a.batch * p.a.heads / section}, p};
}

// The query tile and head (b H + h) that block (x, y, z) of a forward_launch grid (gx, gy, ...)
// computes: in the heaviest-first grid, tiles counted down along y and head z gx + x.
struct BlockOrder {
  int tile = 0, head = 0;
};
RINGLAB_HOST_DEVICE inline BlockOrder forward_block(bool heavy_first, unsigned x, unsigned y, unsigned z, unsigned gx,
                                                    unsigned gy) {
  BlockOrder order;
  order.tile = static_cast<int>(heavy_first ? gy - 1 - y : x);
  order.head = static_cast<int>(heavy_first ? z * gx + x : y);
  return order;
}

// Backward of one block, *added* into dq, dk, dv. lse and delta are those of the whole forward.
struct BackwardParams {
  AttentionParams a;
  const void* dout = nullptr;
  const float* lse = nullptr;
  const float* delta = nullptr;
  float* dq = nullptr;
  float* dk = nullptr;
  float* dv = nullptr;
  // The launch is the only one to write dk and dv for its key rows [kv_begin, kv_end) of every
  // head: the tensor-core kernel *stores* them (zeros for keys no query sees) instead of adding, so
  // nothing need clear dk and dv first — FlashAttention-2's own backward, which writes dK and dV
  // once. Needs H = HKV (a GQA group's query heads add into one kv head), a non-empty query range
  // (an empty one launches nothing, which would leave the rows unwritten) and bf16 / fp16: the
  // fp32 kernel only adds (store_dkv_problem).
  bool store_dkv = false;
};

// "" when `p.store_dkv` can be honoured (or is off); otherwise the line naming why. Both backward
// launchers check it before anything else, an empty launch included.
inline std::string store_dkv_problem(bool fp32, const BackwardParams& p) {
  if (!p.store_dkv || p.a.kv_end <= p.a.kv_begin) return "";
  if (fp32) return "BackwardParams::store_dkv is the tensor-core kernel's; the fp32 kernel adds: zero dk and dv first";
  if (p.a.heads != p.a.kv_heads) {
    return "BackwardParams::store_dkv needs H = HKV: the " + std::to_string(p.a.heads / p.a.kv_heads) +
           " query heads of a GQA group add into one kv head; zero dk and dv first and add";
  }
  if (p.a.q_end <= p.a.q_begin) {
    return "BackwardParams::store_dkv with an empty query range launches nothing and would leave dk and dv "
           "unwritten; zero them instead";
  }
  return "";
}

// The tensor-core kernels' (bf16 / fp16) vector accesses and the alignment each needs: Q, K, V
// and dout by 16-byte cp.async (rows of H D or HKV D elements, so every row is aligned when the
// base is), the forward's fp32 accumulator rows in 8-byte pairs (load_pair, store_pair), the
// backward's dq by red.global.add.v4 (16 bytes), dk and dv by .v2 (8). A misaligned pointer stops
// the device with "misaligned address" and no name; the launchers refuse it first with these
// lines ("" when all are aligned). A buffer of its own (cudaMalloc: 256 bytes) always is; one
// carved out of a larger allocation must place its parts so.
inline std::string misaligned(const char* name, const void* pointer, int bytes) {
  if (pointer == nullptr || reinterpret_cast<uintptr_t>(pointer) % static_cast<uintptr_t>(bytes) == 0) return "";
  return std::string(name) + " is not " + std::to_string(bytes) +
         "-byte aligned (the kernel reads it in vectors of that size); start it on a " + std::to_string(bytes) +
         "-byte boundary, e.g. a buffer of its own";
}
// The first of `whys` that is not "" ("" when none).
inline std::string first_problem(std::initializer_list<std::string> whys) {
  for (const std::string& why : whys)
    if (!why.empty()) return why;
  return "";
}
inline std::string misaligned_inputs(const AttentionParams& a) {
  return first_problem({misaligned("q", a.q, 16), misaligned("k", a.k, 16), misaligned("v", a.v, 16)});
}
inline std::string misaligned_pointer(const ForwardParams& p) {
  return first_problem({misaligned_inputs(p.a), misaligned("ForwardParams::acc_max", p.acc_max, 4),
                        misaligned("ForwardParams::acc_sum", p.acc_sum, 4),
                        misaligned("ForwardParams::acc_out", p.acc_out, 8)});
}
inline std::string misaligned_pointer(const BackwardParams& p) {
  return first_problem({misaligned_inputs(p.a), misaligned("BackwardParams::dout", p.dout, 16),
                        misaligned("BackwardParams::dq", p.dq, 16), misaligned("BackwardParams::dk", p.dk, 8),
                        misaligned("BackwardParams::dv", p.dv, 8)});
}

}  // namespace ringlab::gpu
