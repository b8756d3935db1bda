// 07 — one launch: 06's kernel, without the accumulator round trip. 05 and 06 run as a ring step
// does: init_accumulator writes the empty state (m = -inf, l = 0, o = 0) for every row, the kernel
// reads it, merges its keys and writes it back in fp32, and finalize_accumulator reads it once more
// to write out and lse — three launches, and for each 128-row query tile at D = 64 about 130 KB of
// fp32 state moved against 32 KB of Q and out. Here the launch is its rows' only one, so it starts
// them from the empty state in registers (ForwardParams::init: forward_fa2_init_kernel, the same
// body instantiated without the state's loads) and writes out = o / l, in bf16 as the executors
// store it, and lse = m + log l itself (ForwardParams::out, lse: the fused finalize). No fp32
// state is allocated, read or written: what SDPA does, and what a rank whose only block is its
// rows' only one runs in the executors.
// Host code only (the kernel is forward_fa2.cuh's), so the emulated tests include this file as it
// is and run it against the emulated launchers (test_ladder_one_launch_emulated.cpp).
#include "gpu/kernels/attention_kernels.hpp"
#include "gpu/kernels/ladder/ladder.hpp"

namespace ringlab::gpu::ladder {

size_t workspace_07(const Problem& p) { return static_cast<size_t>(p.seq) * sizeof(int32_t); }  // positions only

void launch_07(const Problem& problem, const void* q, const void* k, const void* v, void* out, float* lse,
               void* workspace, cudaStream_t stream) {
  int32_t* positions = static_cast<int32_t*>(workspace);
  fill_iota(positions, problem.seq, stream);
  ForwardParams p = whole_problem(problem, q, k, v, positions);
  p.init = true;  // the accumulator pointers stay null: neither read nor written
  p.out = out, p.lse = lse;
  forward_accumulate(Dtype::bf16, p, stream);
}

}  // namespace ringlab::gpu::ladder
