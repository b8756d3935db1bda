// The production attention kernels (gpu/kernels/*.cuh) executed by the CPU warp emulator and
// checked against the reference blockwise kernel — these run everywhere, GPU or not, so CI checks
// the kernels' index arithmetic, swizzles, fragment layouts, masks, tile skipping and GQA.
// Sizes are small and ragged on purpose (partial tiles, row ranges not starting at 0). The
// emulator's adversarial modes are on (warp_emulator.hpp): shuffled warp order, cp.async landing at
// random, the shared-memory race check, atomics in random order. The last section deletes each
// barrier of each kernel in turn and expects the emulator to notice (or says why it cannot).
#include "gpu/emulation/warp_emulator.hpp"  // first: it stands in for nvcc

#include <algorithm>
#include <bit>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "gpu/kernels/backward_fp32.cuh"
#include "gpu/kernels/backward_mma.cuh"
#include "gpu/kernels/elementwise.cuh"
#include "gpu/kernels/forward_fa2.cuh"
#include "gpu/kernels/forward_fp32.cuh"
#include "gpu/kernels/forward_mma.cuh"
#include "gpu/kernels/kernel_mask.hpp"
#include "reference/compare.hpp"
#include "reference/exact_attention.hpp"
#include "reference/flash_attention.hpp"
#include "reference/inputs.hpp"
#include "reference/layout.hpp"
#include "reference/precision.hpp"

namespace ringlab {
namespace {

using gpu::AttentionParams;
using gpu::BackwardParams;
using gpu::ForwardParams;

enum class Kind { bf16, fp16, fp32 };

float round_to(Kind kind, float x) {
  if (kind == Kind::bf16) return __bfloat162float(__float2bfloat16(x));
  if (kind == Kind::fp16) return __half2float(__float2half(x));
  return x;
}

// A block problem: shapes, positions, row ranges, mask (reference/mask.hpp: causal, a window W,
// packed document lengths, and valid > 0: positions from valid on are padding).
struct Problem {
  int B = 1, Sq = 80, Sk = 100, H = 4, HKV = 2, D = 64;
  bool causal = true, skip = true;
  int64_t window = 0, valid = 0;
  std::vector<int64_t> documents;
  RowRange q_rows{5, 80};
  std::vector<RowRange> kv_blocks{{3, 45}, {45, 97}};  // merged in this order
  std::vector<int64_t> q_pos, k_pos;
  bool expect_empty_rows = false;  // some query row sees no key of the blocks (checked to happen)
  bool fused_finalize = false;     // forward: the last block's launch writes out and lse itself
  Mask mask() const { return Mask(causal, window, documents, valid); }
};

// Zig-zag-like positions: rows are not one contiguous run, so tiles straddle the diagonal.
std::vector<int64_t> positions(int count, int stride, int offset) {
  std::vector<int64_t> p(static_cast<size_t>(count));
  for (int i = 0; i < count; ++i) p[static_cast<size_t>(i)] = (i < count / 2) ? offset + i : offset + stride + i;
  return p;
}

Tensor<float> rounded_input(Kind kind, TensorId id, const Shape& shape, uint64_t seed) {
  Tensor<float> t(shape);
  for (int64_t i = 0; i < t.size(); ++i) t[i] = round_to(kind, input_value(seed, id, static_cast<uint64_t>(i)));
  return t;
}

template <class T>
std::vector<T> device_copy(const Tensor<float>& t) {
  std::vector<T> out(static_cast<size_t>(t.size()));
  for (int64_t i = 0; i < t.size(); ++i) {
    if constexpr (std::is_same_v<T, __nv_bfloat16>) {
      out[static_cast<size_t>(i)] = __float2bfloat16(t[i]);
    } else if constexpr (std::is_same_v<T, __half>) {
      out[static_cast<size_t>(i)] = __float2half(t[i]);
    } else {
      out[static_cast<size_t>(i)] = t[i];
    }
  }
  return out;
}

std::vector<int32_t> to_int32(const std::vector<int64_t>& v) { return {v.begin(), v.end()}; }

AttentionParams params_of(const Problem& pr, const void* q, const void* k, const void* v, const int32_t* q_pos,
                          const int32_t* k_pos, const gpu::KernelMask& km, RowRange kv) {
  AttentionParams a;
  a.q = q;
  a.k = k;
  a.v = v;
  a.q_pos = q_pos;
  a.k_pos = k_pos;
  a.batch = pr.B;
  a.q_seq = pr.Sq;
  a.kv_seq = pr.Sk;
  a.heads = pr.H;
  a.kv_heads = pr.HKV;
  a.dim = pr.D;
  a.q_begin = static_cast<int>(pr.q_rows.begin);
  a.q_end = static_cast<int>(pr.q_rows.end);
  a.kv_begin = static_cast<int>(kv.begin);
  a.kv_end = static_cast<int>(kv.end);
  a.causal = km.causal;
  a.window = km.window;
  a.q_doc_first = km.doc_first.empty() ? nullptr : km.doc_first.data();
  a.q_doc_last = km.doc_last.empty() ? nullptr : km.doc_last.data();
  a.skip_masked_tiles = pr.skip;
  a.scale = 1.0f / std::sqrt(static_cast<float>(pr.D));
  return a;
}

emu::Dim3 grid_of(int tiles, const Problem& pr) {
  return {static_cast<unsigned>(tiles), static_cast<unsigned>(pr.B * pr.H), 1};
}

// The comparisons of one kernel run: ok, and what each compared tensor's error was.
struct Verdict {
  bool ok = true;
  std::string describe;
  void add(const char* name, const CompareResult& r) {
    ok = ok && r.ok;
    describe += std::string(name) + ": " + r.describe() + " (max abs " + std::to_string(r.max_abs_error) + "); ";
  }
};

template <class T>
std::string dtype_name() {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) return "bf16";
  if constexpr (std::is_same_v<T, __half>) return "fp16";
  return "fp32";
}

std::vector<int64_t> row_list(RowRange rows) { return iota_positions(rows.size(), rows.begin); }

std::vector<int64_t> subset(const std::vector<int64_t>& values, const std::vector<int64_t>& rows) {
  std::vector<int64_t> out;
  for (int64_t r : rows) out.push_back(values[static_cast<size_t>(r)]);
  return out;
}

// The float64 oracle (exact_attention) on the problem's query rows against the keys of all its kv
// blocks, and the kernel's finalized output on those rows: out and lse within the tolerances, and a
// row that sees no key (out 0, lse -inf) exactly where the oracle says so. Added to `verdict`.
void add_forward_exact(const Problem& pr, const Tensor<float>& q, const Tensor<float>& k, const Tensor<float>& v,
                       const AttentionOutput<float>& got, Tolerance out_tol, Tolerance lse_tol, Verdict& verdict) {
  std::vector<int64_t> kv_rows;
  for (RowRange kv : pr.kv_blocks)
    for (int64_t r = kv.begin; r < kv.end; ++r) kv_rows.push_back(r);
  const std::vector<int64_t> q_rows = row_list(pr.q_rows);
  const AttentionOutput<double> exact = exact_attention(
      gather_rows(q.cast<double>(), q_rows, 1), gather_rows(k.cast<double>(), kv_rows, 1),
      gather_rows(v.cast<double>(), kv_rows, 1), pr.mask(), subset(pr.q_pos, q_rows), subset(pr.k_pos, kv_rows));
  const Tensor<float> out = gather_rows(got.out, q_rows, 1), lse = gather_rows(got.lse, q_rows, 2);
  verdict.add("out vs float64", compare(out, exact.out, out_tol));
  verdict.add("lse vs float64", compare(lse, exact.lse, lse_tol));
  int64_t empty = 0, wrong = 0;
  for (int64_t b = 0; b < pr.B; ++b)
    for (int64_t h = 0; h < pr.H; ++h)
      for (int64_t i = 0; i < static_cast<int64_t>(q_rows.size()); ++i) {
        const bool none = exact.lse(b, h, i) == -INFINITY;
        empty += none ? 1 : 0;
        bool ok = none ? lse(b, h, i) == -INFINITY : std::isfinite(lse(b, h, i));
        for (int64_t d = 0; d < pr.D; ++d) ok = ok && std::isfinite(out(b, i, h, d)) && (!none || out(b, i, h, d) == 0);
        wrong += ok ? 0 : 1;
      }
  verdict.describe += std::to_string(empty) + " (row, head) pairs see no key, " + std::to_string(wrong) +
                      " of all rows wrong in their finiteness or emptiness; ";
  verdict.ok = verdict.ok && wrong == 0 && (!pr.expect_empty_rows || empty > 0);
}

// dq, dk, dv that the problem's kv blocks contribute, from the float64 oracle of one block.
AttentionGrads<double> exact_block_grads(const Problem& pr, const Tensor<float>& q, const Tensor<float>& k,
                                         const Tensor<float>& v, const Tensor<float>& dout, const Tensor<float>& lse,
                                         const Tensor<float>& delta) {
  AttentionGrads<double> sum{Tensor<double>(q.shape()), Tensor<double>(k.shape()), Tensor<double>(k.shape())};
  const std::vector<int64_t> q_rows = row_list(pr.q_rows);
  const Tensor<double> qr = gather_rows(q.cast<double>(), q_rows, 1), dor = gather_rows(dout.cast<double>(), q_rows, 1);
  const Tensor<double> lser = gather_rows(lse.cast<double>(), q_rows, 2),
                       dr = gather_rows(delta.cast<double>(), q_rows, 2);
  for (RowRange kv : pr.kv_blocks) {
    const std::vector<int64_t> kv_rows = row_list(kv);
    const AttentionGrads<double> g =
        exact_block_backward(qr, gather_rows(k.cast<double>(), kv_rows, 1), gather_rows(v.cast<double>(), kv_rows, 1),
                             dor, lser, dr, pr.mask(), subset(pr.q_pos, q_rows), subset(pr.k_pos, kv_rows));
    for (int64_t b = 0; b < pr.B; ++b)
      for (int64_t d = 0; d < pr.D; ++d) {
        for (int64_t h = 0; h < pr.H; ++h)
          for (size_t i = 0; i < q_rows.size(); ++i)
            sum.dq(b, q_rows[i], h, d) += g.dq(b, static_cast<int64_t>(i), h, d);
        for (int64_t h = 0; h < pr.HKV; ++h)
          for (size_t j = 0; j < kv_rows.size(); ++j) {
            sum.dk(b, kv_rows[j], h, d) += g.dk(b, static_cast<int64_t>(j), h, d);
            sum.dv(b, kv_rows[j], h, d) += g.dv(b, static_cast<int64_t>(j), h, d);
          }
      }
  }
  return sum;
}

// The tensor-core forward kernels: the production one (forward_fa2.cuh, 128-row query tiles; its
// key-tile kinds classified kChunkTiles at a time) and the previous one, ladder rung 05
// (forward_mma.cuh, 64-row tiles).
enum class Forward { fa2, rows64 };

// Forward: the kernel's accumulator after all kv blocks vs the reference kernel's.
template <class T, int D, Forward kKernel = Forward::fa2, int kChunkTiles = gpu::ForwardFa2Tiles<D>::kChunkTiles>
Verdict run_forward(Kind kind, Problem pr, Tolerance out_tol, Tolerance lse_tol) {
  pr.D = D == 0 ? pr.D : D;
  const Mask mask = pr.mask();
  const gpu::KernelMask km = gpu::kernel_mask(mask, pr.q_pos);
  const Tensor<float> q = rounded_input(kind, TensorId::q, {pr.B, pr.Sq, pr.H, pr.D}, 11);
  const Tensor<float> k = rounded_input(kind, TensorId::k, {pr.B, pr.Sk, pr.HKV, pr.D}, 11);
  const Tensor<float> v = rounded_input(kind, TensorId::v, {pr.B, pr.Sk, pr.HKV, pr.D}, 11);
  SoftmaxState<float> expected = make_accumulator(pr.B, pr.H, pr.Sq, pr.D);
  for (RowRange kv : pr.kv_blocks)
    flash_forward_accumulate(q, k, v, pr.q_pos, pr.k_pos, pr.q_rows, kv, mask, expected, {1, pr.skip});

  const std::vector<T> qd = device_copy<T>(q), kd = device_copy<T>(k), vd = device_copy<T>(v);
  const std::vector<int32_t> qp = to_int32(pr.q_pos), kp = to_int32(pr.k_pos);
  SoftmaxState<float> actual = make_accumulator(pr.B, pr.H, pr.Sq, pr.D);
  // The fused finalize writes only its rows: the rest keep finalize's values for an empty row. It
  // stores out in T (fused_out, widened below) and lse in fp32.
  AttentionOutput<float> fused{Tensor<float>({pr.B, pr.Sq, pr.H, pr.D}), Tensor<float>({pr.B, pr.H, pr.Sq})};
  for (int64_t i = 0; i < fused.lse.size(); ++i) fused.lse[i] = -INFINITY;
  std::vector<T> fused_out = device_copy<T>(fused.out);
  REQUIRE((!pr.fused_finalize || (kKernel == Forward::fa2 && !std::is_same_v<T, float>)));
  for (const RowRange& kv : pr.kv_blocks) {
    ForwardParams p;
    p.a = params_of(pr, qd.data(), kd.data(), vd.data(), qp.data(), kp.data(), km, kv);
    p.acc_max = actual.max.data();
    p.acc_sum = actual.sum.data();
    p.acc_out = actual.out.data();
    if (pr.fused_finalize && &kv == &pr.kv_blocks.back()) {
      p.out = fused_out.data();
      p.lse = fused.lse.data();
    }
    if constexpr (std::is_same_v<T, float>) {
      emu::launch(
          grid_of(gpu::ForwardFp32Tiles::q_tiles(p.a), pr), 128, gpu::ForwardFp32Tiles::smem_bytes(pr.D),
          [&] { gpu::forward_fp32_kernel(p); }, "forward_fp32");
    } else if constexpr (kKernel == Forward::fa2) {
      using Tiles = gpu::ForwardFa2Tiles<D>;
      const std::string name = "forward_fa2<" + dtype_name<T>() + ", " + std::to_string(D) + ">";
      emu::launch(
          grid_of(Tiles::q_tiles(p.a), pr), Tiles::kThreads, Tiles::smem_bytes(kChunkTiles),
          [&] { gpu::forward_fa2_kernel<T, D, kChunkTiles>(p); }, name.c_str());
    } else {
      using Tiles = gpu::ForwardMmaTiles<D>;
      const std::string name = "forward_mma<" + dtype_name<T>() + ", " + std::to_string(D) + ">";
      emu::launch(
          grid_of(Tiles::q_tiles(p.a), pr), 128, Tiles::kSmemBytes, [&] { gpu::forward_mma_kernel<T, D>(p); },
          name.c_str());
    }
  }
  for (int64_t i = 0; i < fused.out.size(); ++i) fused.out[i] = gpu::dev::to_float(fused_out[static_cast<size_t>(i)]);
  const AttentionOutput<float> want = finalize_accumulator(expected, pr.B, pr.H, pr.Sq, pr.D);
  const AttentionOutput<float> got = pr.fused_finalize ? fused : finalize_accumulator(actual, pr.B, pr.H, pr.Sq, pr.D);
  Verdict verdict;
  verdict.add("out", compare(got.out, want.out, out_tol));
  verdict.add("lse", compare(got.lse, want.lse, lse_tol));
  add_forward_exact(pr, q, k, v, got, out_tol, lse_tol, verdict);
  if (mask.general()) {  // the mask matters: the plain causal (or full) mask's result is far off
    SoftmaxState<float> plain = make_accumulator(pr.B, pr.H, pr.Sq, pr.D);
    for (RowRange kv : pr.kv_blocks)
      flash_forward_accumulate(q, k, v, pr.q_pos, pr.k_pos, pr.q_rows, kv, mask.kind(), plain, {1, pr.skip});
    const CompareResult differs = compare(got.out, finalize_accumulator(plain, pr.B, pr.H, pr.Sq, pr.D).out, out_tol);
    verdict.describe +=
        std::string("against the plain ") + mask_name(mask.kind()) + " mask: " + differs.describe() + "; ";
    verdict.ok = verdict.ok && !differs.ok;
  }
  return verdict;
}

template <class T, int D, Forward kKernel = Forward::fa2, int kChunkTiles = gpu::ForwardFa2Tiles<D>::kChunkTiles>
void check_forward(Kind kind, const Problem& pr, Tolerance out_tol, Tolerance lse_tol) {
  const Verdict verdict = run_forward<T, D, kKernel, kChunkTiles>(kind, pr, out_tol, lse_tol);
  INFO(verdict.describe);
  CHECK(verdict.ok);
}

// Backward: dq, dk, dv of one block (lse and delta of the whole forward) vs the reference kernel.
template <class T, int D>
Verdict run_backward(Kind kind, Problem pr, Tolerance tol) {
  pr.D = D == 0 ? pr.D : D;
  const Mask mask = pr.mask();
  const gpu::KernelMask km = gpu::kernel_mask(mask, pr.q_pos);
  const Tensor<float> q = rounded_input(kind, TensorId::q, {pr.B, pr.Sq, pr.H, pr.D}, 5);
  const Tensor<float> k = rounded_input(kind, TensorId::k, {pr.B, pr.Sk, pr.HKV, pr.D}, 5);
  const Tensor<float> v = rounded_input(kind, TensorId::v, {pr.B, pr.Sk, pr.HKV, pr.D}, 5);
  const Tensor<float> dout = rounded_input(kind, TensorId::dout, {pr.B, pr.Sq, pr.H, pr.D}, 5);
  const AttentionOutput<float> forward = flash_attention(q, k, v, mask, pr.q_pos, pr.k_pos);
  const Tensor<float> delta = softmax_delta(dout, forward.out);
  AttentionGrads<float> want{Tensor<float>(q.shape()), Tensor<float>(k.shape()), Tensor<float>(k.shape())};
  AttentionGrads<float> got{Tensor<float>(q.shape()), Tensor<float>(k.shape()), Tensor<float>(k.shape())};
  const std::vector<T> qd = device_copy<T>(q), kd = device_copy<T>(k), vd = device_copy<T>(v),
                       dod = device_copy<T>(dout);
  const std::vector<int32_t> qp = to_int32(pr.q_pos), kp = to_int32(pr.k_pos);
  for (RowRange kv : pr.kv_blocks) {
    flash_backward_accumulate(q, k, v, dout, forward.lse, delta, pr.q_pos, pr.k_pos, pr.q_rows, kv, mask, want.dq,
                              want.dk, want.dv, {1, pr.skip});
    BackwardParams p;
    p.a = params_of(pr, qd.data(), kd.data(), vd.data(), qp.data(), kp.data(), km, kv);
    p.dout = dod.data();
    p.lse = forward.lse.data();
    p.delta = delta.data();
    p.dq = got.dq.data();
    p.dk = got.dk.data();
    p.dv = got.dv.data();
    if constexpr (std::is_same_v<T, float>) {
      emu::launch(
          grid_of(gpu::BackwardFp32Tiles::k_tiles(p.a), pr), 128, gpu::BackwardFp32Tiles::smem_bytes(pr.D),
          [&] { gpu::backward_fp32_kernel(p); }, "backward_fp32");
    } else {
      using Tiles = gpu::BackwardMmaTiles<D>;
      const std::string name = "backward_mma<" + dtype_name<T>() + ", " + std::to_string(D) + ">";
      emu::launch(
          grid_of(Tiles::k_tiles(p.a), pr), Tiles::kThreads, Tiles::kSmemBytes,
          [&] { gpu::backward_mma_kernel<T, D>(p); }, name.c_str());
    }
  }
  const char* names[] = {"dq", "dk", "dv"};
  const Tensor<float>* gots[] = {&got.dq, &got.dk, &got.dv};
  const Tensor<float>* wants[] = {&want.dq, &want.dk, &want.dv};
  Verdict verdict;
  for (int i = 0; i < 3; ++i) verdict.add(names[i], compare(*gots[i], *wants[i], tol));
  // Against float64: the blocks' exact contributions (exact_block_backward) with the same lse, delta.
  const AttentionGrads<double> exact = exact_block_grads(pr, q, k, v, dout, forward.lse, delta);
  const Tensor<double>* exacts[] = {&exact.dq, &exact.dk, &exact.dv};
  const char* exact_names[] = {"dq vs float64", "dk vs float64", "dv vs float64"};
  for (int i = 0; i < 3; ++i) verdict.add(exact_names[i], compare(*gots[i], *exacts[i], tol));
  if (mask.general()) {  // the mask matters: the plain mask's dk is far off
    AttentionGrads<float> plain{Tensor<float>(q.shape()), Tensor<float>(k.shape()), Tensor<float>(k.shape())};
    for (RowRange kv : pr.kv_blocks)
      flash_backward_accumulate(q, k, v, dout, forward.lse, delta, pr.q_pos, pr.k_pos, pr.q_rows, kv, mask.kind(),
                                plain.dq, plain.dk, plain.dv, {1, pr.skip});
    const CompareResult differs = compare(got.dk, plain.dk, tol);
    verdict.describe +=
        std::string("dk against the plain ") + mask_name(mask.kind()) + " mask: " + differs.describe() + "; ";
    verdict.ok = verdict.ok && !differs.ok;
  }
  return verdict;
}

template <class T, int D>
void check_backward(Kind kind, const Problem& pr, Tolerance tol) {
  const Verdict verdict = run_backward<T, D>(kind, pr, tol);
  INFO(verdict.describe);
  CHECK(verdict.ok);
}

Problem causal_problem() {
  Problem pr;
  pr.q_pos = positions(pr.Sq, 60, 0);
  pr.k_pos = positions(pr.Sk, 50, 10);
  return pr;
}

// The general mask (documents, window, padding) on zig-zag-like positions: queries at 0..79 and
// 180..259, keys at 0..95 and 156..251; two kv blocks, the second holding a 64-row tile boundary.
// Documents [0, 29) [29] [30, 131) [131, 201) [201, 260): a 1-token document, and one that crosses
// query and key tile boundaries of both kernels (32 and 64 rows).
struct MaskCase {
  const char* name;
  bool causal;
  int64_t window;
  bool documents;
  int64_t valid = 0;
  bool skip = true;
  bool empty_rows = false;
};

const MaskCase kMaskCases[] = {
    {"documents, causal", true, 0, true},
    {"documents, not causal", false, 0, true},
    {"window 7 (inside a tile), causal", true, 7, false},
    {"window 70 (across tiles), causal", true, 70, false},
    {"window 9, not causal", false, 9, false},
    {"window 90, not causal", false, 90, false},
    {"documents and window 5, causal: queries 256.. see no key", true, 5, true, 0, true, true},
    {"documents and window 50, not causal, no skip", false, 50, true, 0, false},
    {"padding from position 250, documents, causal", true, 0, true, 250, true, true},
};

Problem masked_problem(const MaskCase& c) {
  Problem pr;
  pr.Sq = 160, pr.Sk = 192;
  pr.q_rows = {5, 160};
  pr.kv_blocks = {{0, 70}, {70, 192}};
  pr.q_pos = positions(pr.Sq, 100, 0);
  pr.k_pos = positions(pr.Sk, 60, 0);
  pr.causal = c.causal;
  pr.window = c.window;
  pr.skip = c.skip;
  pr.valid = c.valid;
  if (c.documents) pr.documents = {29, 1, 101, 70, c.valid > 0 ? c.valid - 201 : 59};
  pr.expect_empty_rows = c.empty_rows;
  return pr;
}

// Loose enough for P (and dS) rounded to 8 (bf16) or 11 (fp16) mantissa bits; a wrong tile, mask
// or fragment is O(1) off.
const Tolerance kBf16Out{1e-2, 2e-2}, kBf16Lse{1e-3, 1e-3}, kBf16Grad{3e-2, 3e-2};
const Tolerance kFp16Out{3e-3, 5e-3}, kFp16Lse{1e-3, 1e-3}, kFp16Grad{1e-2, 1e-2};
const Tolerance kFp32Out{2e-5, 1e-4}, kFp32Lse{2e-5, 1e-5}, kFp32Grad{1e-4, 1e-3};

}  // namespace

TEST_CASE("emulated mma forward, bf16, D=64: causal positions, GQA, two merged blocks", "[gpu][emulated]") {
  check_forward<__nv_bfloat16, 64>(Kind::bf16, causal_problem(), kBf16Out, kBf16Lse);
}

TEST_CASE("emulated mma forward, fp16, D=128: causal, no skip", "[gpu][emulated]") {
  Problem pr = causal_problem();
  pr.skip = false;
  check_forward<__half, 128>(Kind::fp16, pr, kFp16Out, kFp16Lse);
}

TEST_CASE("emulated mma forward, bf16, D=128: full mask, batch 2", "[gpu][emulated]") {
  Problem pr = causal_problem();
  pr.causal = false;
  pr.B = 2;
  pr.H = 2;
  pr.HKV = 1;
  check_forward<__nv_bfloat16, 128>(Kind::bf16, pr, kBf16Out, kBf16Lse);
}

TEST_CASE("emulated mma backward, bf16, D=64: causal positions, GQA", "[gpu][emulated]") {
  check_backward<__nv_bfloat16, 64>(Kind::bf16, causal_problem(), kBf16Grad);
}

TEST_CASE("emulated mma backward, fp16, D=128: causal, no skip, two blocks", "[gpu][emulated]") {
  Problem pr = causal_problem();
  pr.skip = false;
  check_backward<__half, 128>(Kind::fp16, pr, kFp16Grad);
}

TEST_CASE("emulated fp32 forward and backward, D=40: causal positions, GQA", "[gpu][emulated]") {
  Problem pr = causal_problem();
  pr.D = 40;
  check_forward<float, 0>(Kind::fp32, pr, kFp32Out, kFp32Lse);
  check_backward<float, 0>(Kind::fp32, pr, kFp32Grad);
}

TEST_CASE("emulated fp32 forward and backward, D=128: full mask", "[gpu][emulated]") {
  Problem pr = causal_problem();
  pr.D = 128;
  pr.causal = false;
  check_forward<float, 0>(Kind::fp32, pr, kFp32Out, kFp32Lse);
  check_backward<float, 0>(Kind::fp32, pr, kFp32Grad);
}

// ---- every barrier deleted in turn --------------------------------------------------------------
// The smallest problems that pass every barrier site of a kernel at least twice: one block, three
// tiles of the streamed operand (so a prefetch overwrites a stage that was read before), no mask.
namespace {

Problem one_block(int q_rows, int k_rows, int dim) {
  Problem pr;
  pr.Sq = q_rows;
  pr.Sk = k_rows;
  pr.H = pr.HKV = 1;
  pr.D = dim;
  pr.causal = false;
  pr.q_rows = {0, q_rows};
  pr.kv_blocks = {{0, k_rows}};
  pr.q_pos = positions(q_rows, 0, 0);
  pr.k_pos = positions(k_rows, 0, 0);
  return pr;
}

// What deleting a barrier did: "race" (the emulator reported a shared-memory race), "deadlock"
// (warps that disagreed took different paths: some wait at a barrier the others never reach),
// "wrong result" (the output failed its tolerance), "harmless" (none of these), or "error: ..."
// (anything else).
template <class Run>
std::string outcome_without_barrier(int site, Run run, std::string& message) {
  const emu::DropBarrier drop(site);
  try {
    const Verdict verdict = run();
    message = verdict.describe;
    return verdict.ok ? "harmless" : "wrong result";
  } catch (const std::runtime_error& e) {
    message = e.what();
    if (message.find("shared-memory race") != std::string::npos) return "race";
    return message.find("deadlock") != std::string::npos ? "deadlock" : "error: " + message;
  }
}

struct Site {
  int site;
  const char* expected;
  const char* why;  // for a harmless deletion: why the barrier is not needed
};

template <class Run>
void check_barriers(const char* kernel, std::initializer_list<Site> sites, Run run) {
  {
    std::string message;
    REQUIRE(outcome_without_barrier(0, run, message) == "harmless");  // site 0: nothing deleted
  }
  for (const Site& site : sites) {
    std::string message;
    const std::string outcome = outcome_without_barrier(site.site, run, message);
    INFO(kernel << ", barrier " << site.site << " deleted: " << outcome << " -- " << message);
    if (std::string(site.expected) == "harmless") INFO("harmless because " << site.why);
    CHECK(outcome == site.expected);
    if (outcome == "race") CHECK(message.find(kernel) != std::string::npos);  // names the kernel
  }
}

}  // namespace

TEST_CASE("emulated kernels: deleting any barrier of forward_mma is caught", "[gpu][emulated][barriers]") {
  const Problem pr = one_block(64, 192, 64);
  check_barriers("forward_mma<bf16, 64>", {{1, "race", ""}, {2, "race", ""}},
                 [&] { return run_forward<__nv_bfloat16, 64, Forward::rows64>(Kind::bf16, pr, kBf16Out, kBf16Lse); });
  const Problem pr128 = one_block(64, 192, 128);
  check_barriers("forward_mma<fp16, 128>", {{1, "race", ""}, {2, "race", ""}},
                 [&] { return run_forward<__half, 128, Forward::rows64>(Kind::fp16, pr128, kFp16Out, kFp16Lse); });
}

namespace {

// forward_fa2's barrier 3 (the table of tile kinds is complete) exists only under a mask: a causal
// block whose queries (positions 128..255) see key tiles 0-1 whole, 2-3 cut by the diagonal and
// 4-5 not at all, classified two tiles per table, so chunk 2 (tiles 4-5, skipped) reuses chunk 0's
// table (full, full). Without the barrier a warp that reads chunk 2's kinds before their
// classifier (warp 0 or 1) wrote them finds "full" there and computes tile 4 while the others skip
// it: the block's warps wait at different barriers. Four heads: four blocks, each with its own
// random warp order (in one, warp 0 may well run first).
Problem causal_chunks(int dim) {
  Problem pr = one_block(128, 384, dim);
  pr.H = 4;
  pr.HKV = 2;
  pr.causal = true;
  pr.q_pos.clear();
  for (int i = 0; i < 128; ++i) pr.q_pos.push_back(128 + i);
  return pr;
}

}  // namespace

TEST_CASE("emulated kernels: deleting any barrier of forward_fa2 is caught", "[gpu][emulated][barriers]") {
  const Problem pr = one_block(128, 192, 64);
  check_barriers("forward_fa2<bf16, 64>", {{1, "race", ""}, {2, "race", ""}},
                 [&] { return run_forward<__nv_bfloat16, 64>(Kind::bf16, pr, kBf16Out, kBf16Lse); });
  const Problem pr128 = one_block(128, 192, 128);
  check_barriers("forward_fa2<fp16, 128>", {{1, "race", ""}, {2, "race", ""}},
                 [&] { return run_forward<__half, 128>(Kind::fp16, pr128, kFp16Out, kFp16Lse); });
  const Problem chunks = causal_chunks(64);
  check_barriers("forward_fa2<bf16, 64>", {{1, "race", ""}, {2, "race", ""}, {3, "deadlock", ""}}, [&] {
    return run_forward<__nv_bfloat16, 64, Forward::fa2, 2>(Kind::bf16, chunks, kBf16Out, kBf16Lse);
  });
}

TEST_CASE("emulated mma forward, tile kinds classified in chunks of 1 and 2 key tiles", "[gpu][emulated][mask]") {
  // The production chunk (256 tiles) is never crossed at these sizes; small chunks cross it at
  // every tile or every other one, with skipped tiles and whole skipped chunks among them.
  check_forward<__nv_bfloat16, 64, Forward::fa2, 1>(Kind::bf16, causal_problem(), kBf16Out, kBf16Lse);
  check_forward<__half, 128, Forward::fa2, 2>(Kind::fp16, causal_chunks(128), kFp16Out, kFp16Lse);
  const MaskCase& c = kMaskCases[GENERATE(range(size_t{0}, std::size(kMaskCases)))];
  INFO(c.name);
  check_forward<__nv_bfloat16, 64, Forward::fa2, 1>(Kind::bf16, masked_problem(c), kBf16Out, kBf16Lse);
}

TEST_CASE("emulated mma forward, the last block's launch finalizes: out and lse written by the kernel",
          "[gpu][emulated][mask]") {
  Problem causal = causal_problem();
  causal.fused_finalize = true;
  check_forward<__nv_bfloat16, 64>(Kind::bf16, causal, kBf16Out, kBf16Lse);
  causal.skip = false;
  check_forward<__half, 128>(Kind::fp16, causal, kFp16Out, kFp16Lse);
  // The last block lies wholly in the queries' future: every tile skipped, out and lse come from
  // the state the first block left.
  Problem future = causal_chunks(128);
  future.kv_blocks = {{0, 256}, {256, 384}};
  future.fused_finalize = true;
  check_forward<__nv_bfloat16, 128>(Kind::bf16, future, kBf16Out, kBf16Lse);
  const MaskCase& c = kMaskCases[GENERATE(range(size_t{0}, std::size(kMaskCases)))];
  INFO(c.name);
  Problem masked = masked_problem(c);
  masked.fused_finalize = true;
  check_forward<__nv_bfloat16, 64>(Kind::bf16, masked, kBf16Out, kBf16Lse);
}

TEST_CASE("emulated mma forward with 64-row tiles (ladder rung 05): causal, GQA, documents, window",
          "[gpu][emulated][mask]") {
  check_forward<__nv_bfloat16, 64, Forward::rows64>(Kind::bf16, causal_problem(), kBf16Out, kBf16Lse);
  Problem pr = causal_problem();
  pr.skip = false;
  check_forward<__half, 128, Forward::rows64>(Kind::fp16, pr, kFp16Out, kFp16Lse);
  // A teaching rung now, its code as it was when every case below ran as the production kernel:
  // documents, a window across tiles, rows that see no key, padding (the rest cost CI time only).
  const MaskCase& c = kMaskCases[GENERATE(size_t{0}, size_t{3}, size_t{6}, size_t{8})];
  INFO(c.name);
  check_forward<__nv_bfloat16, 64, Forward::rows64>(Kind::bf16, masked_problem(c), kBf16Out, kBf16Lse);
}

TEST_CASE("emulated kernels: deleting either barrier of backward_mma is caught", "[gpu][emulated][barriers]") {
  // One 128-key block (every warp owns keys) and three query tiles: 64-row tiles at D = 64, 32-row
  // tiles at D = 128.
  const Problem pr = one_block(192, 128, 64);
  check_barriers("backward_mma<bf16, 64>", {{1, "race", ""}, {2, "race", ""}},
                 [&] { return run_backward<__nv_bfloat16, 64>(Kind::bf16, pr, kBf16Grad); });
  const Problem pr128 = one_block(96, 128, 128);
  check_barriers("backward_mma<fp16, 128>", {{1, "race", ""}, {2, "race", ""}},
                 [&] { return run_backward<__half, 128>(Kind::fp16, pr128, kFp16Grad); });
}

TEST_CASE("emulated kernels: deleting any barrier of the fp32 kernels is caught, but forward's third",
          "[gpu][emulated][barriers]") {
  const Problem fwd = one_block(32, 96, 32);
  check_barriers("forward_fp32",
                 {{1, "wrong result", ""},
                  {2, "wrong result", ""},
                  {3, "harmless",
                   "a row's P is written and read only by its own four threads, in one warp, whose shuffles order "
                   "them"}},
                 [&] { return run_forward<float, 0>(Kind::fp32, fwd, kFp32Out, kFp32Lse); });
  const Problem bwd = one_block(96, 32, 32);
  check_barriers("backward_fp32", {{1, "wrong result", ""}, {2, "wrong result", ""}, {3, "wrong result", ""}},
                 [&] { return run_backward<float, 0>(Kind::fp32, bwd, kFp32Grad); });
}

// ---- the general mask: documents, window, padding ----------------------------------------------

TEST_CASE("emulated mma forward and backward, bf16, D=64: documents, window, padding", "[gpu][emulated][mask]") {
  const MaskCase& c = kMaskCases[GENERATE(range(size_t{0}, std::size(kMaskCases)))];
  INFO(c.name);
  check_forward<__nv_bfloat16, 64>(Kind::bf16, masked_problem(c), kBf16Out, kBf16Lse);
  check_backward<__nv_bfloat16, 64>(Kind::bf16, masked_problem(c), kBf16Grad);
}

TEST_CASE("emulated mma forward and backward, fp16, D=128: documents, window, padding", "[gpu][emulated][mask]") {
  const MaskCase& c = kMaskCases[GENERATE(1, 2, 5, 7, 8)];  // the rest at D=128 below: D=128 is slow to emulate
  INFO(c.name);
  check_forward<__half, 128>(Kind::fp16, masked_problem(c), kFp16Out, kFp16Lse);
  check_backward<__half, 128>(Kind::fp16, masked_problem(c), kFp16Grad);
}

TEST_CASE("emulated mma forward and backward, bf16, D=128: documents and window", "[gpu][emulated][mask]") {
  const MaskCase& c = kMaskCases[GENERATE(0, 3, 4, 6)];
  INFO(c.name);
  check_forward<__nv_bfloat16, 128>(Kind::bf16, masked_problem(c), kBf16Out, kBf16Lse);
  check_backward<__nv_bfloat16, 128>(Kind::bf16, masked_problem(c), kBf16Grad);
}

TEST_CASE("emulated fp32 forward and backward, D=40 and 128: documents, window, padding", "[gpu][emulated][mask]") {
  const MaskCase& c = kMaskCases[GENERATE(range(size_t{0}, std::size(kMaskCases)))];
  INFO(c.name);
  Problem pr = masked_problem(c);
  pr.D = 40;
  check_forward<float, 0>(Kind::fp32, pr, kFp32Out, kFp32Lse);
  check_backward<float, 0>(Kind::fp32, pr, kFp32Grad);
  pr.D = 128;
  pr.H = 2, pr.HKV = 1;
  check_forward<float, 0>(Kind::fp32, pr, kFp32Out, kFp32Lse);
  check_backward<float, 0>(Kind::fp32, pr, kFp32Grad);
}

// The all-to-all row copies (elementwise.cuh): every word width the kernel picks (16, 8, 4 bytes,
// one element), index lists, head offsets, a batch, and grids too small and too large for the work,
// against a plain loop over (b, i, h, d).
struct CopyCase {
  int element_bytes, dim, batch, count, head_count;
  bool indexed;
  int base_offset;  // elements added to both bases: misaligns them
};

template <class E>
void check_row_copy(const CopyCase& k, unsigned blocks) {
  const int src_rows = k.count + 3, dst_rows = k.count + 5, src_heads = k.head_count + 2, dst_heads = k.head_count + 1;
  std::vector<E> src(static_cast<size_t>(k.batch) * src_rows * src_heads * k.dim + 8);
  for (size_t e = 0; e < src.size(); ++e) src[e] = static_cast<E>(e * 7 + 1);
  std::vector<E> dst(static_cast<size_t>(k.batch) * dst_rows * dst_heads * k.dim + 8, E(0));
  std::vector<E> want = dst;
  std::vector<int32_t> src_index, dst_index;
  for (int i = 0; i < k.count; ++i) {
    src_index.push_back((i * 5 + 2) % src_rows);
    dst_index.push_back(dst_rows - 1 - i);
  }
  gpu::RowCopy c;
  c.src = src.data() + k.base_offset;
  c.dst = dst.data() + k.base_offset;
  c.src_rows = src_rows, c.src_heads = src_heads, c.src_head0 = 1;
  c.dst_rows = dst_rows, c.dst_heads = dst_heads, c.dst_head0 = dst_heads - k.head_count;
  c.src_index = k.indexed ? src_index.data() : nullptr;
  c.dst_index = k.indexed ? dst_index.data() : nullptr;
  c.count = k.count, c.head_count = k.head_count, c.batch = k.batch, c.dim = k.dim, c.element_bytes = k.element_bytes;
  for (int b = 0; b < k.batch; ++b) {
    for (int i = 0; i < k.count; ++i) {
      const int si = k.indexed ? src_index[i] : i, di = k.indexed ? dst_index[i] : i;
      for (int h = 0; h < k.head_count; ++h) {
        for (int d = 0; d < k.dim; ++d) {
          want[k.base_offset + ((size_t(b) * dst_rows + di) * dst_heads + c.dst_head0 + h) * k.dim + d] =
              src[k.base_offset + ((size_t(b) * src_rows + si) * src_heads + c.src_head0 + h) * k.dim + d];
        }
      }
    }
  }
  emu::launch(
      emu::Dim3{blocks, 1, 1}, 64, 0, [&] { gpu::copy_token_rows_kernel<E>(c); }, "copy_token_rows");
  CHECK(dst == want);

  // copy_lse_rows on (B, heads, rows) fp32 tensors, the same RowCopy
  if constexpr (std::is_same_v<E, float>) {
    std::vector<float> lse_dst(dst.size(), 0.f), lse_want(dst.size(), 0.f);
    c.dst = lse_dst.data() + k.base_offset;
    for (int b = 0; b < k.batch; ++b) {
      for (int h = 0; h < k.head_count; ++h) {
        for (int i = 0; i < k.count; ++i) {
          const int si = k.indexed ? src_index[i] : i, di = k.indexed ? dst_index[i] : i;
          lse_want[k.base_offset + (size_t(b) * dst_heads + c.dst_head0 + h) * dst_rows + di] =
              src[k.base_offset + (size_t(b) * src_heads + c.src_head0 + h) * src_rows + si];
        }
      }
    }
    emu::launch(
        emu::Dim3{blocks, 1, 1}, 64, 0, [&] { gpu::copy_lse_rows_kernel(c); }, "copy_lse_rows");
    CHECK(lse_dst == lse_want);
  }
}

TEST_CASE("emulated all-to-all row copies: 16/8/4-byte words and single elements, indexed, any grid",
          "[gpu][emulated][copy]") {
  const CopyCase cases[] = {
      {2, 64, 2, 5, 3, true, 0},    // bf16, D = 64: 128-byte rows, 16-byte words
      {2, 128, 1, 3, 2, false, 0},  // 16-byte words, no index lists
      {2, 12, 2, 4, 3, true, 0},    // 24-byte rows: 8-byte words
      {2, 6, 1, 5, 2, true, 0},     // 12-byte rows: 4-byte words
      {2, 3, 2, 3, 2, true, 0},     // 6-byte rows: single elements
      {2, 64, 1, 3, 2, true, 1},    // bases off by 2 bytes: single elements
      {4, 40, 2, 3, 3, true, 0},    // fp32, D = 40: 160-byte rows, 16-byte words
      {4, 5, 1, 4, 3, true, 0},     // 20-byte rows: 4-byte words
      {4, 32, 1, 3, 2, false, 2},   // bases off by 8 bytes: 8-byte words
  };
  for (const CopyCase& k : cases) {
    for (const unsigned blocks : {1U, 3U, 64U}) {  // 64 threads, 192, and more threads than words
      CAPTURE(k.element_bytes, k.dim, k.batch, k.count, k.head_count, k.indexed, k.base_offset, blocks);
      if (k.element_bytes == 2) {
        check_row_copy<uint16_t>(k, blocks);
      } else {
        check_row_copy<float>(k, blocks);
      }
    }
  }
}

// ---- [precision] the GPU kernels' rounding points against the simulator's emulation ----------
// The simulator emulates bf16 / fp16 with reference/precision's round_to and the blockwise kernel's
// low-precision operands (KernelOptions::operands: P rounded before P V, P and dS before the
// gradient GEMMs), which are meant to be the rounding points of these kernels (gpu/README.md,
// "Rounding points"). Where the two must agree bit for bit they are compared bit for bit: the
// conversion itself, and the inputs as the kernels read them. The kernels' results cannot agree
// bit for bit on general inputs, for two reasons: mma sums its products in another order than
// Eigen's GEMM, and P comes from ex2.approx (fast_exp) on the GPU but from Eigen's exp on the CPU.
// On inputs built so that neither matters (every product and every partial sum exact in fp32,
// and every exp far enough from a rounding midpoint that both exps round to the same 16-bit P),
// the two kernels must agree bit for bit, P and dS rounding included — and the CPU kernel without
// the rounding (operands fp32, the old emulation) must not.
namespace {

// A 16-bit pattern of T from the emulated cvt.rn, exactly as a kernel gets it (pack2, low half).
template <class T>
uint16_t kernel_cvt_bits(float x) {
  return static_cast<uint16_t>(gpu::dev::pack2<T>(x, 0.f) & 0xFFFFU);
}

// The 16-bit pattern the GPU executor's host encoding (gpu/dtype.cpp: CUDA's host conversion)
// stores for an input, as device_copy does here.
template <class T>
uint16_t host_encode_bits(float x) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    const __nv_bfloat16_raw raw = __float2bfloat16(x);
    return raw.x;
  } else {
    const __half_raw raw = __float2half(x);
    return raw.x;
  }
}

template <class T>
uint16_t reference_bits(float x) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) return bf16_bits(x);
  return fp16_bits(x);
}

template <class T>
float reference_value(uint16_t bits) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) return from_bf16_bits(bits);
  return from_fp16_bits(bits);
}

template <class T>
Precision precision_of() {
  return std::is_same_v<T, __nv_bfloat16> ? Precision::bf16 : Precision::fp16;
}

// The structured sweep of float bit patterns (2^32 would take about a minute here):
//   every sign and exponent (512) x every pattern of the 16 low fraction bits x the 7 high ones
//   0x00, 0x01 (bf16's kept last bit even, odd) and 0x7F (a round-up carries into the exponent):
//   every bf16 and fp16 tie, round-down and round-up, inf, NaN, float subnormals, the fp16
//   overflow boundary 65520 and fp16's subnormal range (exponents 102..112) with its shifts;
//   plus every sign and exponent x all 128 high patterns x low-bit edges (ties of fp16 subnormals
//   whose rounding bit lies in the high bits), plus 2^22 hashed patterns.
template <class Visit>
void sweep_float_bits(Visit visit) {
  for (uint32_t top = 0; top < 512; ++top) {
    for (const uint32_t high : {0x00U, 0x01U, 0x7FU})
      for (uint32_t low = 0; low < 0x10000U; ++low) visit((top << 23) | (high << 16) | low);
    for (uint32_t high = 0; high < 128; ++high)
      for (const uint32_t low : {0x0000U, 0x0001U, 0x0FFFU, 0x1000U, 0x1001U, 0x8000U, 0xFFFFU})
        visit((top << 23) | (high << 16) | low);
  }
  for (uint64_t i = 0; i < (uint64_t{1} << 22); ++i) visit(static_cast<uint32_t>(input_hash(7, TensorId::q, i)));
}

template <class T>
void check_conversions_bitwise() {
  int64_t tested = 0, kernel_mismatches = 0, host_mismatches = 0, nans = 0, ties = 0, subnormals = 0, overflows = 0;
  std::string first;
  const int dropped = std::is_same_v<T, __nv_bfloat16> ? 16 : 13;  // fraction bits a normal result drops
  sweep_float_bits([&](uint32_t bits) {
    const auto x = std::bit_cast<float>(bits);
    ++tested;
    const uint16_t want = reference_bits<T>(x), kernel = kernel_cvt_bits<T>(x), host = host_encode_bits<T>(x);
    if (std::isnan(x)) {  // cvt gives the canonical NaN, precision.cpp keeps the payload: both NaN
      ++nans;
      const bool ok = std::isnan(reference_value<T>(kernel)) && std::isnan(reference_value<T>(host)) &&
                      std::isnan(reference_value<T>(want));
      kernel_mismatches += ok ? 0 : 1;
      return;
    }
    if (kernel != want || host != want) {
      kernel_mismatches += kernel != want ? 1 : 0;
      host_mismatches += host != want ? 1 : 0;
      if (first.empty())
        first = "x bits " + std::to_string(bits) + ": reference " + std::to_string(want) + ", kernel cvt " +
                std::to_string(kernel) + ", host " + std::to_string(host);
    }
    const uint32_t rest = bits & ((1U << dropped) - 1U);
    ties += rest == (1U << (dropped - 1)) ? 1 : 0;
    const float r = reference_value<T>(want);
    subnormals += (r != 0 && std::fabs(r) < (std::is_same_v<T, __nv_bfloat16> ? 0x1p-126f : 0x1p-14f)) ? 1 : 0;
    overflows += (std::isinf(r) && !std::isinf(x)) ? 1 : 0;
  });
  INFO(dtype_name<T>() << ": " << tested << " floats, " << nans << " NaN, " << ties << " ties, " << subnormals
                       << " subnormal results, " << overflows << " overflows; first mismatch: " << first);
  CHECK(kernel_mismatches == 0);
  CHECK(host_mismatches == 0);
  // The sweep reaches every class it claims to.
  CHECK(nans > 0);
  CHECK(ties > 1000);
  CHECK(subnormals > 1000);
  CHECK(overflows > 1000);
}

// ---- exact agreement of the kernels ----

// A sum whose terms are exact in fp32 is exact in every order and grouping when every partial
// sum is: all are multiples of the smallest term's last bit 2^L, and none exceeds sum |t| in
// magnitude, so sum |t| < 2^(L + 24) suffices.
struct ExactSums {
  int64_t sums = 0, inexact = 0;
  void add(const std::vector<double>& terms) {
    ++sums;
    int lowest = 1 << 20;
    double magnitude = 0;
    bool ok = true;
    for (const double t : terms) {
      if (t == 0) continue;
      ok = ok && static_cast<double>(static_cast<float>(t)) == t;
      int exponent = 0;
      const auto mantissa = static_cast<uint64_t>(std::ldexp(std::frexp(std::fabs(t), &exponent), 53));
      lowest = std::min(lowest, exponent - 53 + std::countr_zero(mantissa));
      magnitude += std::fabs(t);
    }
    ok = ok && (magnitude == 0 || magnitude < std::ldexp(1.0, lowest + 24));
    inexact += ok ? 0 : 1;
  }
};

// The relative distance from e^x * c (exact) to the nearest rounding midpoint of T: beyond
// 2^-19 neither kernel's exp (ex2.approx: within about 2^-21 after the fp32 product x log2(e);
// Eigen's: about 2^-23) nor the fp32 product with c can carry the value across the midpoint.
template <class T>
double midpoint_margin(double value) {
  if (value == 0) return 1;
  const int bits = std::is_same_v<T, __nv_bfloat16> ? 8 : 11;
  int exponent = 0;
  std::frexp(std::fabs(value), &exponent);
  const double ulp = std::ldexp(1.0, exponent - bits);
  const double units = std::fabs(value) / ulp;
  return std::fabs(units - std::floor(units) - 0.5) * ulp / std::fabs(value);
}

// Dyadic inputs with a known row maximum, D = 64 (scale 1/8, exact): q, k in {-1, 0, 1} on dims
// 0..15, v and dout in {-1/2, 0, 1/2} (dout on dims 0..7 only, to keep dP small); dim 16 carries
// q = 2 and, for key 0 alone, k = 8, so key 0 scores 16 for every query and no key more (the other
// keys' dot products lie in [-16, 16]). Every score is a multiple of 1/8 after scaling; every
// x = s - max lies in [-4, 0], so P >= e^-4, and a kernel's running max is set by its first key
// tile and never moves again (every rescale factor is e^0 = 1, exact in both kernels).
struct ExactInputs {
  Problem pr;
  Tensor<float> q, k, v, dout;
};

float ternary(TensorId id, int64_t index, float unit) {
  const float z = input_value(23, id, static_cast<uint64_t>(index));
  return z > 0.6f ? unit : z < -0.6f ? -unit : 0.f;
}

ExactInputs exact_inputs() {
  ExactInputs x;
  Problem& pr = x.pr;
  pr.B = 1, pr.Sq = 64, pr.Sk = 192, pr.H = 2, pr.HKV = 1, pr.D = 64;
  pr.causal = false;  // Eigen's exp(-inf) is about 1e-38, not 0: a masked key would leave a trace
  pr.q_rows = {0, pr.Sq};
  pr.kv_blocks = {{0, pr.Sk}};  // 3 key tiles of the GPU kernels, 1 of the CPU kernel
  pr.q_pos = iota_positions(pr.Sq);
  pr.k_pos = iota_positions(pr.Sk);
  x.q = Tensor<float>({pr.B, pr.Sq, pr.H, pr.D});
  x.k = Tensor<float>({pr.B, pr.Sk, pr.HKV, pr.D});
  x.v = Tensor<float>(x.k.shape());
  x.dout = Tensor<float>(x.q.shape());
  for (int64_t i = 0; i < pr.Sq; ++i)
    for (int64_t h = 0; h < pr.H; ++h)
      for (int64_t d = 0; d < pr.D; ++d) {
        const int64_t at = (i * pr.H + h) * pr.D + d;
        x.q[at] = d < 16 ? ternary(TensorId::q, at, 1.f) : d == 16 ? 2.f : 0.f;
        x.dout[at] = d < 8 ? ternary(TensorId::dout, at, 0.5f) : 0.f;
      }
  for (int64_t j = 0; j < pr.Sk; ++j)
    for (int64_t d = 0; d < pr.D; ++d) {
      const int64_t at = j * pr.D + d;
      x.k[at] = d < 16 ? (j == 0 ? 0.f : ternary(TensorId::k, at, 1.f)) : (d == 16 && j == 0) ? 8.f : 0.f;
      x.v[at] = ternary(TensorId::v, at, 0.5f);
    }
  return x;
}

// The exact exponent x = scale q.k - 2 of every (head, query, key): the row maximum is 16 / 8 = 2.
double exact_x(const ExactInputs& x, int64_t h, int64_t i, int64_t j) {
  double dot = 0;
  for (int64_t d = 0; d < x.pr.D; ++d) dot += double(x.q(0, i, h, d)) * double(x.k(0, j, 0, d));
  return dot / 8 - 2;
}

int64_t bitwise_differences(const float* a, const float* b, int64_t n) {
  int64_t differ = 0;
  for (int64_t i = 0; i < n; ++i) differ += std::bit_cast<uint32_t>(a[i]) == std::bit_cast<uint32_t>(b[i]) ? 0 : 1;
  return differ;
}

// Most gradient columns of these inputs are exact zeros (q, dout vanish on most dims): the
// rounding can only show in the others.
int64_t nonzeros(const float* a, int64_t n) {
  return std::count_if(a, a + n, [](float v) { return v != 0; });
}

template <class T>
void check_forward_exact() {
  constexpr int D = 64;
  const ExactInputs x = exact_inputs();
  const Problem& pr = x.pr;
  const Precision precision = precision_of<T>();
  // Preconditions, from the exact values: every P far from a midpoint; every o = sum round(P) v exact.
  double margin = 1;
  ExactSums sums;
  for (int64_t h = 0; h < pr.H; ++h)
    for (int64_t i = 0; i < pr.Sq; ++i) {
      std::vector<float> p(static_cast<size_t>(pr.Sk));
      for (int64_t j = 0; j < pr.Sk; ++j) {
        const double e = std::exp(exact_x(x, h, i, j));
        margin = std::min(margin, midpoint_margin<T>(e));
        p[static_cast<size_t>(j)] = round_to(precision, static_cast<float>(e));
      }
      for (int64_t d = 0; d < D; ++d) {
        std::vector<double> terms;
        for (int64_t j = 0; j < pr.Sk; ++j) terms.push_back(double(p[static_cast<size_t>(j)]) * x.v(0, j, 0, d));
        sums.add(terms);
      }
    }
  INFO(dtype_name<T>() << ": smallest relative distance of a P from a rounding midpoint 2^" << std::log2(margin) << "; "
                       << sums.inexact << " of " << sums.sums << " o sums inexact");
  REQUIRE(margin > 0x1p-19);
  REQUIRE(sums.inexact == 0);

  const Mask mask = pr.mask();
  const gpu::KernelMask km = gpu::kernel_mask(mask, pr.q_pos);
  const std::vector<T> qd = device_copy<T>(x.q), kd = device_copy<T>(x.k), vd = device_copy<T>(x.v);
  const std::vector<int32_t> qp = to_int32(pr.q_pos), kp = to_int32(pr.k_pos);
  SoftmaxState<float> gpu_acc = make_accumulator(pr.B, pr.H, pr.Sq, D);
  ForwardParams p;
  p.a = params_of(pr, qd.data(), kd.data(), vd.data(), qp.data(), kp.data(), km, pr.kv_blocks[0]);
  p.acc_max = gpu_acc.max.data();
  p.acc_sum = gpu_acc.sum.data();
  p.acc_out = gpu_acc.out.data();
  using Tiles = gpu::ForwardFa2Tiles<D>;
  const std::string name = "forward_fa2<" + dtype_name<T>() + ", 64>";
  emu::launch(
      grid_of(Tiles::q_tiles(p.a), pr), Tiles::kThreads, Tiles::smem_bytes(Tiles::kChunkTiles),
      [&] { gpu::forward_fa2_kernel<T, D>(p); }, name.c_str());

  auto cpu = [&](Precision operands) {
    SoftmaxState<float> acc = make_accumulator(pr.B, pr.H, pr.Sq, D);
    KernelOptions options{1, pr.skip};
    options.operands = operands;
    flash_forward_accumulate(x.q, x.k, x.v, pr.q_pos, pr.k_pos, pr.q_rows, pr.kv_blocks[0], mask, acc, options);
    return acc;
  };
  const SoftmaxState<float> emulation = cpu(precision), unrounded = cpu(Precision::fp32);
  const int64_t n_out = gpu_acc.out.size(), n_rows = gpu_acc.max.size();
  // m and o bit for bit. l sums the unrounded P, ex2.approx's against Eigen's exp: a few fp32 ulps.
  CHECK(bitwise_differences(gpu_acc.max.data(), emulation.max.data(), n_rows) == 0);
  CHECK(bitwise_differences(gpu_acc.out.data(), emulation.out.data(), n_out) == 0);
  double worst_l = 0;
  for (int64_t r = 0; r < n_rows; ++r)
    worst_l = std::max(worst_l, std::fabs(double(gpu_acc.sum[r]) - emulation.sum[r]) / emulation.sum[r]);
  INFO("l: largest relative difference " << worst_l);
  CHECK(worst_l < 0x1p-19);
  // The check can fail: without the P rounding the CPU kernel's o is not the GPU's.
  const int64_t old_differences = bitwise_differences(gpu_acc.out.data(), unrounded.out.data(), n_out);
  const int64_t nonzero = nonzeros(gpu_acc.out.data(), n_out);
  INFO("o elements differing from the CPU kernel without P rounding: " << old_differences << " of the " << nonzero
                                                                       << " nonzero ones");
  CHECK(old_differences > nonzero / 2);
}

template <class T>
void check_backward_exact() {
  constexpr int D = 64;
  const ExactInputs x = exact_inputs();
  const Problem& pr = x.pr;
  const Precision precision = precision_of<T>();
  // lse and delta are inputs of both kernels, any values will do: lse = the row maximum 2 keeps
  // x = s - lse on the same exact grid as the forward's; delta a multiple of 1/4 keeps dP - delta
  // exact (dP = dO . V is a multiple of 1/4).
  Tensor<float> lse({pr.B, pr.H, pr.Sq}, 2.f), delta({pr.B, pr.H, pr.Sq});
  for (int64_t h = 0; h < pr.H; ++h)
    for (int64_t i = 0; i < pr.Sq; ++i) delta(0, h, i) = 0.25f * static_cast<float>((i + h) % 3 - 1);

  // Preconditions: every P and dS far from a midpoint; every dV, dK, dQ sum exact.
  std::vector<float> p_rounded(static_cast<size_t>(pr.H * pr.Sq * pr.Sk)), ds_rounded(p_rounded.size());
  auto at = [&](int64_t h, int64_t i, int64_t j) { return static_cast<size_t>((h * pr.Sq + i) * pr.Sk + j); };
  double margin = 1;
  for (int64_t h = 0; h < pr.H; ++h)
    for (int64_t i = 0; i < pr.Sq; ++i)
      for (int64_t j = 0; j < pr.Sk; ++j) {
        double dp = 0;
        for (int64_t d = 0; d < D; ++d) dp += double(x.dout(0, i, h, d)) * x.v(0, j, 0, d);
        const double e = std::exp(exact_x(x, h, i, j)), ds = e * (dp - delta(0, h, i));
        margin = std::min({margin, midpoint_margin<T>(e), midpoint_margin<T>(ds)});
        p_rounded[at(h, i, j)] = round_to(precision, static_cast<float>(e));
        ds_rounded[at(h, i, j)] = round_to(precision, static_cast<float>(ds));
      }
  ExactSums sums;
  for (int64_t d = 0; d < D; ++d) {
    for (int64_t j = 0; j < pr.Sk; ++j) {
      std::vector<double> dv_terms, dk_terms;  // over both query heads of the kv head and all queries
      for (int64_t h = 0; h < pr.H; ++h)
        for (int64_t i = 0; i < pr.Sq; ++i) {
          dv_terms.push_back(double(p_rounded[at(h, i, j)]) * x.dout(0, i, h, d));
          dk_terms.push_back(double(ds_rounded[at(h, i, j)]) * x.q(0, i, h, d));
        }
      sums.add(dv_terms);
      sums.add(dk_terms);
    }
    for (int64_t h = 0; h < pr.H; ++h)
      for (int64_t i = 0; i < pr.Sq; ++i) {
        std::vector<double> dq_terms;
        for (int64_t j = 0; j < pr.Sk; ++j) dq_terms.push_back(double(ds_rounded[at(h, i, j)]) * x.k(0, j, 0, d));
        sums.add(dq_terms);
      }
  }
  INFO(dtype_name<T>() << ": smallest relative distance of a P or dS from a rounding midpoint 2^" << std::log2(margin)
                       << "; " << sums.inexact << " of " << sums.sums << " gradient sums inexact");
  REQUIRE(margin > 0x1p-19);
  REQUIRE(sums.inexact == 0);

  const Mask mask = pr.mask();
  const gpu::KernelMask km = gpu::kernel_mask(mask, pr.q_pos);
  const std::vector<T> qd = device_copy<T>(x.q), kd = device_copy<T>(x.k), vd = device_copy<T>(x.v),
                       dod = device_copy<T>(x.dout);
  const std::vector<int32_t> qp = to_int32(pr.q_pos), kp = to_int32(pr.k_pos);
  AttentionGrads<float> gpu_grads{Tensor<float>(x.q.shape()), Tensor<float>(x.k.shape()), Tensor<float>(x.k.shape())};
  BackwardParams p;
  p.a = params_of(pr, qd.data(), kd.data(), vd.data(), qp.data(), kp.data(), km, pr.kv_blocks[0]);
  p.dout = dod.data();
  p.lse = lse.data();
  p.delta = delta.data();
  p.dq = gpu_grads.dq.data();
  p.dk = gpu_grads.dk.data();
  p.dv = gpu_grads.dv.data();
  using Tiles = gpu::BackwardMmaTiles<D>;
  const std::string name = "backward_mma<" + dtype_name<T>() + ", 64>";
  emu::launch(
      grid_of(Tiles::k_tiles(p.a), pr), Tiles::kThreads, Tiles::kSmemBytes, [&] { gpu::backward_mma_kernel<T, D>(p); },
      name.c_str());

  auto cpu = [&](Precision operands) {
    AttentionGrads<float> g{Tensor<float>(x.q.shape()), Tensor<float>(x.k.shape()), Tensor<float>(x.k.shape())};
    KernelOptions options{1, pr.skip};
    options.operands = operands;
    flash_backward_accumulate(x.q, x.k, x.v, x.dout, lse, delta, pr.q_pos, pr.k_pos, pr.q_rows, pr.kv_blocks[0], mask,
                              g.dq, g.dk, g.dv, options);
    return g;
  };
  const AttentionGrads<float> emulation = cpu(precision), unrounded = cpu(Precision::fp32);
  const char* names[] = {"dq", "dk", "dv"};
  const Tensor<float>* gpu_t[] = {&gpu_grads.dq, &gpu_grads.dk, &gpu_grads.dv};
  const Tensor<float>* emu_t[] = {&emulation.dq, &emulation.dk, &emulation.dv};
  const Tensor<float>* old_t[] = {&unrounded.dq, &unrounded.dk, &unrounded.dv};
  for (int i = 0; i < 3; ++i) {
    const int64_t n = gpu_t[i]->size();
    const int64_t differ = bitwise_differences(gpu_t[i]->data(), emu_t[i]->data(), n);
    const int64_t old_differ = bitwise_differences(gpu_t[i]->data(), old_t[i]->data(), n);
    const int64_t nonzero = nonzeros(gpu_t[i]->data(), n);
    INFO(names[i] << ": " << differ << " of " << n << " elements differ from the emulation, " << old_differ
                  << " of the " << nonzero << " nonzero ones from the CPU kernel without P / dS rounding");
    CHECK(differ == 0);
    CHECK(old_differ > nonzero / 2);  // the check can fail: the rounding points show
  }
}

// ---- close agreement on general inputs ----

// RMS of a - b over RMS of b.
double relative_rms(const Tensor<float>& a, const Tensor<float>& b) {
  double diff = 0, norm = 0;
  for (int64_t i = 0; i < a.size(); ++i) {
    diff += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    norm += double(b[i]) * b[i];
  }
  return std::sqrt(diff / norm);
}

// On general inputs (N(0, 1), causal positions, GQA, two merged blocks: causal_problem) the mma
// kernels and the CPU kernel differ in summation order and exp, so only closeness can be asked.
// What the CPU kernel's rounding of P (and dS) buys is measured against the precision's unit
// roundoff u: rounding P to T perturbs each product of a GEMM by up to u relative, so leaving it
// out puts the CPU kernel about u/4 (RMS) away from the GPU's. With it, what is left is fp32
// arithmetic (about 2^-22) and the P whose fp32 values, a few ulps apart in the two kernels, round
// to neighbouring values of T: each such P moves by 2u, and they are rare while the fp32
// differences are small against u. The bar, u/32 in RMS, lies between the two. Measured: the
// emulation at 0.00006u to 0.0015u (bf16, D = 128) and 0.002u to 0.009u (fp16, D = 64), the old
// kernel at 0.25u to 0.41u. (fp16 at D = 128 comes to about 0.05u: its scale 1/sqrt(128) is not a
// power of two, so the kernels' scores differ in the last bits — (q.k) scale on the GPU, (scale q).k
// on the CPU — and fp16's finer grid turns more of that into neighbouring P. Still 5x below the
// old kernel; the exact tests above are the sharp check.)
template <class T, int D>
void check_close_on_general_inputs() {
  const Precision precision = precision_of<T>();
  const Kind kind = precision == Precision::bf16 ? Kind::bf16 : Kind::fp16;
  const double bar = unit_roundoff(precision) / 32;
  Problem pr = causal_problem();
  pr.D = D;
  const Mask mask = pr.mask();
  const gpu::KernelMask km = gpu::kernel_mask(mask, pr.q_pos);
  const Tensor<float> q = rounded_input(kind, TensorId::q, {pr.B, pr.Sq, pr.H, D}, 31);
  const Tensor<float> k = rounded_input(kind, TensorId::k, {pr.B, pr.Sk, pr.HKV, D}, 31);
  const Tensor<float> v = rounded_input(kind, TensorId::v, {pr.B, pr.Sk, pr.HKV, D}, 31);
  const Tensor<float> dout = rounded_input(kind, TensorId::dout, {pr.B, pr.Sq, pr.H, D}, 31);
  const std::vector<T> qd = device_copy<T>(q), kd = device_copy<T>(k), vd = device_copy<T>(v),
                       dod = device_copy<T>(dout);
  const std::vector<int32_t> qp = to_int32(pr.q_pos), kp = to_int32(pr.k_pos);
  auto options = [&](Precision operands) {
    KernelOptions o{1, pr.skip};
    o.operands = operands;
    return o;
  };

  // Forward: the finalized output after both blocks.
  SoftmaxState<float> gpu_acc = make_accumulator(pr.B, pr.H, pr.Sq, D), emulation = gpu_acc, unrounded = gpu_acc;
  for (RowRange kv : pr.kv_blocks) {
    ForwardParams p;
    p.a = params_of(pr, qd.data(), kd.data(), vd.data(), qp.data(), kp.data(), km, kv);
    p.acc_max = gpu_acc.max.data();
    p.acc_sum = gpu_acc.sum.data();
    p.acc_out = gpu_acc.out.data();
    using Tiles = gpu::ForwardFa2Tiles<D>;
    emu::launch(
        grid_of(Tiles::q_tiles(p.a), pr), Tiles::kThreads, Tiles::smem_bytes(Tiles::kChunkTiles),
        [&] { gpu::forward_fa2_kernel<T, D>(p); }, "forward_fa2");
    flash_forward_accumulate(q, k, v, pr.q_pos, pr.k_pos, pr.q_rows, kv, mask, emulation, options(precision));
    flash_forward_accumulate(q, k, v, pr.q_pos, pr.k_pos, pr.q_rows, kv, mask, unrounded, options(Precision::fp32));
  }
  const Tensor<float> gpu_out = finalize_accumulator(gpu_acc, pr.B, pr.H, pr.Sq, D).out;
  const double forward_new = relative_rms(gpu_out, finalize_accumulator(emulation, pr.B, pr.H, pr.Sq, D).out);
  const double forward_old = relative_rms(gpu_out, finalize_accumulator(unrounded, pr.B, pr.H, pr.Sq, D).out);
  INFO(dtype_name<T>() << " out: RMS distance to the emulation " << forward_new / unit_roundoff(precision)
                       << " u, to the CPU kernel without P rounding " << forward_old / unit_roundoff(precision)
                       << " u");
  CHECK(forward_new < bar);
  CHECK(forward_old > bar);

  // Backward: lse and delta of the whole forward, as in run_backward.
  const AttentionOutput<float> forward = flash_attention(q, k, v, mask, pr.q_pos, pr.k_pos);
  const Tensor<float> delta = softmax_delta(dout, forward.out);
  auto grads = [&] {
    return AttentionGrads<float>{Tensor<float>(q.shape()), Tensor<float>(k.shape()), Tensor<float>(k.shape())};
  };
  AttentionGrads<float> gpu_g = grads(), emu_g = grads(), old_g = grads();
  for (RowRange kv : pr.kv_blocks) {
    BackwardParams p;
    p.a = params_of(pr, qd.data(), kd.data(), vd.data(), qp.data(), kp.data(), km, kv);
    p.dout = dod.data();
    p.lse = forward.lse.data();
    p.delta = delta.data();
    p.dq = gpu_g.dq.data();
    p.dk = gpu_g.dk.data();
    p.dv = gpu_g.dv.data();
    using Tiles = gpu::BackwardMmaTiles<D>;
    emu::launch(
        grid_of(Tiles::k_tiles(p.a), pr), Tiles::kThreads, Tiles::kSmemBytes,
        [&] { gpu::backward_mma_kernel<T, D>(p); }, "backward_mma");
    flash_backward_accumulate(q, k, v, dout, forward.lse, delta, pr.q_pos, pr.k_pos, pr.q_rows, kv, mask, emu_g.dq,
                              emu_g.dk, emu_g.dv, options(precision));
    flash_backward_accumulate(q, k, v, dout, forward.lse, delta, pr.q_pos, pr.k_pos, pr.q_rows, kv, mask, old_g.dq,
                              old_g.dk, old_g.dv, options(Precision::fp32));
  }
  const char* names[] = {"dq", "dk", "dv"};
  const Tensor<float>* gpu_t[] = {&gpu_g.dq, &gpu_g.dk, &gpu_g.dv};
  const Tensor<float>* emu_t[] = {&emu_g.dq, &emu_g.dk, &emu_g.dv};
  const Tensor<float>* old_t[] = {&old_g.dq, &old_g.dk, &old_g.dv};
  for (int i = 0; i < 3; ++i) {
    const double now = relative_rms(*gpu_t[i], *emu_t[i]), old = relative_rms(*gpu_t[i], *old_t[i]);
    INFO(dtype_name<T>() << " " << names[i] << ": RMS distance to the emulation " << now / unit_roundoff(precision)
                         << " u, to the CPU kernel without P / dS rounding " << old / unit_roundoff(precision) << " u");
    CHECK(now < bar);
    CHECK(old > bar);
  }
}

}  // namespace

TEST_CASE("precision: the kernels' cvt.rn and the GPU executor's input encoding are reference/precision's rounding",
          "[gpu][emulated][precision]") {
  SECTION("bf16") { check_conversions_bitwise<__nv_bfloat16>(); }
  SECTION("fp16") { check_conversions_bitwise<__half>(); }
}

TEST_CASE("precision: the inputs as the kernels read them are the simulator's rounded inputs, bit for bit",
          "[gpu][emulated][precision]") {
  // The sim rounds its float64 inputs through float (SimExecutor::prepare_inputs: round_tensor);
  // the GPU executor encodes the same floats to T (gpu/dtype.cpp, as device_copy here). Scaled to
  // reach fp16's subnormals (2^-18) and large values (2^10), as well as N(0, 1).
  AttentionDims dims;
  dims.seq = 96, dims.heads = 2, dims.kv_heads = 2, dims.dim = 64;
  for (const double factor : {1.0, 0x1p-18, 0x1p10}) {
    const AttentionInputs<float> raw = make_inputs(dims, 3, true);
    for (const Precision precision : {Precision::bf16, Precision::fp16}) {
      CAPTURE(precision_name(precision), factor);
      int64_t differ = 0, values = 0;
      for (const Tensor<float>* t : {&raw.q, &raw.k, &raw.v, &raw.dout}) {
        Tensor<double> sim = t->cast<double>();
        for (int64_t i = 0; i < sim.size(); ++i) sim[i] *= factor;
        const Tensor<double> unrounded = sim;
        round_tensor(sim, precision, "input");
        Tensor<float> scaled(t->shape());
        for (int64_t i = 0; i < scaled.size(); ++i) scaled[i] = static_cast<float>(unrounded[i]);
        for (int64_t i = 0; i < scaled.size(); ++i) {
          const uint16_t device = precision == Precision::bf16 ? host_encode_bits<__nv_bfloat16>(scaled[i])
                                                               : host_encode_bits<__half>(scaled[i]);
          const float seen =
              precision == Precision::bf16 ? reference_value<__nv_bfloat16>(device) : reference_value<__half>(device);
          differ += std::bit_cast<uint32_t>(seen) == std::bit_cast<uint32_t>(static_cast<float>(sim[i])) ? 0 : 1;
          values += sim[i] != unrounded[i] ? 1 : 0;
        }
      }
      CHECK(differ == 0);
      CHECK(values > 0);  // the rounding did something to compare
    }
  }
}

TEST_CASE("precision: on exact inputs the mma forward is the CPU kernel with P rounded, bit for bit",
          "[gpu][emulated][precision]") {
  SECTION("bf16") { check_forward_exact<__nv_bfloat16>(); }
  SECTION("fp16") { check_forward_exact<__half>(); }
}

TEST_CASE("precision: on exact inputs the mma backward is the CPU kernel with P and dS rounded, bit for bit",
          "[gpu][emulated][precision]") {
  SECTION("bf16") { check_backward_exact<__nv_bfloat16>(); }
  SECTION("fp16") { check_backward_exact<__half>(); }
}

TEST_CASE("precision: on general inputs the mma kernels are far closer to the emulation than to unrounded P, dS",
          "[gpu][emulated][precision]") {
  SECTION("bf16, D=128") { check_close_on_general_inputs<__nv_bfloat16, 128>(); }
  SECTION("fp16, D=64") { check_close_on_general_inputs<__half, 64>(); }
}

}  // namespace ringlab
