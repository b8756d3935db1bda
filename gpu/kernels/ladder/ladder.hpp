// The teaching ladder (in the spirit of llm.c's dev/cuda): single-pass attention forward in
// numbered versions, each adding one idea. Every version is validated against the CPU reference
// before it is timed (bench/gpu/bench_gpu_ladder, tests/gpu/test_gpu_ladder.cpp), and the kernels
// of 01-04 also run under the CPU warp emulator (gpu/emulation).
//
//   01_naive_fp32.cu        one thread per query row, K and V read from global memory
//   02_tiled_smem.cu        K/V tiles in shared memory, shared by a block of 64 query rows
//   03_mma_bf16.cu          bf16 tensor cores: mma.sync m16n8k16 fed by ldmatrix, padded smem
//   04_cp_async_swizzle.cu  cp.async double buffering and XOR-swizzled shared memory
//   05_masks_accumulators.cu  the previous production kernel: positions, masks and tile skipping,
//                           GQA, fp16, merging into device accumulators, then finalize
//   06_fa2_tiles.cu         the production kernel: FlashAttention-2's 128-row tiles, 32 rows per
//                           warp, folded softmax scale, tile kinds once per block, K/V cp.async
//                           groups; through the same accumulator path as 05
//   07_one_launch.cu        06's kernel in one launch: the rows start from the empty state in
//                           registers and the kernel writes out (bf16) and lse, so no fp32
//                           accumulator, no init or finalize launch
//
// The problem of the ladder: q, k, v (B, S, H, D) (no GQA), full or causal by token index;
// outputs out (B, S, H, D) in the version's out_dtype (fp32 for 01-06, bf16 for 07, as the
// production kernel stores it) and lse (B, H, S) in fp32.
#pragma once

#include <cuda_runtime_api.h>

#include <cmath>
#include <cstddef>
#include <vector>

#include "gpu/device.hpp"
#include "gpu/dtype.hpp"
#include "gpu/kernels/kernel_params.hpp"

namespace ringlab::gpu::ladder {

struct Problem {
  int batch = 1, seq = 1024, heads = 8, dim = 64;
  bool causal = false;
};

// Kernel arguments of versions 01-04 (plain data; the kernels are in the .cu files).
struct Args {
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  float* out = nullptr;
  float* lse = nullptr;
  int B = 1, S = 0, H = 1, D = 64;
  bool causal = false;
  float scale = 0.125f;
};

Args args_of(const Problem& problem, const void* q, const void* k, const void* v, void* out, float* lse);

struct Version {
  int number = 0;
  const char* file = "";
  const char* adds = "";  // the one line: what this version adds
  Dtype dtype = Dtype::fp32;
  bool (*supports)(const Problem&) = nullptr;
  size_t (*workspace_bytes)(const Problem&) = nullptr;  // device scratch the launch needs
  // Enqueues the forward on `stream`; q, k, v in `dtype`; workspace of workspace_bytes.
  void (*launch)(const Problem&, const void* q, const void* k, const void* v, void* out, float* lse, void* workspace,
                 cudaStream_t stream) = nullptr;
  Dtype out_dtype = Dtype::fp32;  // how `launch` stores out
};

const std::vector<Version>& versions();

// The launchers, one per file.
void launch_01(const Problem&, const void*, const void*, const void*, void*, float*, void*, cudaStream_t);
void launch_02(const Problem&, const void*, const void*, const void*, void*, float*, void*, cudaStream_t);
void launch_03(const Problem&, const void*, const void*, const void*, void*, float*, void*, cudaStream_t);
void launch_04(const Problem&, const void*, const void*, const void*, void*, float*, void*, cudaStream_t);
void launch_05(const Problem&, const void*, const void*, const void*, void*, float*, void*, cudaStream_t);
void launch_06(const Problem&, const void*, const void*, const void*, void*, float*, void*, cudaStream_t);
void launch_07(const Problem&, const void*, const void*, const void*, void*, float*, void*, cudaStream_t);
size_t workspace_05(const Problem&);  // 06's too
size_t workspace_07(const Problem&);

// The harness's side of out_dtype: the bytes out needs, and out (count elements) read back widened
// to float. (Inline: the emulated tests use them without the ladder's library.)
inline size_t out_bytes(const Version& version, const Problem& p) {
  return static_cast<size_t>(p.batch) * p.seq * p.heads * p.dim * static_cast<size_t>(dtype_bytes(version.out_dtype));
}
inline void read_out(const Version& version, const DeviceBuffer& out, float* to, size_t count) {
  std::vector<unsigned char> bytes(count * static_cast<size_t>(dtype_bytes(version.out_dtype)));
  out.download(bytes.data(), bytes.size());
  decode(bytes, version.out_dtype, {to, count});
}

// Every rung's softmax scale, 1/sqrt(D).
inline float scale_of(const Problem& problem) {
  return static_cast<float>(1.0 / std::sqrt(static_cast<double>(problem.dim)));
}

// 05-07: the whole problem as one block of the production kernels' arguments, query and key
// positions `positions` (0..S-1 on the device); no accumulator, out or lse set.
inline ForwardParams whole_problem(const Problem& problem, const void* q, const void* k, const void* v,
                                   const int32_t* positions) {
  ForwardParams p;
  p.a.q = q, p.a.k = k, p.a.v = v;
  p.a.q_pos = positions, p.a.k_pos = positions;
  p.a.batch = problem.batch, p.a.heads = problem.heads, p.a.kv_heads = problem.heads, p.a.dim = problem.dim;
  p.a.q_seq = p.a.kv_seq = p.a.q_end = p.a.kv_end = problem.seq;
  p.a.causal = problem.causal;
  p.a.scale = scale_of(problem);
  return p;
}

// 05 and 06's workspace: positions (S int32), then the accumulator's max, sum (B H S fp32 each)
// and out (B H S D fp32), each part starting on a 256-byte boundary (byte offsets; `bytes` in
// all). The kernels read the accumulator's rows in 8-byte pairs (load_pair): packed end to end,
// an odd S would put `out` 4 bytes off an 8-byte boundary (at S = 777 the device stopped with a
// misaligned address).
struct AccumulatorWorkspace {
  size_t positions = 0, max = 0, sum = 0, out = 0, bytes = 0;
};
inline AccumulatorWorkspace accumulator_workspace(const Problem& p) {
  constexpr size_t kAlign = 256;  // what cudaMalloc gives a buffer of its own
  auto up = [](size_t n) { return (n + kAlign - 1) / kAlign * kAlign; };
  const size_t rows = static_cast<size_t>(p.batch) * p.heads * p.seq;
  AccumulatorWorkspace w;
  w.max = up(static_cast<size_t>(p.seq) * sizeof(int32_t));
  w.sum = w.max + up(rows * sizeof(float));
  w.out = w.sum + up(rows * sizeof(float));
  w.bytes = w.out + rows * static_cast<size_t>(p.dim) * sizeof(float);
  return w;
}

// 05 and 06: positions 0..S-1, the accumulator initialised, one `forward` over all keys, finalize.
using ForwardLaunch = void (*)(Dtype, const ForwardParams&, cudaStream_t);
// Rung 05's forward of one block merged into the accumulator, as forward_accumulate
// (attention_kernels.hpp) does with the production kernel: forward_mma.cuh, 64-row query tiles, 16
// rows per warp; fp32 runs the fp32 kernel. Accumulates only: params.out set is refused.
void forward_accumulate_64_row_tiles(Dtype dtype, const ForwardParams& params, cudaStream_t stream);
void launch_through_accumulator(const Problem& problem, const void* q, const void* k, const void* v, void* out,
                                float* lse, void* workspace, cudaStream_t stream, ForwardLaunch forward);

}  // namespace ringlab::gpu::ladder
