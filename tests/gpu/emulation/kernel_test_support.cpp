// The emulated kernel tests' shared harness (kernel_test_support.hpp): the one place the kernels
// are instantiated for the tests.
#include "tests/gpu/emulation/kernel_test_support.hpp"  // first: the warp emulator stands in for nvcc

#include <algorithm>

#include "gpu/kernels/backward_fp32.cuh"
#include "gpu/kernels/backward_mma.cuh"
#include "gpu/kernels/forward_fp32.cuh"
#include "gpu/kernels/ladder/forward_mma.cuh"
#include "reference/exact_attention.hpp"

namespace ringlab::kernel_test {

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

AttentionParams params_of(const BlockProblem& pr, const void* q, const void* k, const void* v, const int32_t* q_pos,
                          const int32_t* k_pos, const gpu::KernelMask& km, RowRange kv) {
  return {.q = q,
          .k = k,
          .v = v,
          .q_pos = q_pos,
          .k_pos = k_pos,
          .batch = pr.B,
          .q_seq = pr.Sq,
          .kv_seq = pr.Sk,
          .heads = pr.H,
          .kv_heads = pr.HKV,
          .dim = pr.D,
          .q_begin = static_cast<int>(pr.q_rows.begin),
          .q_end = static_cast<int>(pr.q_rows.end),
          .kv_begin = static_cast<int>(kv.begin),
          .kv_end = static_cast<int>(kv.end),
          .q_doc_first = km.doc_first.empty() ? nullptr : km.doc_first.data(),
          .q_doc_last = km.doc_last.empty() ? nullptr : km.doc_last.data(),
          .causal = km.causal,
          .window = km.window,
          .skip_masked_tiles = pr.skip,
          .scale = 1.0f / std::sqrt(static_cast<float>(pr.D))};
}

namespace {

emu::Dim3 grid_of(int tiles, const BlockProblem& pr) {
  return {static_cast<unsigned>(tiles), static_cast<unsigned>(pr.B * pr.H), 1};
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
void add_forward_exact(const BlockProblem& pr, const Tensor<float>& q, const Tensor<float>& k, const Tensor<float>& v,
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
AttentionGrads<double> exact_block_grads(const BlockProblem& pr, const Tensor<float>& q, const Tensor<float>& k,
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

}  // namespace

template <class T, int D, Forward kKernel, int kChunkTiles>
void launch_forward(const ForwardParams& p, const BlockProblem& pr) {
  if constexpr (std::is_same_v<T, float>) {
    emu::launch(
        grid_of(gpu::ForwardFp32Tiles::q_tiles(p.a), pr), 128, gpu::ForwardFp32Tiles::smem_bytes(pr.D),
        [&] { gpu::forward_fp32_kernel(p); }, "forward_fp32");
  } else if constexpr (kKernel == Forward::fa2) {
    using Tiles = gpu::ForwardFa2Tiles<D>;
    const std::string name =
        std::string(p.init ? "forward_fa2_init<" : "forward_fa2<") + dtype_name<T>() + ", " + std::to_string(D) + ">";
    const gpu::ForwardLaunch launch = gpu::forward_launch(p, Tiles::q_tiles(p.a), pr.order_section_bytes);
    const gpu::LaunchGrid& grid = launch.grid;
    emu::launch(
        {static_cast<unsigned>(grid.x), static_cast<unsigned>(grid.y), static_cast<unsigned>(grid.z)}, Tiles::kThreads,
        Tiles::smem_bytes(kChunkTiles),
        [&] {
          if (p.init) {
            gpu::forward_fa2_init_kernel<T, D, kChunkTiles>(launch.params);
          } else {
            gpu::forward_fa2_kernel<T, D, kChunkTiles>(launch.params);
          }
        },
        name.c_str());
  } else {
    using Tiles = gpu::ForwardMmaTiles<D>;
    const std::string name = "forward_mma<" + dtype_name<T>() + ", " + std::to_string(D) + ">";
    emu::launch(
        grid_of(Tiles::q_tiles(p.a), pr), 128, Tiles::kSmemBytes, [&] { gpu::forward_mma_kernel<T, D>(p); },
        name.c_str());
  }
}

template <class T, int D>
void launch_backward(const BackwardParams& p, const BlockProblem& pr) {
  // As both backward launchers do first (attention_kernels' backward_accumulate, nvcc and emulated).
  if (const std::string why = gpu::store_dkv_problem(std::is_same_v<T, float>, p); !why.empty()) throw UsageError(why);
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

// Forward: the kernel's accumulator after all kv blocks vs the reference kernel's.
template <class T, int D, Forward kKernel, int kChunkTiles>
Verdict run_forward(Kind kind, BlockProblem pr, Tolerance out_tol, Tolerance lse_tol) {
  pr.D = D == 0 ? pr.D : D;
  const Mask mask = pr.mask();
  const Tensor<float> q = rounded_input(kind, TensorId::q, {pr.B, pr.Sq, pr.H, pr.D}, 11);
  const Tensor<float> k = rounded_input(kind, TensorId::k, {pr.B, pr.Sk, pr.HKV, pr.D}, 11);
  const Tensor<float> v = rounded_input(kind, TensorId::v, {pr.B, pr.Sk, pr.HKV, pr.D}, 11);
  SoftmaxState<float> expected = make_accumulator(pr.B, pr.H, pr.Sq, pr.D);
  for (RowRange kv : pr.kv_blocks)
    flash_forward_accumulate(q, k, v, pr.q_pos, pr.k_pos, pr.q_rows, kv, mask, expected, {1, pr.skip});

  const DeviceInputs<T> device = device_inputs<T>(pr, q, k, v);
  SoftmaxState<float> actual = make_accumulator(pr.B, pr.H, pr.Sq, pr.D);
  // The fused finalize writes only its rows: the rest keep finalize's values for an empty row. It
  // stores out in T (fused_out, widened below) and lse in fp32.
  AttentionOutput<float> fused{Tensor<float>({pr.B, pr.Sq, pr.H, pr.D}), Tensor<float>({pr.B, pr.H, pr.Sq})};
  for (int64_t i = 0; i < fused.lse.size(); ++i) fused.lse[i] = -INFINITY;
  std::vector<T> fused_out = device_copy<T>(fused.out);
  REQUIRE((!pr.fused_finalize || (kKernel == Forward::fa2 && !std::is_same_v<T, float>)));
  REQUIRE((!pr.fused_init || (kKernel == Forward::fa2 && !std::is_same_v<T, float>)));
  if (pr.fused_init || pr.init_withheld) {  // the query rows' state as no init_accumulator left it
    for (int64_t bh = 0; bh < int64_t{pr.B} * pr.H; ++bh) {
      for (int64_t i = pr.q_rows.begin; i < pr.q_rows.end; ++i) {
        const auto row = static_cast<size_t>(bh * pr.Sq + i);
        actual.max[row] = 2.f, actual.sum[row] = 50.f;
        std::fill_n(actual.out.begin() + static_cast<int64_t>(row) * pr.D, pr.D, 100.f);
      }
    }
  }
  for (const RowRange& kv : pr.kv_blocks) {
    ForwardParams p = forward_params(pr, device, kv, actual);
    p.init = pr.fused_init && &kv == &pr.kv_blocks.front();
    if (pr.fused_finalize && &kv == &pr.kv_blocks.back()) {
      p.out = fused_out.data();
      p.lse = fused.lse.data();
    }
    launch_forward<T, D, kKernel, kChunkTiles>(p, pr);
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

// Backward: dq, dk, dv of one block (lse and delta of the whole forward) vs the reference kernel.
template <class T, int D>
Verdict run_backward(Kind kind, BlockProblem pr, Tolerance tol) {
  pr.D = D == 0 ? pr.D : D;
  const Mask mask = pr.mask();
  const Tensor<float> q = rounded_input(kind, TensorId::q, {pr.B, pr.Sq, pr.H, pr.D}, 5);
  const Tensor<float> k = rounded_input(kind, TensorId::k, {pr.B, pr.Sk, pr.HKV, pr.D}, 5);
  const Tensor<float> v = rounded_input(kind, TensorId::v, {pr.B, pr.Sk, pr.HKV, pr.D}, 5);
  const Tensor<float> dout = rounded_input(kind, TensorId::dout, {pr.B, pr.Sq, pr.H, pr.D}, 5);
  const AttentionOutput<float> forward = flash_attention(q, k, v, mask, pr.q_pos, pr.k_pos);
  const Tensor<float> delta = softmax_delta(dout, forward.out);
  AttentionGrads<float> want{Tensor<float>(q.shape()), Tensor<float>(k.shape()), Tensor<float>(k.shape())};
  AttentionGrads<float> got{Tensor<float>(q.shape()), Tensor<float>(k.shape()), Tensor<float>(k.shape())};
  const DeviceInputs<T> device = device_inputs<T>(pr, q, k, v, &dout);
  if (pr.store_dkv || pr.store_withheld) {  // garbage where the launches write: their key rows
    for (RowRange kv : pr.kv_blocks) {
      for (int b = 0; b < pr.B; ++b) {
        for (int64_t row = kv.begin; row < kv.end; ++row) {
          for (int64_t e = 0; e < int64_t{pr.HKV} * pr.D; ++e) {
            const size_t at = static_cast<size_t>((int64_t{b} * pr.Sk + row) * pr.HKV * pr.D + e);
            got.dk.data()[at] = 1e3f + static_cast<float>(e % 7);
            got.dv.data()[at] = -2e3f - static_cast<float>(row % 5);
          }
        }
      }
    }
  }
  for (RowRange kv : pr.kv_blocks) {
    flash_backward_accumulate(q, k, v, dout, forward.lse, delta, pr.q_pos, pr.k_pos, pr.q_rows, kv, mask, want.dq,
                              want.dk, want.dv, {1, pr.skip});
    launch_backward<T, D>(backward_params(pr, device, kv, forward.lse.data(), delta.data(), got), pr);
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

BlockProblem causal_problem() {
  BlockProblem pr;
  pr.q_pos = positions(pr.Sq, 60, 0);
  pr.k_pos = positions(pr.Sk, 50, 10);
  return pr;
}

BlockProblem masked_problem(const MaskCase& c) {
  BlockProblem pr;
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

BlockProblem one_block(int q_rows, int k_rows, int dim) {
  BlockProblem pr;
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

BlockProblem causal_chunks(int dim) {
  BlockProblem pr = one_block(128, 384, dim);
  pr.H = 4;
  pr.HKV = 2;
  pr.causal = true;
  pr.q_pos.clear();
  for (int i = 0; i < 128; ++i) pr.q_pos.push_back(128 + i);
  return pr;
}

// Every kernel the tests run, instantiated here once.
#define RINGLAB_FORWARD(T, D, K, C)                                                    \
  template void launch_forward<T, D, K, C>(const ForwardParams&, const BlockProblem&); \
  template Verdict run_forward<T, D, K, C>(Kind, BlockProblem, Tolerance, Tolerance);
#define RINGLAB_FA2(T, D) RINGLAB_FORWARD(T, D, Forward::fa2, gpu::ForwardFa2Tiles<D>::kChunkTiles)
RINGLAB_FA2(__nv_bfloat16, 64)
RINGLAB_FA2(__nv_bfloat16, 128)
RINGLAB_FA2(__half, 64)
RINGLAB_FA2(__half, 128)
RINGLAB_FA2(float, 0)
RINGLAB_FORWARD(__nv_bfloat16, 64, Forward::fa2, 1)
RINGLAB_FORWARD(__nv_bfloat16, 64, Forward::fa2, 2)
RINGLAB_FORWARD(__half, 128, Forward::fa2, 2)
RINGLAB_FORWARD(__nv_bfloat16, 64, Forward::rows64, gpu::ForwardFa2Tiles<64>::kChunkTiles)
RINGLAB_FORWARD(__half, 128, Forward::rows64, gpu::ForwardFa2Tiles<128>::kChunkTiles)
#undef RINGLAB_FA2
#undef RINGLAB_FORWARD
#define RINGLAB_BACKWARD(T, D)                                                     \
  template void launch_backward<T, D>(const BackwardParams&, const BlockProblem&); \
  template Verdict run_backward<T, D>(Kind, BlockProblem, Tolerance);
RINGLAB_BACKWARD(__nv_bfloat16, 64)
RINGLAB_BACKWARD(__nv_bfloat16, 128)
RINGLAB_BACKWARD(__half, 64)
RINGLAB_BACKWARD(__half, 128)
RINGLAB_BACKWARD(float, 0)
#undef RINGLAB_BACKWARD

}  // namespace ringlab::kernel_test
