// The ladder's registry: each version's file, its one line, its dtype and what it supports.
#include <cmath>

#include "gpu/kernels/attention_kernels.hpp"
#include "gpu/kernels/ladder/ladder.hpp"

namespace ringlab::gpu::ladder {
namespace {

// Versions 01-04 put B x H in the grid's y dimension, which CUDA caps at 65535 (05, 06 go through
// the production launch, which refuses more with a message).
bool fits_grid(const Problem& p) { return static_cast<long long>(p.batch) * p.heads <= 65535; }
bool any_dim(const Problem& p) { return p.dim >= 1 && p.dim <= 128 && fits_grid(p); }
bool mma_dim(const Problem& p) { return (p.dim == 64 || p.dim == 128) && fits_grid(p); }
size_t no_workspace(const Problem&) { return 0; }

}  // namespace

Args args_of(const Problem& problem, const void* q, const void* k, const void* v, void* out, float* lse) {
  Args a;
  a.q = q, a.k = k, a.v = v, a.out = static_cast<float*>(out), a.lse = lse;  // 01-04 store fp32
  a.B = problem.batch, a.S = problem.seq, a.H = problem.heads, a.D = problem.dim;
  a.causal = problem.causal;
  a.scale = scale_of(problem);
  return a;
}

const std::vector<Version>& versions() {
  static const std::vector<Version> list = {
      {1, "01_naive_fp32.cu", "one thread per query row, online softmax over keys in global memory", Dtype::fp32,
       any_dim, no_workspace, launch_01},
      {2, "02_tiled_smem.cu", "K/V tiles in shared memory, shared by 64 query rows", Dtype::fp32, any_dim, no_workspace,
       launch_02},
      {3, "03_mma_bf16.cu", "bf16 tensor cores: mma.sync m16n8k16 fed by ldmatrix, padded smem", Dtype::bf16, mma_dim,
       no_workspace, launch_03},
      {4, "04_cp_async_swizzle.cu", "cp.async double buffering and XOR-swizzled shared memory", Dtype::bf16, mma_dim,
       no_workspace, launch_04},
      {5, "05_masks_accumulators.cu", "positions, mask classes and tile skipping, GQA, fp16, device accumulators",
       Dtype::bf16, mma_dim, workspace_05, launch_05},
      {6, "06_fa2_tiles.cu", "FA2 tiles: 128 query rows, 32 per warp; folded scale; tile kinds once; K/V groups",
       Dtype::bf16, mma_dim, workspace_05, launch_06},
      {7, "07_one_launch.cu", "one launch: rows start empty in registers, out and lse written by the kernel",
       Dtype::bf16, mma_dim, workspace_07, launch_07, Dtype::bf16},
  };
  return list;
}

}  // namespace ringlab::gpu::ladder
