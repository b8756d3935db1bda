// A CPU emulator of the CUDA execution model, just enough to run ringlab's attention kernels
// (gpu/kernels/*.cuh) on a machine without a GPU — so CI executes the kernels' index arithmetic,
// swizzles, fragment layouts and pipelines, not only compiles them.
//
// Every CUDA thread of a block is a fiber (ucontext) on one OS thread; __syncthreads() and each
// warp-collective primitive are cooperative barriers. The primitives of
// gpu/kernels/primitives.cuh are emulated lane by lane from their PTX definitions:
//   ldmatrix(.trans)   reads the rows whose addresses the lanes gave (checked: 16-byte aligned,
//                      inside the block's shared memory)
//   stmatrix           writes them, from the lanes that hold each row's pairs (same checks)
//   mma m16n8k16       rebuilds A and B from the 32 lanes' fragments, fp32 sums
//   cp.async           queued per thread, lands at some point before the wait_group covering it
//   shuffles, votes    exchanged through the warp's slots (all 32 lanes must take part)
//   ex2.approx, cvt    fast_exp, exp2_approx and pack2 with the precision the PTX ISA documents
//                      (ex2_approx, to_bf16_bits, to_fp16_bits below), not the host's std::exp
// A barrier that not every thread reaches is reported (a divergent __syncthreads or shuffle)
// instead of hanging.
//
// Adversarial modes (Adversary; all on by default, seeded, so a kernel that is right only in a
// friendly order fails its test):
//   shuffle         blocks run in a random order; within a block, one barrier interval (the code
//                   between two __syncthreads) at a time, warp after warp in a fresh random order,
//                   each warp's lanes in a random order at every step — so a warp runs far ahead of
//                   the others instead of in lockstep
//   async_landing   each cp.async lands at a random step between its issue and the wait_group that
//                   covers it (log-uniform delay: some at once, some only at the wait)
//   race_check      a warp that reads shared memory another warp wrote in the same barrier interval,
//                   or writes shared memory another warp read or wrote in it, fails the launch with
//                   the kernel, block, interval, byte offset and both warps. Seen: ldmatrix reads,
//                   cp.async writes (from issue until the wait_group), and plain stores (found by
//                   comparing shared memory before and after each warp's turn). Not seen: plain
//                   loads — a plain load racing with a store shows as a wrong result instead, since
//                   the shuffled order makes the reader run before or after the writer at random.
//   atomic_shuffle  atomic adds are queued and applied (read-modify-write) in a random order at
//                   the next barrier and at the end of the block
// The seed is Adversary::seed (RINGLAB_EMU_SEED in the environment sets it at start-up;
// RINGLAB_EMU_ADVERSARY=0 turns every mode off); each launch and block derives its own stream from
// it, and a failure names the seed and the launch, so re-running the test with RINGLAB_EMU_SEED set
// reproduces it.
//
// What it is not: a timing model, a memory-model checker (intra-warp ordering is not checked), or
// proof that the PTX layouts are as written in primitives.cuh — it implements the same documented
// layouts. Real-GPU tests (tests/gpu/test_gpu_*.cpp) remain the proof.
#pragma once

#define RINGLAB_WARP_EMULATOR 1

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <type_traits>

namespace ringlab::emu {

struct Dim3 {
  unsigned x = 0, y = 0, z = 0;
};

enum class Operand : uint8_t { bf16, fp16 };

// The adversarial modes (top of file). Process-wide: set them before launching, not during. With
// shuffle off, blocks, warps and lanes take their turns in index order (still a warp at a time).
struct Adversary {
  bool shuffle = true;
  bool async_landing = true;
  bool race_check = true;
  bool atomic_shuffle = true;
  uint64_t seed = 20261124;
};
Adversary& adversary();
// Launches are numbered per OS thread, and each launch's random stream derives from the seed and its
// number; a test runner restarts the numbering at each test case, so a failing case reproduces
// when run alone.
void restart_launch_numbers();

// Deletes barrier site `site` (sync_site<site>() in a kernel, numbered in its source) from every
// launch on this thread while in scope: how the tests prove that each barrier is needed, or say
// why one is not. Site 0 (no site) is never dropped.
class DropBarrier {
 public:
  explicit DropBarrier(int site);
  ~DropBarrier();
  DropBarrier(const DropBarrier&) = delete;
  DropBarrier& operator=(const DropBarrier&) = delete;

 private:
  int previous_;
};

// The fiber running now: its CUDA coordinates.
struct ThreadCoordinates {
  Dim3 thread_idx, block_idx;
};
const ThreadCoordinates& current();
Dim3 block_dim();
Dim3 grid_dim();
unsigned char* dynamic_shared_memory();

void sync_block(int site = 0);
float shfl_xor(float value, int lane_mask);
int shfl_xor(int value, int lane_mask);
// vote.any: whether any of the 32 lanes passed true (all must take part, as in a shuffle).
bool warp_any(bool value);
void ldmatrix(uint32_t (&r)[4], const void* row_address, bool trans);
// stmatrix.x4: lane l writes the 16-byte row whose address it gave (tile l/8, row l%8), from the
// four lanes that hold that row's pairs (register l/8 of lanes 4 (l%8) .. 4 (l%8) + 3).
void stmatrix(const uint32_t (&r)[4], void* row_address);
void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1, Operand type);
// cp.async of `bytes` (16: .cg; 4: .ca, a single word), zero-filled when !valid.
void cp_async(void* smem_destination, const void* global_source, bool valid, int bytes = 16);
void cp_async_commit();
void cp_async_wait(int pending);
void atomic_add(float* address, float value);
// red.global.add.v2/.v4.f32: `count` (2 or 4) consecutive floats, the address aligned to their size.
void atomic_add_vector(float* address, const float* values, int count);
// ld / st.global.v2.f32 (load_pair, store_pair): fails unless the address is 8-byte aligned.
void check_pair_aligned(const float* address, const char* instruction);

// ex2.approx.ftz.f32: a subnormal input counts as 0, a result below 2^-126 is +0 (.ftz), and the
// result is 2^x rounded to 22 significant bits: a deterministic model of the PTX ISA's bound
// (maximum relative error 2^-22) — the host's exp2 computed in double, then rounded to nearest.
float ex2_approx(float x);
// __expf(x) as nvcc compiles it: ex2.approx.ftz.f32(x * log2(e)), the product rounded to fp32.
float fast_exp(float x);
// cvt.rn.bf16.f32 and cvt.rn.f16.f32 as the PTX ISA defines them: round to nearest, ties to even;
// NaN -> the canonical NaN (0x7fff); fp16 overflows to infinity from 65520 up and keeps its
// subnormals (no .ftz). Written here from the definition rather than taken from CUDA's host code.
uint16_t to_bf16_bits(float x);
uint16_t to_fp16_bits(float x);

// Runs `kernel` (a function of no arguments reading the coordinates above) over the grid, one
// block at a time, with `threads` threads per block (a multiple of 32) and `smem_bytes` of dynamic
// shared memory (filled with a NaN pattern, so reading unwritten shared memory shows).
// Throws std::runtime_error on a barrier deadlock, a bad ldmatrix / cp.async address or (race_check)
// a shared-memory race; `name` names the kernel in those messages.
void launch(Dim3 grid, int threads, int smem_bytes, const std::function<void()>& kernel, const char* name = "kernel");

}  // namespace ringlab::emu

#define threadIdx (::ringlab::emu::current().thread_idx)
#define blockIdx (::ringlab::emu::current().block_idx)
#define blockDim (::ringlab::emu::block_dim())
#define gridDim (::ringlab::emu::grid_dim())
#define RINGLAB_DEVICE inline
#define RINGLAB_KERNEL inline
#define RINGLAB_LAUNCH_BOUNDS(threads)
#define RINGLAB_DYNAMIC_SMEM(name) unsigned char* name = ::ringlab::emu::dynamic_shared_memory()
#define RINGLAB_UNROLL

namespace ringlab::gpu::dev {

inline void ldmatrix_x4(uint32_t (&r)[4], const void* row_address) { emu::ldmatrix(r, row_address, false); }
inline void ldmatrix_x4_trans(uint32_t (&r)[4], const void* row_address) { emu::ldmatrix(r, row_address, true); }
inline void stmatrix_x4(const uint32_t (&r)[4], void* row_address) { emu::stmatrix(r, row_address); }

template <class T>
inline void mma_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  emu::mma(d, a, b0, b1, std::is_same_v<T, __nv_bfloat16> ? emu::Operand::bf16 : emu::Operand::fp16);
}

inline void cp_async_16(void* smem_destination, const void* global_source, bool valid) {
  emu::cp_async(smem_destination, global_source, valid);
}
inline void cp_async_4(void* smem_destination, const void* global_source, bool valid) {
  emu::cp_async(smem_destination, global_source, valid, 4);
}
inline void cp_async_commit() { emu::cp_async_commit(); }
template <int kPending>
inline void cp_async_wait() {
  emu::cp_async_wait(kPending);
}
inline float shfl_xor(float value, int lane_mask) { return emu::shfl_xor(value, lane_mask); }
inline int shfl_xor(int value, int lane_mask) { return emu::shfl_xor(value, lane_mask); }
inline bool warp_any(bool value) { return emu::warp_any(value); }
inline void sync_threads() { emu::sync_block(); }
template <int kSite>
inline void sync_site() {
  emu::sync_block(kSite);
}
inline void atomic_add(float* address, float value) { emu::atomic_add(address, value); }
template <int N>
inline void atomic_add_vector(float* address, const float (&values)[N]) {
  static_assert(N == 2 || N == 4, "red.global.add has .v2 and .v4 forms for f32");
  emu::atomic_add_vector(address, values, N);
}
template <int N>
inline void atomic_add_vector_if(bool add, float* address, const float (&values)[N]) {
  static_assert(N == 2 || N == 4, "red.global.add has .v2 and .v4 forms for f32");
  if (add) emu::atomic_add_vector(address, values, N);  // predicated off: the address is not touched
}
inline void load_pair(const float* address, float& x, float& y) {
  emu::check_pair_aligned(address, "ld.global.v2.f32");
  x = address[0], y = address[1];
}
inline void store_pair(float* address, float x, float y) {
  emu::check_pair_aligned(address, "st.global.v2.f32");
  address[0] = x, address[1] = y;
}
inline float fast_exp(float x) { return emu::fast_exp(x); }
inline float exp2_approx(float x) { return emu::ex2_approx(x); }

template <class T>
uint32_t pack2(float lo, float hi);
template <>
inline uint32_t pack2<__nv_bfloat16>(float lo, float hi) {
  return emu::to_bf16_bits(lo) | (static_cast<uint32_t>(emu::to_bf16_bits(hi)) << 16);
}
template <>
inline uint32_t pack2<__half>(float lo, float hi) {
  return emu::to_fp16_bits(lo) | (static_cast<uint32_t>(emu::to_fp16_bits(hi)) << 16);
}

}  // namespace ringlab::gpu::dev
