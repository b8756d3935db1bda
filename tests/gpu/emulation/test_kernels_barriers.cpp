// Every barrier of each production kernel deleted in turn, under the CPU warp emulator: the emulator
// must notice (a shared-memory race, warps that wait at different barriers, or a wrong result), or
// the test says why the barrier is not needed. Site 0 (nothing deleted) must pass first.
#include "tests/gpu/emulation/kernel_test_support.hpp"  // first: the warp emulator stands in for nvcc

namespace ringlab {

using namespace kernel_test;

// forward_fa2's barrier 3 (the table of tile kinds is complete) exists only under a mask: a causal
// block whose queries (positions 128..255) see key tiles 0-1 whole, 2-3 cut by the diagonal and
// 4-5 not at all, classified two tiles per table, so chunk 2 (tiles 4-5, skipped) reuses chunk 0's
// table (full, full). Without the barrier a warp that reads chunk 2's kinds before their
// classifier (warp 0 or 1) wrote them finds "full" there and computes tile 4 while the others skip
// it: the block's warps wait at different barriers. Four heads: four blocks, each with its own
// random warp order (in one, warp 0 may well run first).
// (kernel_test_support.hpp: causal_chunks.)
TEST_CASE("emulated kernels: deleting any barrier of forward_fa2 is caught", "[gpu][emulated][barriers]") {
  const BlockProblem pr = one_block(128, 192, 64);
  check_barriers("forward_fa2<bf16, 64>", {{1, "race", ""}, {2, "race", ""}},
                 [&] { return run_forward<__nv_bfloat16, 64>(Kind::bf16, pr, kBf16Out, kBf16Lse); });
  BlockProblem starting = pr;  // forward_fa2_init_kernel: the same body, the state not loaded
  starting.fused_init = true;
  check_barriers("forward_fa2_init<bf16, 64>", {{1, "race", ""}, {2, "race", ""}},
                 [&] { return run_forward<__nv_bfloat16, 64>(Kind::bf16, starting, kBf16Out, kBf16Lse); });
  const BlockProblem pr128 = one_block(128, 192, 128);
  check_barriers("forward_fa2<fp16, 128>", {{1, "race", ""}, {2, "race", ""}},
                 [&] { return run_forward<__half, 128>(Kind::fp16, pr128, kFp16Out, kFp16Lse); });
  const BlockProblem chunks = causal_chunks(64);
  check_barriers("forward_fa2<bf16, 64>", {{1, "race", ""}, {2, "race", ""}, {3, "deadlock", ""}}, [&] {
    return run_forward<__nv_bfloat16, 64, Forward::fa2, 2>(Kind::bf16, chunks, kBf16Out, kBf16Lse);
  });
}

// backward_mma's two barrier sites (backward_mma.cuh, "Barriers"): without site 1 a warp reads a
// tile another thread's cp.async has not landed, or overwrites P^T / dS^T another warp still reads
// for the previous tile's dQ and phase 2; without site 2 dQ and phase 2 read P^T / dS^T rows the
// other warps have not stored yet. Both are shared-memory races the emulator names.
TEST_CASE("emulated kernels: deleting either barrier of backward_mma is caught", "[gpu][emulated][barriers]") {
  // A full 128-key block (every warp owns keys) and two query tiles, the second partial: 128-row
  // tiles at D = 64, 64-row tiles at D = 128. At D = 128 a second, partial key block as well (the
  // only D = 128 launch of these tests with more than one: blockIdx.x > 0).
  const BlockProblem pr = one_block(192, 128, 64);
  check_barriers("backward_mma<bf16, 64>", {{1, "race", ""}, {2, "race", ""}},
                 [&] { return run_backward<__nv_bfloat16, 64>(Kind::bf16, pr, kBf16Grad); });
  const BlockProblem pr128 = one_block(96, 192, 128);
  check_barriers("backward_mma<fp16, 128>", {{1, "race", ""}, {2, "race", ""}},
                 [&] { return run_backward<__half, 128>(Kind::fp16, pr128, kFp16Grad); });
}

TEST_CASE("emulated kernels: deleting any barrier of the fp32 kernels is caught, but forward's third",
          "[gpu][emulated][barriers]") {
  const BlockProblem fwd = one_block(32, 96, 32);
  check_barriers("forward_fp32",
                 {{1, "wrong result", ""},
                  {2, "wrong result", ""},
                  {3, "harmless",
                   "a row's P is written and read only by its own four threads, in one warp, whose shuffles order "
                   "them"}},
                 [&] { return run_forward<float, 0>(Kind::fp32, fwd, kFp32Out, kFp32Lse); });
  const BlockProblem bwd = one_block(96, 32, 32);
  check_barriers("backward_fp32", {{1, "wrong result", ""}, {2, "wrong result", ""}, {3, "wrong result", ""}},
                 [&] { return run_backward<float, 0>(Kind::fp32, bwd, kFp32Grad); });
}

}  // namespace ringlab
