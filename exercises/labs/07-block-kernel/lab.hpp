// Lab 07 — a block attention kernel. What you implement and what you may call.
//
// Your file is compiled twice, unchanged: as host C++ under the CPU warp emulator
// (gpu/emulation/warp_emulator.hpp: every CUDA thread a fiber) — how `ringlab grade` checks
// it on any machine — and by nvcc for the device criterion where a GPU is present. So write the
// kernel with ringlab's portable conventions (gpu/kernels/primitives.cuh), as the ladder kernels
// of gpu/kernels/ladder/ are written:
//   RINGLAB_KERNEL                  in front of the kernel (__global__ under nvcc)
//   threadIdx, blockIdx, blockDim, gridDim   .x and .y as in CUDA (the emulator has no .z grid)
//   RINGLAB_DYNAMIC_SMEM(name);     declares `unsigned char* name`, the dynamic shared memory
//                                   (LaunchShape::smem_bytes of it; the emulator fills it with NaN)
//   gpu::dev::sync_threads()        __syncthreads(); every thread of the block must reach it
//   gpu::dev::shfl_xor(x, mask)     __shfl_xor_sync over all 32 lanes of a warp
//   gpu::dev::imin / imax           int min / max
//   expf, logf, fmaxf, sqrtf, INFINITY   fp32 math, on the host and the device
// Not available: __syncthreads() itself, static __shared__ arrays, printf on the device, exceptions
// and the standard library inside the kernel (it runs on the device).
//
// Shapes (dimension letters as everywhere in ringlab): B batch, Sq query rows and Sk key rows of
// this block, H query heads, HKV key/value heads (H a multiple of HKV), D head dimension.
// Not yours to call here: the library's own attention and merge functions do this lab's work. The
// grader refuses a submission that names them (a member, written `.name`, is refused only as a
// member: your own free function may share its name).
// grader-refuses: exact_attention exact_attention_backward exact_block_backward flash_attention
// grader-refuses: flash_attention_backward flash_forward_accumulate flash_backward_accumulate
// grader-refuses: merge_lse_form merge_lse_row softmax_state_of SoftmaxState .merge_row

#pragma once

#if defined(__CUDACC__)
#include <cuda_runtime.h>
#else
#include "gpu/emulation/warp_emulator.hpp"  // first: it stands in for nvcc
// The harness, another translation unit, calls your kernel: under the emulator it must be one
// ordinary function, not the `inline` that RINGLAB_KERNEL means there for header-only kernels.
#undef RINGLAB_KERNEL
#define RINGLAB_KERNEL
#endif

#include <cstdint>

#include "gpu/kernels/primitives.cuh"

namespace ringlab::lab07 {

// One attention block: queries at global positions q_pos against keys at global positions k_pos.
// All pointers are device memory (host memory under the emulator); all tensors row-major, fp32.
struct BlockArgs {
  const float* q = nullptr;                           // (B, Sq, H, D)
  const float* k = nullptr;                           // (B, Sk, HKV, D)
  const float* v = nullptr;                           // (B, Sk, HKV, D)
  const int32_t* q_pos = nullptr;                     // (Sq): the global position of each query row (ascending)
  const int32_t* k_pos = nullptr;                     // (Sk): the global position of each key row (ascending)
  float* out = nullptr;                               // (B, Sq, H, D): softmax(scale q.k) v over the visible keys
  float* lse = nullptr;                               // (B, H, Sq): log sum_j exp(scale q.k_j) over the visible keys
  int B = 1, Sq = 0, Sk = 0, H = 1, HKV = 1, D = 64;  // D <= 128
  bool causal = false;                                // key j is visible to query i when k_pos[j] <= q_pos[i]
  float scale = 0.125f;                               // 1 / sqrt(D)
};

// How your kernel is launched: a grid of grid_x * grid_y blocks of `threads` threads (a multiple of
// 32, at most 1024) with smem_bytes of dynamic shared memory (at most 227 KiB on an H100).
struct LaunchShape {
  unsigned grid_x = 1, grid_y = 1;
  int threads = 128;
  int smem_bytes = 0;
};

// YOUR FILE: the launch shape for a problem (host code; the starter's suits one thread per query
// row — change it if you change how the work is split).
LaunchShape block_attention_launch(const BlockArgs& a);

// YOUR FILE: the kernel. For every (b, h, i) it writes out[b][i][h][:] and lse[b][h][i]:
//   query head h reads key/value head h / (H / HKV) (GQA);
//   scores s_j = scale * q_i . k_j over the keys visible to row i (all of them when !causal);
//   out = sum_j softmax(s)_j v_j and lse = log sum_j exp(s_j), computed without overflow (a
//   running max) — and a row that sees no key gets out 0 and lse -INFINITY, never NaN.
RINGLAB_KERNEL void block_attention_kernel(BlockArgs a);

}  // namespace ringlab::lab07
