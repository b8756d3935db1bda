// The teaching ladder's kernels (gpu/kernels/ladder/0[1-4]_*.cu, and rung 05's forward_mma.cuh)
// run by the CPU warp emulator and checked against the reference kernel: every rung is right before
// anyone times it. Rung 05 runs through the kernel tests' harness (kernel_test_support.hpp), on
// their causal and general-mask cases, with each of its barriers deleted in turn.
// The .cu files are included directly: their launchers are nvcc-only (#ifdef __CUDACC__), their
// kernels are written with the portable primitives. This executable must not link the compiled
// ladder library (its kernels' host stubs have the same names).
#include "gpu/emulation/warp_emulator.hpp"  // first: it stands in for nvcc

#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

#include "gpu/kernels/ladder/01_naive_fp32.cu"
#include "gpu/kernels/ladder/02_tiled_smem.cu"
#include "gpu/kernels/ladder/03_mma_bf16.cu"
#include "gpu/kernels/ladder/04_cp_async_swizzle.cu"
#include "reference/compare.hpp"
#include "reference/flash_attention.hpp"
#include "reference/inputs.hpp"
#include "tests/gpu/emulation/kernel_test_support.hpp"

namespace ringlab {
namespace {

using gpu::ladder::Args;

struct Case {
  int B = 1, S = 100, H = 2, D = 64;
  bool causal = false;
  bool bf16 = false;
};

Tensor<float> input(const Case& c, TensorId id) {
  Tensor<float> t({c.B, c.S, c.H, c.D});
  for (int64_t i = 0; i < t.size(); ++i) {
    const float x = input_value(3, id, static_cast<uint64_t>(i));
    t[i] = c.bf16 ? __bfloat162float(__float2bfloat16(x)) : x;
  }
  return t;
}

std::vector<__nv_bfloat16> to_bf16(const Tensor<float>& t) {
  std::vector<__nv_bfloat16> out;
  for (int64_t i = 0; i < t.size(); ++i) out.push_back(__float2bfloat16(t[i]));
  return out;
}

// Runs `kernel` on the case's inputs (grid over 64- or 128-row tiles) and compares with the
// reference kernel.
template <class Launch>
void check(const Case& c, Launch launch, Tolerance out_tol, Tolerance lse_tol) {
  const Tensor<float> q = input(c, TensorId::q), k = input(c, TensorId::k), v = input(c, TensorId::v);
  const AttentionOutput<float> want = flash_attention(q, k, v, c.causal ? MaskKind::causal : MaskKind::none);
  AttentionOutput<float> got{Tensor<float>(q.shape()), Tensor<float>({c.B, c.H, c.S})};
  const std::vector<__nv_bfloat16> qb = to_bf16(q), kb = to_bf16(k), vb = to_bf16(v);
  Args a;
  a.q = c.bf16 ? static_cast<const void*>(qb.data()) : q.data();
  a.k = c.bf16 ? static_cast<const void*>(kb.data()) : k.data();
  a.v = c.bf16 ? static_cast<const void*>(vb.data()) : v.data();
  a.out = got.out.data();
  a.lse = got.lse.data();
  a.B = c.B, a.S = c.S, a.H = c.H, a.D = c.D;
  a.causal = c.causal;
  a.scale = 1.0f / std::sqrt(static_cast<float>(c.D));
  launch(a);
  const CompareResult out = compare(got.out, want.out, out_tol), lse = compare(got.lse, want.lse, lse_tol);
  INFO("out: " << out.describe() << " (max abs " << out.max_abs_error << "); lse: " << lse.describe());
  CHECK(out.ok);
  CHECK(lse.ok);
}

emu::Dim3 grid(const Case& c, int rows) {
  return {static_cast<unsigned>((c.S + rows - 1) / rows), static_cast<unsigned>(c.B * c.H), 1};
}

const Tolerance kFp32{2e-5, 1e-4}, kBf16Out{1e-2, 2e-2}, kLse{1e-3, 1e-3};

}  // namespace

TEST_CASE("emulated ladder 01 and 02 (fp32), D=40, full and causal", "[gpu][emulated][ladder]") {
  for (bool causal : {false, true}) {
    Case c;
    c.D = 40;
    c.causal = causal;
    check(
        c, [&](const Args& a) { emu::launch(grid(c, 128), 128, 0, [&] { gpu::ladder::kernel_01(a); }); }, kFp32, kFp32);
    check(
        c, [&](const Args& a) { emu::launch(grid(c, 64), 64, 2 * 32 * c.D * 4, [&] { gpu::ladder::kernel_02(a); }); },
        kFp32, kFp32);
  }
}

// A tensor-core rung at D = 64 and 128, full and causal, in bf16: launch(c, args) runs its kernel
// for c.D (64-row query tiles).
template <class Launch>
void check_mma_rung(Case c, Launch launch) {
  for (bool causal : {false, true}) {
    c.bf16 = true;
    c.causal = causal;
    for (const int D : {64, 128}) {
      c.D = D;
      check(
          c, [&](const Args& a) { launch(c, a); }, kBf16Out, kLse);
    }
  }
}

TEST_CASE("emulated ladder 03 (mma, padded smem), bf16, D=64 and 128", "[gpu][emulated][ladder]") {
  check_mma_rung(Case{}, [](const Case& c, const Args& a) {
    if (c.D == 64)
      return emu::launch(grid(c, 64), 128, gpu::ladder::Tiles03<64>::kSmemBytes,
                         [&] { gpu::ladder::kernel_03<64>(a); });
    emu::launch(grid(c, 64), 128, gpu::ladder::Tiles03<128>::kSmemBytes, [&] { gpu::ladder::kernel_03<128>(a); });
  });
}

TEST_CASE("emulated ladder 04 (cp.async, swizzle), bf16, D=64 and 128", "[gpu][emulated][ladder]") {
  Case ragged;
  ragged.S = 150;
  check_mma_rung(ragged, [](const Case& c, const Args& a) {
    if (c.D == 64)
      return emu::launch(grid(c, 64), 128, gpu::ladder::Tiles04<64>::kSmemBytes,
                         [&] { gpu::ladder::kernel_04<64>(a); });
    emu::launch(grid(c, 64), 128, gpu::ladder::Tiles04<128>::kSmemBytes, [&] { gpu::ladder::kernel_04<128>(a); });
  });
}

}  // namespace ringlab

// ---- rung 05: forward_mma.cuh, 64-row query tiles -----------------------------------------------

namespace ringlab::rung05 {

using namespace kernel_test;

TEST_CASE("emulated kernels: deleting any barrier of forward_mma is caught", "[gpu][emulated][ladder][barriers]") {
  const BlockProblem pr = one_block(64, 192, 64);
  check_barriers("forward_mma<bf16, 64>", {{1, "race", ""}, {2, "race", ""}}, [&] {
    return run_forward<__nv_bfloat16, 64, Forward::rows64>(Kind::bf16, pr, kernel_test::kBf16Out,
                                                           kernel_test::kBf16Lse);
  });
  const BlockProblem pr128 = one_block(64, 192, 128);
  check_barriers("forward_mma<fp16, 128>", {{1, "race", ""}, {2, "race", ""}}, [&] {
    return run_forward<__half, 128, Forward::rows64>(Kind::fp16, pr128, kernel_test::kFp16Out, kernel_test::kFp16Lse);
  });
}

TEST_CASE("emulated mma forward with 64-row tiles (ladder rung 05): causal, GQA, documents, window",
          "[gpu][emulated][ladder][mask]") {
  check_forward<__nv_bfloat16, 64, Forward::rows64>(Kind::bf16, causal_problem(), kernel_test::kBf16Out,
                                                    kernel_test::kBf16Lse);
  BlockProblem pr = causal_problem();
  pr.skip = false;
  check_forward<__half, 128, Forward::rows64>(Kind::fp16, pr, kernel_test::kFp16Out, kernel_test::kFp16Lse);
  // A teaching rung now, its code as it was when every case below ran as the production kernel:
  // documents, a window across tiles, rows that see no key, padding (the rest cost CI time only).
  const MaskCase& c = kMaskCases[GENERATE(size_t{0}, size_t{3}, size_t{6}, size_t{8})];
  INFO(c.name);
  check_forward<__nv_bfloat16, 64, Forward::rows64>(Kind::bf16, masked_problem(c), kernel_test::kBf16Out,
                                                    kernel_test::kBf16Lse);
}

}  // namespace ringlab::rung05
