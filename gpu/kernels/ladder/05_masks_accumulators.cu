// 05 — masks and accumulators: the executors' kernel until rung 06 replaced it
// (forward_mma.cuh here, launched by forward_accumulate_64_row_tiles). Over 04 it adds global
// position lists with the reference kernel's mask classes (full / cut / skipped tiles), GQA, fp16
// as well as bf16, and the merge into device accumulators (m, l, o) so that blocks of keys can
// arrive one ring step at a time; a finalize kernel turns the accumulator into out, lse.
// Here: positions 0..S-1, one block of all keys, then finalize.
#include "gpu/cuda_check.hpp"
#include "gpu/kernels/attention_kernels.hpp"
#include "gpu/kernels/ladder/forward_mma.cuh"
#include "gpu/kernels/ladder/ladder.hpp"
#include "gpu/kernels/launch.cuh"

namespace ringlab::gpu::ladder {

// The most dynamic shared memory each launch below asks for, as records in this object for the
// static resource check (tests/gpu/kernel_static.py; launch.cuh, smem_record), and checked here
// against the per-block limit.
RINGLAB_SMEM_RECORDS_16BIT(kForwardMmaSmem, "forward_mma_kernel", "", ForwardMmaTiles);

void forward_accumulate_64_row_tiles(Dtype dtype, const ForwardParams& p, cudaStream_t stream) {
  if (p.out != nullptr || p.lse != nullptr) {
    throw UsageError(
        "the fused finalize (ForwardParams::out, lse) is forward_fa2's; forward_mma (64-row tiles) only "
        "accumulates: call finalize_accumulator after it");
  }
  if (p.init) {
    throw UsageError(
        "the fused init (ForwardParams::init) is forward_fa2's; forward_mma (64-row tiles) reads the "
        "accumulator: call init_accumulator before it");
  }
  launch_by_dtype(dtype, p, RINGLAB_MMA_LAUNCH(forward_mma_kernel, ForwardMmaTiles, q_tiles),
                  [&] { forward_accumulate(Dtype::fp32, p, stream); });
}

size_t workspace_05(const Problem& p) { return accumulator_workspace(p).bytes; }

void launch_through_accumulator(const Problem& problem, const void* q, const void* k, const void* v, void* out,
                                float* lse, void* workspace, cudaStream_t stream, ForwardLaunch forward) {
  const int64_t rows = static_cast<int64_t>(problem.batch) * problem.heads * problem.seq;
  const AccumulatorWorkspace parts = accumulator_workspace(problem);
  auto* bytes = static_cast<unsigned char*>(workspace);
  auto* positions = reinterpret_cast<int32_t*>(bytes + parts.positions);
  auto* acc_max = reinterpret_cast<float*>(bytes + parts.max);
  auto* acc_sum = reinterpret_cast<float*>(bytes + parts.sum);
  auto* acc_out = reinterpret_cast<float*>(bytes + parts.out);
  fill_iota(positions, problem.seq, stream);
  init_accumulator(acc_max, acc_sum, acc_out, rows, problem.dim, stream);
  ForwardParams p = whole_problem(problem, q, k, v, positions);
  p.acc_max = acc_max;
  p.acc_sum = acc_sum;
  p.acc_out = acc_out;
  forward(Dtype::bf16, p, stream);
  // Every rung returns out in fp32 (ladder.hpp), so finalize stores it so here, not in the bf16 the
  // executors would store.
  finalize_accumulator(Dtype::fp32, acc_max, acc_sum, acc_out, problem.batch, problem.heads, problem.seq, problem.dim,
                       out, lse, stream);
}

void launch_05(const Problem& problem, const void* q, const void* k, const void* v, void* out, float* lse,
               void* workspace, cudaStream_t stream) {
  launch_through_accumulator(problem, q, k, v, out, lse, workspace, stream, forward_accumulate_64_row_tiles);
}

}  // namespace ringlab::gpu::ladder
