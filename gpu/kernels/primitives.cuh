// The device primitives every ringlab kernel is written with — one place for the inline PTX.
//
//   ldmatrix_x4 / ldmatrix_x4_trans   four 8x8 tiles of 16-bit elements, shared memory -> registers
//   stmatrix_x4                       the reverse (sm_90): four 8x8 tiles, registers -> shared memory
//   mma_16816<T>                      D(16x8 f32) += A(16x16 T, row) * B(16x8 T, col), T = bf16 | fp16
//   cp_async_16 / commit / wait<N>    asynchronous 16-byte global -> shared copies (zero-fill)
//   cp_async_4                        the same for one 4-byte word (per-row fp32 / int32 data)
//   shfl_xor, atomic_add, fast_exp    warp shuffle, fp32 atomic add, exp via ex2.approx
//   warp_any                          whether any lane of the warp holds true (vote.any)
//   atomic_add_vector<N>              N = 2 | 4 consecutive fp32 atomic adds in one red.global.add.vN
//   atomic_add_vector_if<N>           the same under a predicate: no branch around it
//   load_pair, store_pair             two consecutive fp32 of global memory in one 8-byte access
//   exp2_approx                       2^x, ex2.approx.ftz itself
//   sync_threads, sync_site<N>        __syncthreads(); sync_site names the kernel's barrier site N
//   pack2<T>, to_float                two floats -> one 32-bit register of T; T -> float
//   from_float<T>                     one float -> T, rounded as pack2 rounds (float: itself)
//   swizzle<D>                        XOR-swizzled offset in a (rows x D) tile of 16-bit elements
//   load_tile_async<T, D, rows, thr>  a (rows x D) tile, global -> swizzled shared memory by cp.async
//   load_rows_async<T, D, rows, thr>  the same, a thread's copies one column chunk of rows kThreads/(D/8)
//                                     apart: constant shared offsets and a running global pointer
//   load_row_pair_async<...>          load_rows_async for two tensors' same rows, one offset for both
//
// Fragment layouts (PTX ISA, "Matrix Fragments for mma.m16n8k16"), lane = 4 * g + t:
//   A regs {a0,a1,a2,a3}: (row g, cols 2t..2t+1), (row g+8, 2t..), (row g, 2t+8..), (row g+8, 2t+8..)
//   B regs {b0,b1}:       (k 2t..2t+1, col g), (k 2t+8.., col g)
//   C/D   {c0,c1,c2,c3}:  (row g, cols 2t, 2t+1), (row g+8, cols 2t, 2t+1)
// ldmatrix.x4: lanes 8i..8i+7 give the row addresses of tile i; register i of lane l receives
// tile i's (row l/4, cols 2(l%4)..+1), or with .trans its (rows 2(l%4)..+1, col l/4).
// stmatrix.x4: the same addresses; register i of lane l is written to tile i's (row l/4, cols
// 2(l%4)..+1), which is where a C fragment's pair sits: {c0,c1} of n-tile nt is tile (rows 0-7, nt),
// {c2,c3} tile (rows 8-15, nt).
//
// Compiled by nvcc (the real instructions) or, for the CPU tests, after
// gpu/emulation/warp_emulator.hpp, which defines RINGLAB_WARP_EMULATOR and emulates each
// primitive lane by lane with the same layouts — so the kernels' index arithmetic runs in CI.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#if defined(__CUDACC__)
#define RINGLAB_DEVICE __device__ __forceinline__
#define RINGLAB_KERNEL __global__
#define RINGLAB_LAUNCH_BOUNDS(threads) __launch_bounds__(threads)
#define RINGLAB_DYNAMIC_SMEM(name) extern __shared__ __align__(128) unsigned char name[]
#define RINGLAB_UNROLL _Pragma("unroll")
#elif !defined(RINGLAB_WARP_EMULATOR)
#error "gpu/kernels/primitives.cuh needs nvcc, or gpu/emulation/warp_emulator.hpp included first"
#endif

namespace ringlab::gpu::dev {

#if defined(__CUDACC__)

RINGLAB_DEVICE uint32_t smem_u32(const void* pointer) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(pointer));
}

// ldmatrix reads shared memory through an address the compiler cannot see: the "memory" clobber
// keeps it after the stores (and __syncthreads) that filled the tile, as for cp.async below.
RINGLAB_DEVICE void ldmatrix_x4(uint32_t (&r)[4], const void* row_address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_u32(row_address))
               : "memory");
}

RINGLAB_DEVICE void ldmatrix_x4_trans(uint32_t (&r)[4], const void* row_address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_u32(row_address))
               : "memory");
}

// One instruction for four 8x8 tiles where 32-bit stores take four (sm_90). The "memory" clobber
// keeps it before the barrier and the ldmatrix reads that follow it.
RINGLAB_DEVICE void stmatrix_x4(const uint32_t (&r)[4], void* row_address) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(smem_u32(row_address)),
               "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3])
               : "memory");
}

template <class T>
RINGLAB_DEVICE void mma_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1);

// The two specialisations differ only in the PTX type of A and B.
#define RINGLAB_MMA_16816(T, PTX_TYPE)                                                              \
  template <>                                                                                       \
  RINGLAB_DEVICE void mma_16816<T>(float(&d)[4], const uint32_t(&a)[4], uint32_t b0, uint32_t b1) { \
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32." PTX_TYPE "." PTX_TYPE                     \
                 ".f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"           \
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])                                   \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));                   \
  }
RINGLAB_MMA_16816(__nv_bfloat16, "bf16")
RINGLAB_MMA_16816(__half, "f16")
#undef RINGLAB_MMA_16816

// 16 bytes global -> shared; when !valid nothing is read and the 16 bytes are zero-filled.
RINGLAB_DEVICE void cp_async_16(void* smem_destination, const void* global_source, bool valid) {
  const int source_bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_u32(smem_destination)), "l"(global_source),
               "r"(source_bytes)
               : "memory");
}

// One 4-byte word global -> shared (cp.async.ca: .cg takes only 16 bytes); zero-filled when
// !valid. For per-row data whose rows need not start 16-byte aligned (lse at (b H + h) S + q0).
RINGLAB_DEVICE void cp_async_4(void* smem_destination, const void* global_source, bool valid) {
  const int source_bytes = valid ? 4 : 0;
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(smem_u32(smem_destination)), "l"(global_source),
               "r"(source_bytes)
               : "memory");
}

RINGLAB_DEVICE void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }

// Waits until at most `kPending` of this thread's committed groups are still in flight.
template <int kPending>
RINGLAB_DEVICE void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

RINGLAB_DEVICE float shfl_xor(float value, int lane_mask) { return __shfl_xor_sync(0xffffffffu, value, lane_mask); }
RINGLAB_DEVICE int shfl_xor(int value, int lane_mask) { return __shfl_xor_sync(0xffffffffu, value, lane_mask); }
RINGLAB_DEVICE bool warp_any(bool value) { return __any_sync(0xffffffffu, value) != 0; }
RINGLAB_DEVICE void sync_threads() { __syncthreads(); }
// __syncthreads() at a kernel's numbered barrier site: the number exists for the emulator, whose
// tests delete one site at a time (emu::DropBarrier); here it compiles to the bare barrier.
template <int kSite>
RINGLAB_DEVICE void sync_site() {
  __syncthreads();
}
RINGLAB_DEVICE void atomic_add(float* address, float value) { atomicAdd(address, value); }
// values[0..N) added to address[0..N) by one red.global.add.v2/.v4.f32 (sm_90): one instruction
// where scalar atomics take N (fewer memory requests is the aim: not measured here). The address
// must point to global memory, aligned to 4 N bytes. No old value is returned; the emulator takes
// each element for an independent atomic add, the weakest reading of the vector form.
template <int N>
RINGLAB_DEVICE void atomic_add_vector(float* address, const float (&values)[N]) {
  static_assert(N == 2 || N == 4, "red.global.add has .v2 and .v4 forms for f32");
  if constexpr (N == 2) {
    asm volatile("red.global.add.v2.f32 [%0], {%1, %2};\n" ::"l"(address), "f"(values[0]), "f"(values[1]) : "memory");
  } else {
    asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"l"(address), "f"(values[0]), "f"(values[1]),
                 "f"(values[2]), "f"(values[3])
                 : "memory");
  }
}
// atomic_add_vector when `add`, as one predicated instruction (@p red...): no branch, so a run of
// them stays one basic block, where `if (add)` made each its own (with a convergence barrier
// around it) and ptxas recomputed the 64-bit address in every one. When !add the address is
// never accessed and need not be valid.
template <int N>
RINGLAB_DEVICE void atomic_add_vector_if(bool add, float* address, const float (&values)[N]) {
  static_assert(N == 2 || N == 4, "red.global.add has .v2 and .v4 forms for f32");
  if constexpr (N == 2) {
    asm volatile(
        "{\n .reg .pred p;\n setp.ne.b32 p, %3, 0;\n @p red.global.add.v2.f32 [%0], {%1, %2};\n}\n" ::"l"(address),
        "f"(values[0]), "f"(values[1]), "r"(static_cast<int>(add))
        : "memory");
  } else {
    asm volatile(
        "{\n .reg .pred p;\n setp.ne.b32 p, %5, 0;\n @p red.global.add.v4.f32 [%0], {%1, %2, %3, %4};\n}\n" ::"l"(
            address),
        "f"(values[0]), "f"(values[1]), "f"(values[2]), "f"(values[3]), "r"(static_cast<int>(add))
        : "memory");
  }
}
// Two consecutive floats of global memory in one 8-byte access (ld / st.global.v2.f32: half the
// instructions of two scalar ones, and a thread's pair in one sector). The address must be 8-byte
// aligned; the emulator checks it.
RINGLAB_DEVICE void load_pair(const float* address, float& x, float& y) {
  const float2 v = *reinterpret_cast<const float2*>(address);
  x = v.x, y = v.y;
}
RINGLAB_DEVICE void store_pair(float* address, float x, float y) {
  *reinterpret_cast<float2*>(address) = make_float2(x, y);
}
RINGLAB_DEVICE float fast_exp(float x) { return __expf(x); }
// 2^x by ex2.approx.ftz.f32 alone: for callers that fold log2(e) into a scale they apply anyway
// (one FFMA then ex2, where fast_exp would multiply again).
RINGLAB_DEVICE float exp2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// Two floats -> one 32-bit register of T (cvt.rn: round to nearest even); the emulator defines its
// own from the PTX definition (warp_emulator.hpp).
template <class T>
RINGLAB_DEVICE uint32_t pack2(float lo, float hi);

template <>
RINGLAB_DEVICE uint32_t pack2<__nv_bfloat16>(float lo, float hi) {
  const __nv_bfloat162 pair = __floats2bfloat162_rn(lo, hi);  // .x (lo) in the low 16 bits
  uint32_t bits;
  // CUDA's cuda_bf16.hpp gives __nv_bfloat162 user-provided copy operations, so C++ does not call
  // it trivially copyable, yet it is two 16-bit values; memcpy is how CUDA's docs reinterpret it.
  std::memcpy(&bits, &pair, sizeof bits);  // NOLINT(bugprone-undefined-memory-manipulation)
  return bits;
}

template <>
RINGLAB_DEVICE uint32_t pack2<__half>(float lo, float hi) {
  const __half2 pair = __floats2half2_rn(lo, hi);
  uint32_t bits;
  std::memcpy(&bits, &pair, sizeof bits);  // NOLINT(bugprone-undefined-memory-manipulation): as above (cuda_fp16.hpp)
  return bits;
}

#endif  // __CUDACC__

// ---- shared by the device and the emulator ---------------------------------------------------

RINGLAB_DEVICE int imin(int a, int b) { return a < b ? a : b; }
RINGLAB_DEVICE int imax(int a, int b) { return a > b ? a : b; }

RINGLAB_DEVICE float to_float(float x) { return x; }
RINGLAB_DEVICE float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
RINGLAB_DEVICE float to_float(__half x) { return __half2float(x); }

// One float -> T with pack2's rounding (cvt.rn, the emulator's own cvt on the CPU); float is itself.
template <class T>
RINGLAB_DEVICE T from_float(float x) {
  if constexpr (std::is_same_v<T, float>) {
    return x;
  } else {
    // CUDA's raw types carry the bits; T is constructible from them on the host and the device.
    using Raw = std::conditional_t<std::is_same_v<T, __nv_bfloat16>, __nv_bfloat16_raw, __half_raw>;
    Raw raw;
    raw.x = static_cast<unsigned short>(pack2<T>(x, 0.f));  // x is the low half
    return T(raw);
  }
}

// Offset of element (row, col) in a tile of rows of D 16-bit elements, with the 16-byte chunks of
// each row XOR-permuted by the row's low three bits. ldmatrix reads 8 rows at the same column
// chunk; unswizzled, rows 128 or 256 bytes apart all hit the same banks (an 8-way conflict);
// swizzled, the 8 rows' chunks land in 8 different bank groups. cp.async writes whole chunks, so
// the permutation is free. Needs D >= 64 (8 chunks per row).
template <int D>
RINGLAB_DEVICE int swizzle(int row, int col) {
  static_assert(D % 64 == 0, "the swizzle permutes 8 chunks of 16 bytes per row");
  return row * D + ((((col >> 3) ^ (row & 7))) << 3) + (col & 7);
}

// Min and max of positions[begin, begin + count), reduced across the warp: every lane (and every
// warp that calls it) gets the same answer, so block-wide decisions taken on it are uniform.
// lo, hi: the minimum and maximum over the warp's lanes (every lane gets them).
RINGLAB_DEVICE void warp_min_max(int& lo, int& hi) {
  RINGLAB_UNROLL
  for (int mask = 16; mask > 0; mask >>= 1) {
    lo = imin(lo, shfl_xor(lo, mask));
    hi = imax(hi, shfl_xor(hi, mask));
  }
}

RINGLAB_DEVICE void position_range(const int32_t* positions, int begin, int count, int lane, int& lo, int& hi) {
  lo = 2147483647;
  hi = -2147483647 - 1;
  for (int r = lane; r < count; r += 32) {
    const int p = positions[begin + r];
    lo = imin(lo, p);
    hi = imax(hi, p);
  }
  warp_min_max(lo, hi);
}

// The A fragment (16 rows x 16 k) packed to T from the C fragments of n-tiles 2kc and 2kc + 1 of a
// 16-row accumulator tile: how P (or dS) becomes an operand without leaving registers.
template <class T, int kTiles>
RINGLAB_DEVICE void a_fragment(const float (&c)[kTiles][4], int kc, uint32_t (&a)[4]) {
  a[0] = pack2<T>(c[2 * kc][0], c[2 * kc][1]);
  a[1] = pack2<T>(c[2 * kc][2], c[2 * kc][3]);
  a[2] = pack2<T>(c[2 * kc + 1][0], c[2 * kc + 1][1]);
  a[3] = pack2<T>(c[2 * kc + 1][2], c[2 * kc + 1][3]);
}

// The (batch, head) of a block of an attention launch (bh = b H + h: blockIdx.y, or the forward's
// block order, kernel_params.hpp),
// the key/value head its query head reads under GQA, and the row strides of q and k/v (elements).
struct BlockHead {
  int b = 0, h = 0, hk = 0;
  int64_t q_stride = 0, kv_stride = 0;
};
template <class Params>
RINGLAB_DEVICE BlockHead block_head(const Params& a, int dim, int bh = static_cast<int>(blockIdx.y)) {
  BlockHead head;
  head.b = bh / a.heads;
  head.h = bh % a.heads;
  head.hk = head.h / (a.heads / a.kv_heads);
  head.q_stride = static_cast<int64_t>(a.heads) * dim;
  head.kv_stride = static_cast<int64_t>(a.kv_heads) * dim;
  return head;
}

// ---- the mask (reference/mask.hpp) ------------------------------------------------------------
//
// A query at global position i sees the keys of one interval of positions, [first, last]
// (Mask::keys_of): its document's bounds (the launch's q_doc_first / q_doc_last, empty for a
// padding row), cut at i by the causal mask and to i - W < j (and j < i + W when not causal) by a
// window W. Every mask decision below is a comparison of key positions against such intervals.

inline constexpr int kFarPosition = 1 << 30;  // "no bound": positions and W stay below it (the host checks)
// The position given to a key past a tile's or block's last one: below every span, so no row sees it.
inline constexpr int kUnseenPosition = -kFarPosition - 1;

// The keys query row `row` (an index into q_pos) may see; empty (first > last) for a padding row.
struct KeySpan {
  int first = -kFarPosition, last = kFarPosition;
  RINGLAB_DEVICE bool contains(int position) const { return first <= position && position <= last; }
};

template <class Params>
RINGLAB_DEVICE bool has_mask(const Params& a) {
  return a.causal || a.window > 0 || a.q_doc_first != nullptr;
}

// A row's span as two offsets fixed per launch: the row at position pos sees [pos - before,
// pos + after], cut to its document. A span is then two adds, a max and a min, without a branch
// (the backward's partial tiles compute one per query column). Exact for positions inside
// (-kFarPosition, kFarPosition), which the host checks.
struct SpanReach {
  int before = kFarPosition, after = kFarPosition;
};

template <class Params>
RINGLAB_DEVICE SpanReach span_reach(const Params& a) {
  SpanReach reach;
  if (a.window > 0) reach.before = reach.after = a.window - 1;
  if (a.causal) reach.after = 0;
  return reach;
}

// The span of a row at `pos` whose document is [doc_first, doc_last] (a launch without documents:
// -kFarPosition, kFarPosition), from its position and bounds already in hand (the backward copies
// them to shared memory with the query tile).
RINGLAB_DEVICE KeySpan keys_of(SpanReach reach, int pos, int doc_first, int doc_last) {
  return KeySpan{imax(doc_first, pos - reach.before), imin(doc_last, pos + reach.after)};
}

template <class Params>
RINGLAB_DEVICE KeySpan row_keys(const Params& a, int row) {
  const bool documents = a.q_doc_first != nullptr;
  return keys_of(span_reach(a), a.q_pos[row], documents ? a.q_doc_first[row] : -kFarPosition,
                 documents ? a.q_doc_last[row] : kFarPosition);
}

// The bounds of the spans of a query tile's rows [begin, begin + count): min and max of their
// first and of their last keys, reduced across the warp like position_range (uniform answers).
struct TileSpans {
  int first_lo = kFarPosition, first_hi = -kFarPosition;
  int last_lo = kFarPosition, last_hi = -kFarPosition;
  RINGLAB_DEVICE void add(const KeySpan& keys) {
    first_lo = imin(first_lo, keys.first), first_hi = imax(first_hi, keys.first);
    last_lo = imin(last_lo, keys.last), last_hi = imax(last_hi, keys.last);
  }
};

// The bounds over the warp's lanes (every lane gets the same answer).
RINGLAB_DEVICE TileSpans warp_reduce(TileSpans t) {
  RINGLAB_UNROLL
  for (int mask = 16; mask > 0; mask >>= 1) {
    t.first_lo = imin(t.first_lo, shfl_xor(t.first_lo, mask));
    t.first_hi = imax(t.first_hi, shfl_xor(t.first_hi, mask));
    t.last_lo = imin(t.last_lo, shfl_xor(t.last_lo, mask));
    t.last_hi = imax(t.last_hi, shfl_xor(t.last_hi, mask));
  }
  return t;
}

template <class Params>
RINGLAB_DEVICE TileSpans tile_spans(const Params& a, int begin, int count, int lane) {
  TileSpans t;
  for (int r = lane; r < count; r += 32) t.add(row_keys(a, begin + r));
  return warp_reduce(t);
}

// How a (query tile, key tile) pair is computed; mirrors the reference kernel's classify(). The key
// tile's positions lie in [k_lo, k_hi]. Skip: every row's span ends before k_lo, or every row's
// starts after k_hi. Full: every row's span covers [k_lo, k_hi]. Otherwise partial (per-element
// predicate). Exact for the causal mask (first = -far: the old k_lo > q_hi / k_hi <= q_lo tests);
// for documents and windows a tile the reference skips may be computed as partial (a query tile
// whose rows' spans lie on both sides of the key tile), which costs time, never correctness.
enum TileKind : int { kTileSkip = 0, kTileFull = 1, kTilePartial = 2 };

RINGLAB_DEVICE int classify_tile(bool masked, bool skip_masked, const TileSpans& q, int k_lo, int k_hi) {
  if (!masked) return kTileFull;
  if (q.last_hi < k_lo || q.first_lo > k_hi) return skip_masked ? kTileSkip : kTilePartial;  // nothing visible
  if (q.first_hi <= k_lo && k_hi <= q.last_lo) return kTileFull;                             // all visible
  return kTilePartial;
}

// Copies rows [0, valid) of a (kRows x D) tile from global memory (row stride `stride` elements)
// into swizzled shared memory with cp.async; rows >= valid are zero-filled.
template <class T, int D, int kRows, int kThreads>
RINGLAB_DEVICE void load_tile_async(T* smem, const T* global, int64_t stride, int valid) {
  constexpr int kChunksPerRow = D / 8;
  for (int c = threadIdx.x; c < kRows * kChunksPerRow; c += kThreads) {
    const int row = c / kChunksPerRow, chunk = c % kChunksPerRow;
    const bool ok = row < valid;
    cp_async_16(smem + swizzle<D>(row, chunk * 8), ok ? global + row * stride + chunk * 8 : global, ok);
  }
}

// Copies rows [0, valid) of a (kRows x D) tile from global memory (row stride `stride` elements)
// into swizzled shared memory with cp.async, rows >= valid zero-filled: load_tile_async's work,
// arranged so that a thread's copies are one column chunk of rows row0 + kRowsPerPass i, which all
// have the same swizzled chunk (kRowsPerPass is a multiple of 8). So the shared-memory addresses
// are constant offsets from one, and the global ones a running pointer instead of a 64-bit row
// offset per copy that the compiler may keep in registers across the main loop.
// This thread's copies of a (kRows x D) tile in load_rows_async's arrangement: its first row and
// its column chunk, and the rows between its copies.
template <int D, int kRows, int kThreads>
struct RowCopies {
  static constexpr int kChunksPerRow = D / 8, kRowsPerPass = kThreads / kChunksPerRow;
  static constexpr int kPasses = kRows / kRowsPerPass;
  static_assert(kRowsPerPass % 8 == 0 && kRows % kRowsPerPass == 0, "rows of one swizzle phase per thread");
  int row0 = static_cast<int>(threadIdx.x) / kChunksPerRow, chunk = static_cast<int>(threadIdx.x) % kChunksPerRow;
  RINGLAB_DEVICE int destination() const { return swizzle<D>(row0, chunk * 8); }  // pass i: + i kRowsPerPass D
};

template <class T, int D, int kRows, int kThreads>
RINGLAB_DEVICE void load_rows_async(T* smem, const T* global, int64_t stride, int valid) {
  using Copies = RowCopies<D, kRows, kThreads>;
  const Copies c;
  T* destination = smem + c.destination();
  const T* source = global + c.row0 * stride + c.chunk * 8;
  RINGLAB_UNROLL
  for (int i = 0; i < Copies::kPasses; ++i) {
    const bool ok = c.row0 + i * Copies::kRowsPerPass < valid;
    cp_async_16(destination + i * Copies::kRowsPerPass * D, ok ? source : global, ok);
    source += Copies::kRowsPerPass * stride;
  }
}

// load_rows_async for two tiles of the same rows (rows [row, row + valid) of two tensors with the
// same row stride, as the backward's Q and dO): one global element offset per copy serves both.
template <class T, int D, int kRows, int kThreads>
RINGLAB_DEVICE void load_row_pair_async(T* smem_a, const T* global_a, T* smem_b, const T* global_b, int64_t row,
                                        int64_t stride, int valid) {
  using Copies = RowCopies<D, kRows, kThreads>;
  const Copies c;
  const int destination = c.destination();
  int64_t at = (row + c.row0) * stride + c.chunk * 8;
  RINGLAB_UNROLL
  for (int i = 0; i < Copies::kPasses; ++i) {
    const bool ok = c.row0 + i * Copies::kRowsPerPass < valid;
    cp_async_16(smem_a + destination + i * Copies::kRowsPerPass * D, global_a + (ok ? at : 0), ok);
    cp_async_16(smem_b + destination + i * Copies::kRowsPerPass * D, global_b + (ok ? at : 0), ok);
    at += Copies::kRowsPerPass * stride;
  }
}

}  // namespace ringlab::gpu::dev
