// A CPU emulator of the CUDA execution model, just enough to run ringlab's attention kernels
// (gpu/kernels/*.cuh) on a machine without a GPU — so CI executes the kernels' index arithmetic,
// swizzles, fragment layouts and pipelines, not only compiles them.
//
// Every CUDA thread of a block is a fiber (ucontext) on one OS thread, scheduled round-robin;
// __syncthreads() and each warp-collective primitive are cooperative barriers. The primitives
// of gpu/kernels/primitives.cuh are emulated lane by lane from their PTX definitions:
//   ldmatrix(.trans)   reads the rows whose addresses the lanes gave (checked: 16-byte aligned,
//                      inside the block's shared memory)
//   mma m16n8k16       rebuilds A and B from the 32 lanes' fragments, fp32 sums
//   cp.async           queued per thread and performed at cp.async.wait_group, so a kernel that
//                      reads a stage before waiting for it reads stale data and fails its test
//   shuffles           exchanged through the warp's slots (all 32 lanes must take part)
// A barrier that not every thread reaches is reported (a divergent __syncthreads or shuffle)
// instead of hanging.
//
// What it is not: a timing model, a memory-model checker, or proof that the PTX layouts are as
// written in primitives.cuh — it implements the same documented layouts. Real-GPU tests
// (tests/gpu/test_gpu_*.cpp) remain the proof.
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

// The fiber running now: its CUDA coordinates.
struct ThreadCoordinates {
  Dim3 thread_idx, block_idx;
};
const ThreadCoordinates& current();
Dim3 block_dim();
Dim3 grid_dim();
unsigned char* dynamic_shared_memory();

void sync_block();
float shfl_xor(float value, int lane_mask);
int shfl_xor(int value, int lane_mask);
void ldmatrix(uint32_t (&r)[4], const void* row_address, bool trans);
void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1, Operand type);
void cp_async(void* smem_destination, const void* global_source, bool valid);
void cp_async_commit();
void cp_async_wait(int pending);

// Runs `kernel` (a function of no arguments reading the coordinates above) over the grid, one
// block at a time, with `threads` threads per block (a multiple of 32) and `smem_bytes` of dynamic
// shared memory (filled with a NaN pattern, so reading unwritten shared memory shows).
// Throws std::runtime_error on a barrier deadlock or a bad ldmatrix / cp.async address.
void launch(Dim3 grid, int threads, int smem_bytes, const std::function<void()>& kernel);

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

template <class T>
inline void mma_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  emu::mma(d, a, b0, b1, std::is_same_v<T, __nv_bfloat16> ? emu::Operand::bf16 : emu::Operand::fp16);
}

inline void cp_async_16(void* smem_destination, const void* global_source, bool valid) {
  emu::cp_async(smem_destination, global_source, valid);
}
inline void cp_async_commit() { emu::cp_async_commit(); }
template <int kPending>
inline void cp_async_wait() {
  emu::cp_async_wait(kPending);
}
inline float shfl_xor(float value, int lane_mask) { return emu::shfl_xor(value, lane_mask); }
inline int shfl_xor(int value, int lane_mask) { return emu::shfl_xor(value, lane_mask); }
inline void sync_threads() { emu::sync_block(); }
inline void atomic_add(float* address, float value) { *address += value; }  // one OS thread
inline float fast_exp(float x) { return std::exp(x); }

}  // namespace ringlab::gpu::dev
