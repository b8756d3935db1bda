// What the emulated kernel tests share (test_kernels_correctness.cpp, test_kernels_barriers.cpp,
// test_kernels_precision.cpp, and rung 05's in test_ladder_emulated.cpp): block problems, device
// copies of their inputs, the kernels' parameters and launches under the warp emulator, and one
// kernel run checked against the reference kernel and float64.
//
// The kernels are instantiated once, in kernel_test_support.cpp (run_forward, run_backward and the
// launches are explicitly instantiated there for the types and head dimensions the tests use), so
// that each test file compiles only its own checks.
#pragma once

#include "gpu/emulation/warp_emulator.hpp"  // first: it stands in for nvcc

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "gpu/kernels/forward_fa2.cuh"
#include "gpu/kernels/kernel_mask.hpp"
#include "gpu/kernels/kernel_params.hpp"
#include "reference/compare.hpp"
#include "reference/flash_attention.hpp"
#include "reference/inputs.hpp"
#include "reference/layout.hpp"

namespace ringlab::kernel_test {

using gpu::AttentionParams;
using gpu::BackwardParams;
using gpu::ForwardParams;

enum class Kind { bf16, fp16, fp32 };

inline float round_to(Kind kind, float x) {
  if (kind == Kind::bf16) return __bfloat162float(__float2bfloat16(x));
  if (kind == Kind::fp16) return __half2float(__float2half(x));
  return x;
}

// A block problem: shapes, positions, row ranges, mask (reference/mask.hpp: causal, a window W,
// packed document lengths, and valid > 0: positions from valid on are padding).
struct BlockProblem {
  int B = 1, Sq = 80, Sk = 100, H = 4, HKV = 2, D = 64;
  bool causal = true, skip = true;
  int64_t window = 0, valid = 0;
  std::vector<int64_t> documents;
  RowRange q_rows{5, 80};
  std::vector<RowRange> kv_blocks{{3, 45}, {45, 97}};  // merged in this order
  std::vector<int64_t> q_pos, k_pos;
  bool expect_empty_rows = false;  // some query row sees no key of the blocks (checked to happen)
  bool fused_finalize = false;     // forward: the last block's launch writes out and lse itself
  // forward: the query rows' state starts as garbage (what init_accumulator would have cleared),
  // and the first block's launch starts it itself (ForwardParams::init) ...
  bool fused_init = false;
  // ... or, a negative control, is not told to: the garbage must show in the results.
  bool init_withheld = false;
  // backward (tensor-core, H = HKV, kv blocks apart): dk and dv start as garbage in the blocks'
  // key rows (what zeroing them would have cleared), and each block's launch stores its rows
  // itself (BackwardParams::store_dkv) ...
  bool store_dkv = false;
  // ... or, a negative control, adds into the garbage: it must show in the results.
  bool store_withheld = false;
  // forward (tensor-core): order_section's budget for the heaviest-first block order (causal); a
  // small one makes sections of a few heads, as long sequences do on a GPU.
  int64_t order_section_bytes = gpu::kOrderSectionBytes;
  Mask mask() const { return Mask(causal, window, documents, valid); }
};

// Zig-zag-like positions: rows are not one contiguous run, so tiles straddle the diagonal.
std::vector<int64_t> positions(int count, int stride, int offset);

// The generated input `id`, rounded to `kind` (so that the device copy holds exactly these values).
Tensor<float> rounded_input(Kind kind, TensorId id, const Shape& shape, uint64_t seed);

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

template <class T>
std::string dtype_name() {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) return "bf16";
  if constexpr (std::is_same_v<T, __half>) return "fp16";
  return "fp32";
}

// What the kernels read of a problem: q, k, v (and dout) in T, the positions in int32, the mask's
// per-row document bounds.
template <class T>
struct DeviceInputs {
  std::vector<T> q, k, v, dout;
  std::vector<int32_t> q_pos, k_pos;
  gpu::KernelMask mask;
};

template <class T>
DeviceInputs<T> device_inputs(const BlockProblem& pr, const Tensor<float>& q, const Tensor<float>& k,
                              const Tensor<float>& v, const Tensor<float>* dout = nullptr) {
  DeviceInputs<T> d{device_copy<T>(q),
                    device_copy<T>(k),
                    device_copy<T>(v),
                    {},
                    {pr.q_pos.begin(), pr.q_pos.end()},
                    {pr.k_pos.begin(), pr.k_pos.end()},
                    gpu::kernel_mask(pr.mask(), pr.q_pos)};
  if (dout) d.dout = device_copy<T>(*dout);
  return d;
}

// The block (q_rows x kv) of a problem as the kernels' AttentionParams.
AttentionParams params_of(const BlockProblem& pr, const void* q, const void* k, const void* v, const int32_t* q_pos,
                          const int32_t* k_pos, const gpu::KernelMask& km, RowRange kv);

// The forward of block kv, merged into `acc`.
template <class T>
ForwardParams forward_params(const BlockProblem& pr, const DeviceInputs<T>& d, RowRange kv, SoftmaxState<float>& acc) {
  ForwardParams p;
  p.a = params_of(pr, d.q.data(), d.k.data(), d.v.data(), d.q_pos.data(), d.k_pos.data(), d.mask, kv);
  p.acc_max = acc.max.data();
  p.acc_sum = acc.sum.data();
  p.acc_out = acc.out.data();
  return p;
}

// The backward of block kv with the forward's lse and delta, added into `grads`.
template <class T>
BackwardParams backward_params(const BlockProblem& pr, const DeviceInputs<T>& d, RowRange kv, const float* lse,
                               const float* delta, AttentionGrads<float>& grads) {
  BackwardParams p;
  p.a = params_of(pr, d.q.data(), d.k.data(), d.v.data(), d.q_pos.data(), d.k_pos.data(), d.mask, kv);
  p.dout = d.dout.data();
  p.lse = lse;
  p.delta = delta;
  p.dq = grads.dq.data();
  p.dk = grads.dk.data();
  p.dv = grads.dv.data();
  p.store_dkv = pr.store_dkv;
  return p;
}

// The tensor-core forward kernels: the production one (forward_fa2.cuh, 128-row query tiles; its
// key-tile kinds classified kChunkTiles at a time) and ladder rung 05 (forward_mma.cuh, 64-row tiles).
enum class Forward { fa2, rows64 };

// One launch under the emulator, with the nvcc launchers' grids (T = float: the fp32 kernels).
template <class T, int D, Forward kKernel = Forward::fa2, int kChunkTiles = gpu::ForwardFa2Tiles<D>::kChunkTiles>
void launch_forward(const ForwardParams& p, const BlockProblem& pr);
template <class T, int D>
void launch_backward(const BackwardParams& p, const BlockProblem& pr);

// The comparisons of one kernel run: ok, and what each compared tensor's error was.
struct Verdict {
  bool ok = true;
  std::string describe;
  void add(const char* name, const CompareResult& r) {
    ok = ok && r.ok;
    describe += std::string(name) + ": " + r.describe() + " (max abs " + std::to_string(r.max_abs_error) + "); ";
  }
};

// Forward: the kernel's accumulator after all kv blocks vs the reference kernel's and float64
// (D = 0: the problem's own D, for the fp32 kernel).
template <class T, int D, Forward kKernel = Forward::fa2, int kChunkTiles = gpu::ForwardFa2Tiles<D>::kChunkTiles>
Verdict run_forward(Kind kind, BlockProblem pr, Tolerance out_tol, Tolerance lse_tol);

template <class T, int D, Forward kKernel = Forward::fa2, int kChunkTiles = gpu::ForwardFa2Tiles<D>::kChunkTiles>
void check_forward(Kind kind, const BlockProblem& pr, Tolerance out_tol, Tolerance lse_tol) {
  const Verdict verdict = run_forward<T, D, kKernel, kChunkTiles>(kind, pr, out_tol, lse_tol);
  INFO(verdict.describe);
  CHECK(verdict.ok);
}

// Backward: dq, dk, dv of the blocks (lse and delta of the whole forward) vs the reference kernel
// and float64.
template <class T, int D>
Verdict run_backward(Kind kind, BlockProblem pr, Tolerance tol);

template <class T, int D>
void check_backward(Kind kind, const BlockProblem& pr, Tolerance tol) {
  const Verdict verdict = run_backward<T, D>(kind, pr, tol);
  INFO(verdict.describe);
  CHECK(verdict.ok);
}

// Causal positions, GQA, ragged row ranges, two merged kv blocks.
BlockProblem causal_problem();

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

inline const MaskCase kMaskCases[] = {
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

BlockProblem masked_problem(const MaskCase& c);

// The smallest problems that pass every barrier site of a kernel at least twice: one block, three
// tiles of the streamed operand (so a prefetch overwrites a stage that was read before), no mask.
BlockProblem one_block(int q_rows, int k_rows, int dim);

// A causal block whose queries (positions 128..255) see key tiles 0-1 whole, 2-3 cut by the
// diagonal and 4-5 not at all (test_kernels_barriers.cpp: forward_fa2's barrier 3). Four heads.
BlockProblem causal_chunks(int dim);

// Loose enough for P (and dS) rounded to 8 (bf16) or 11 (fp16) mantissa bits; a wrong tile, mask
// or fragment is O(1) off.
inline const Tolerance kBf16Out{1e-2, 2e-2}, kBf16Lse{1e-3, 1e-3}, kBf16Grad{3e-2, 3e-2};
inline const Tolerance kFp16Out{3e-3, 5e-3}, kFp16Lse{1e-3, 1e-3}, kFp16Grad{1e-2, 1e-2};
inline const Tolerance kFp32Out{2e-5, 1e-4}, kFp32Lse{2e-5, 1e-5}, kFp32Grad{1e-4, 1e-3};

// ---- every barrier deleted in turn ----------------------------------------------------------------

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

// Site 0 (nothing deleted) must be harmless; each site then must give what it expects.
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

}  // namespace ringlab::kernel_test
