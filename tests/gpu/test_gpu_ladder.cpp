// Every version of the teaching ladder on the device against the reference kernel — the check
// that precedes any timing of it (bench/gpu/bench_gpu_ladder does the same before it times).
#include <catch2/catch.hpp>

#include "gpu/device.hpp"
#include "gpu/kernels/ladder/ladder.hpp"
#include "reference/compare.hpp"
#include "reference/flash_attention.hpp"
#include "reference/inputs.hpp"
#include "tests/gpu/gpu_test_support.hpp"

namespace ringlab {

TEST_CASE("gpu ladder: every version matches the reference", "[gpu][ladder]") {
  RINGLAB_REQUIRE_GPU();
  const int D = GENERATE(64, 128);
  const bool causal = GENERATE(false, true);
  for (const gpu::ladder::Version& version : gpu::ladder::versions()) {
    gpu::ladder::Problem pr;
    // An odd S: the accumulator's parts in 05 and 06's workspace follow S int32 positions, and the
    // kernels read them in 8-byte pairs (accumulator_workspace keeps them aligned; packed end to
    // end at S = 777 the device stopped with a misaligned address).
    pr.batch = 2, pr.seq = 777, pr.heads = 3, pr.dim = D, pr.causal = causal;
    if (!version.supports(pr)) continue;
    Tensor<float> q({pr.batch, pr.seq, pr.heads, D}), k(q.shape()), v(q.shape());
    for (int64_t i = 0; i < q.size(); ++i) {
      q[i] = gpu::round_to_dtype(version.dtype, input_value(2, TensorId::q, static_cast<uint64_t>(i)));
      k[i] = gpu::round_to_dtype(version.dtype, input_value(2, TensorId::k, static_cast<uint64_t>(i)));
      v[i] = gpu::round_to_dtype(version.dtype, input_value(2, TensorId::v, static_cast<uint64_t>(i)));
    }
    const AttentionOutput<float> want = flash_attention(q, k, v, causal ? MaskKind::causal : MaskKind::none);
    auto upload = [&](const Tensor<float>& t) {
      const std::vector<unsigned char> bytes = gpu::encode(t.span(), version.dtype);
      gpu::DeviceBuffer b(bytes.size());
      b.upload(bytes.data(), bytes.size());
      return b;
    };
    const gpu::DeviceBuffer qd = upload(q), kd = upload(k), vd = upload(v);
    gpu::DeviceBuffer out(gpu::ladder::out_bytes(version, pr)),
        lse(static_cast<size_t>(pr.batch * pr.heads * pr.seq) * 4);
    gpu::DeviceBuffer workspace(version.workspace_bytes(pr));
    version.launch(pr, qd.get(), kd.get(), vd.get(), out.get(), lse.as<float>(), workspace.get(), nullptr);
    RINGLAB_CUDA_CHECK(cudaDeviceSynchronize());
    AttentionOutput<float> got{Tensor<float>(q.shape()), Tensor<float>(want.lse.shape())};
    gpu::ladder::read_out(version, out, got.out.data(), static_cast<size_t>(got.out.size()));
    lse.download(got.lse.data(), lse.bytes());
    const CompareResult o = compare(got.out, want.out, gpu::gpu_tolerance(version.dtype, "out"));
    const CompareResult l = compare(got.lse, want.lse, gpu::gpu_tolerance(version.dtype, "lse"));
    INFO(version.file << " D=" << D << (causal ? " causal" : "") << ": out " << o.describe() << ", lse "
                      << l.describe());
    CHECK(o.ok);
    CHECK(l.ok);
  }
}

}  // namespace ringlab
