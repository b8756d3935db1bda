// Ladder rung 07 (gpu/kernels/ladder/07_one_launch.cu) with the CUDA runtime mocked and the kernels
// emulated: its launcher, as the device benchmark calls it, gives the reference's out and lse in
// one attention launch — no init_accumulator, no finalize_accumulator, no fp32 state. The rung's
// file is host code only and is compiled in here as it is.
#include <catch2/catch.hpp>

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

#include "gpu/device.hpp"
#include "gpu/kernels/ladder/07_one_launch.cu"
#include "reference/compare.hpp"
#include "reference/flash_attention.hpp"
#include "reference/inputs.hpp"
#include "tests/gpu/emulation/emulated_counts.hpp"

namespace ringlab {
namespace {

int64_t init_accumulator_launches() {
  const std::lock_guard<std::mutex> lock(gpu::emulated_init_mutex);
  int64_t total = 0;
  for (const auto& [accumulator, count] : gpu::emulated_init_accumulator_launches) total += count;
  return total;
}

gpu::DeviceBuffer upload(const Tensor<float>& t) {
  const std::vector<unsigned char> bytes = gpu::encode(t.span(), gpu::Dtype::bf16);
  gpu::DeviceBuffer b(bytes.size());
  b.upload(bytes.data(), bytes.size());
  return b;
}

}  // namespace

TEST_CASE("ladder rung 07: one launch gives the reference's out and lse, with no accumulator init or finalize",
          "[gpu][emulated][ladder]") {
  const int D = GENERATE(64, 128);
  const bool causal = GENERATE(false, true);
  gpu::ladder::Problem problem;
  problem.batch = 1, problem.seq = 200, problem.heads = 2, problem.dim = D, problem.causal = causal;  // 2 ragged tiles
  Tensor<float> q({1, 200, 2, D}), k(q.shape()), v(q.shape());
  for (int64_t i = 0; i < q.size(); ++i) {
    q[i] = gpu::round_to_dtype(gpu::Dtype::bf16, input_value(9, TensorId::q, uint64_t(i)));
    k[i] = gpu::round_to_dtype(gpu::Dtype::bf16, input_value(9, TensorId::k, uint64_t(i)));
    v[i] = gpu::round_to_dtype(gpu::Dtype::bf16, input_value(9, TensorId::v, uint64_t(i)));
  }
  const AttentionOutput<float> want = flash_attention(q, k, v, causal ? MaskKind::causal : MaskKind::none);
  const gpu::DeviceBuffer qd = upload(q), kd = upload(k), vd = upload(v);
  const gpu::ladder::Version rung{7,
                                  "07_one_launch.cu",
                                  "",
                                  gpu::Dtype::bf16,
                                  nullptr,
                                  gpu::ladder::workspace_07,
                                  gpu::ladder::launch_07,
                                  gpu::Dtype::bf16};
  gpu::DeviceBuffer out(gpu::ladder::out_bytes(rung, problem)), lse(static_cast<size_t>(2 * 200) * 4),
      workspace(rung.workspace_bytes(problem));
  // Poisoned (NaN in bf16 and fp32): an element the launch does not write fails the comparison.
  const std::vector<unsigned char> poison(out.bytes(), 0xff);
  out.upload(poison.data(), poison.size());
  lse.upload(poison.data(), lse.bytes());

  const int64_t launches = gpu::emulated_kernel_launches, inits = init_accumulator_launches(),
                finalizes = gpu::emulated_finalize_accumulator_launches, fused = gpu::emulated_fused_forward_launches,
                starting = gpu::emulated_init_forward_launches;
  rung.launch(problem, qd.get(), kd.get(), vd.get(), out.get(), lse.as<float>(), workspace.get(), nullptr);

  Tensor<float> got_out(q.shape()), got_lse({1, 2, 200});
  gpu::ladder::read_out(rung, out, got_out.data(), static_cast<size_t>(got_out.size()));
  lse.download(got_lse.data(), lse.bytes());
  const CompareResult o = compare(got_out, want.out, gpu::gpu_tolerance(gpu::Dtype::bf16, "out"));
  const CompareResult l = compare(got_lse, want.lse, gpu::gpu_tolerance(gpu::Dtype::bf16, "lse"));
  INFO("D=" << D << (causal ? " causal" : "") << ": out " << o.describe() << ", lse " << l.describe());
  CHECK(o.ok);
  CHECK(l.ok);
  // Two launches in all: the positions' iota and the attention, which both starts and finalises.
  CHECK(gpu::emulated_kernel_launches - launches == 2);
  CHECK(gpu::emulated_fused_forward_launches - fused == 1);
  CHECK(gpu::emulated_init_forward_launches - starting == 1);
  CHECK(init_accumulator_launches() == inits);
  CHECK(gpu::emulated_finalize_accumulator_launches == finalizes);
}

}  // namespace ringlab

namespace ringlab {

TEST_CASE("ladder 05 and 06's workspace: the accumulator's parts start on 256-byte boundaries at any S",
          "[gpu][emulated][ladder]") {
  for (const int S : {1, 200, 777, 1000, 4097}) {
    gpu::ladder::Problem p;
    p.batch = 2, p.seq = S, p.heads = 3, p.dim = 64;
    const size_t rows = size_t{2} * 3 * static_cast<size_t>(S);
    const gpu::ladder::AccumulatorWorkspace w = gpu::ladder::accumulator_workspace(p);
    INFO("S = " << S);
    for (const size_t offset : {w.positions, w.max, w.sum, w.out}) CHECK(offset % 256 == 0);
    // In order, none overlapping the one before, and `bytes` holds the last.
    CHECK(w.max >= w.positions + static_cast<size_t>(S) * 4);
    CHECK(w.sum >= w.max + rows * 4);
    CHECK(w.out >= w.sum + rows * 4);
    CHECK(w.bytes == w.out + rows * 64 * 4);
  }
}

TEST_CASE("tensor-core launches refuse a pointer their vector accesses cannot use, naming it", "[gpu][emulated]") {
  constexpr int S = 16, D = 64;
  // One aligned allocation carved into the block's buffers; `shift` floats moves one of them.
  alignas(256) static unsigned char memory[64 * 1024];
  auto at = [&](size_t offset) { return memory + offset; };
  const std::vector<int32_t> positions = [] {
    std::vector<int32_t> p(S);
    for (int i = 0; i < S; ++i) p[static_cast<size_t>(i)] = i;
    return p;
  }();
  gpu::AttentionParams a;
  a.q = at(0), a.k = at(4096), a.v = at(8192);  // S D bf16 = 2 KiB each
  a.q_pos = a.k_pos = positions.data();
  a.q_seq = a.kv_seq = a.q_end = a.kv_end = S;
  a.dim = D;
  const int64_t launches = gpu::emulated_kernel_launches;

  gpu::ForwardParams f;
  f.a = a;
  f.acc_max = reinterpret_cast<float*>(at(12288)), f.acc_sum = reinterpret_cast<float*>(at(12544));
  f.acc_out = reinterpret_cast<float*>(at(16384));
  gpu::init_accumulator(f.acc_max, f.acc_sum, f.acc_out, S, D, nullptr);
  CHECK_NOTHROW(gpu::forward_accumulate(gpu::Dtype::bf16, f, nullptr));  // aligned: runs
  f.acc_out += 1;                                                        // 4 bytes off
  CHECK_THROWS_WITH(gpu::forward_accumulate(gpu::Dtype::bf16, f, nullptr),
                    Catch::Contains("ForwardParams::acc_out is not 8-byte aligned"));
  f.acc_out -= 1;
  f.a.k = at(4096 + 8);  // 8 bytes off: cp.async takes 16
  CHECK_THROWS_WITH(gpu::forward_accumulate(gpu::Dtype::fp16, f, nullptr), Catch::Contains("k is not 16-byte aligned"));

  gpu::BackwardParams b;
  b.a = a;
  b.dout = at(32768);
  b.lse = reinterpret_cast<const float*>(at(36864)), b.delta = reinterpret_cast<const float*>(at(37120));
  b.dq = reinterpret_cast<float*>(at(40960)), b.dk = reinterpret_cast<float*>(at(45056));
  b.dv = reinterpret_cast<float*>(at(49152));
  CHECK_NOTHROW(gpu::backward_accumulate(gpu::Dtype::bf16, b, nullptr));
  b.dq += 2;  // 8 bytes off: red.global.add.v4 takes 16
  CHECK_THROWS_WITH(gpu::backward_accumulate(gpu::Dtype::bf16, b, nullptr),
                    Catch::Contains("BackwardParams::dq is not 16-byte aligned"));
  b.dq -= 2, b.dv += 1;
  CHECK_THROWS_WITH(gpu::backward_accumulate(gpu::Dtype::bf16, b, nullptr),
                    Catch::Contains("BackwardParams::dv is not 8-byte aligned"));
  // Refused before anything was launched: the two aligned calls (and the init) launched, no more.
  CHECK(gpu::emulated_kernel_launches - launches == 3);
}

}  // namespace ringlab
