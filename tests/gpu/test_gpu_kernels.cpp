// The production kernels on the device against the reference blockwise kernel, per precision:
// position lists, causal masks with and without tile skipping, GQA, row ranges that do not start
// at 0, two key blocks merged into one accumulator, and the backward's dq, dk, dv.
#include <catch2/catch.hpp>

#include <algorithm>
#include <vector>

#include "gpu/device.hpp"
#include "gpu/dtype.hpp"
#include "gpu/kernels/attention_kernels.hpp"
#include "gpu/kernels/ladder/ladder.hpp"
#include "reference/compare.hpp"
#include "reference/error.hpp"
#include "reference/flash_attention.hpp"
#include "reference/inputs.hpp"
#include "tests/gpu/gpu_test_support.hpp"

namespace ringlab {
namespace {

using gpu::DeviceBuffer;
using gpu::Dtype;

struct Problem {
  int B = 2, Sq = 700, Sk = 900, H = 8, HKV = 2, D = 64;
  bool causal = true, skip = true;
  RowRange q_rows{13, 700};
  std::vector<RowRange> kv_blocks{{0, 450}, {450, 890}};
};

// Positions of a zig-zag-like layout: two runs, so tiles straddle the diagonal.
std::vector<int64_t> two_runs(int count, int offset, int gap) {
  std::vector<int64_t> p;
  for (int i = 0; i < count; ++i) p.push_back(offset + i + (i >= count / 2 ? gap : 0));
  return p;
}

Tensor<float> rounded(Dtype dtype, TensorId id, const Shape& shape) {
  Tensor<float> t(shape);
  for (int64_t i = 0; i < t.size(); ++i)
    t[i] = gpu::round_to_dtype(dtype, input_value(9, id, static_cast<uint64_t>(i)));
  return t;
}

DeviceBuffer upload(const Tensor<float>& t, Dtype dtype) {
  const std::vector<unsigned char> bytes = gpu::encode(t.span(), dtype);
  DeviceBuffer b(bytes.size());
  b.upload(bytes.data(), bytes.size());
  return b;
}

DeviceBuffer upload_floats(const std::vector<float>& v) {
  DeviceBuffer b(v.size() * sizeof(float));
  b.upload(v.data(), v.size() * sizeof(float));
  return b;
}

DeviceBuffer upload_positions(const std::vector<int64_t>& p) {
  const std::vector<int32_t> ints(p.begin(), p.end());
  DeviceBuffer b(ints.size() * sizeof(int32_t));
  b.upload(ints.data(), ints.size() * sizeof(int32_t));
  return b;
}

std::vector<float> download(const DeviceBuffer& b) {
  std::vector<float> v(b.bytes() / sizeof(float));
  b.download(v.data(), b.bytes());
  return v;
}

gpu::AttentionParams params(const Problem& pr, const DeviceBuffer& q, const DeviceBuffer& k, const DeviceBuffer& v,
                            const DeviceBuffer& qp, const DeviceBuffer& kp, RowRange kv) {
  gpu::AttentionParams a;
  a.q = q.get(), a.k = k.get(), a.v = v.get();
  a.q_pos = qp.as<int32_t>(), a.k_pos = kp.as<int32_t>();
  a.batch = pr.B, a.q_seq = pr.Sq, a.kv_seq = pr.Sk, a.heads = pr.H, a.kv_heads = pr.HKV, a.dim = pr.D;
  a.q_begin = static_cast<int>(pr.q_rows.begin), a.q_end = static_cast<int>(pr.q_rows.end);
  a.kv_begin = static_cast<int>(kv.begin), a.kv_end = static_cast<int>(kv.end);
  a.causal = pr.causal, a.skip_masked_tiles = pr.skip;
  a.scale = 1.0f / std::sqrt(static_cast<float>(pr.D));
  return a;
}

// A problem's inputs rounded to dtype, on query and key positions in two runs each.
struct BlockInputs {
  std::vector<int64_t> q_pos, k_pos;
  MaskKind mask;
  Tensor<float> q, k, v, dout;
};

BlockInputs block_inputs(Dtype dtype, const Problem& pr) {
  return {two_runs(pr.Sq, 100, 400),
          two_runs(pr.Sk, 0, 300),
          pr.causal ? MaskKind::causal : MaskKind::none,
          rounded(dtype, TensorId::q, {pr.B, pr.Sq, pr.H, pr.D}),
          rounded(dtype, TensorId::k, {pr.B, pr.Sk, pr.HKV, pr.D}),
          rounded(dtype, TensorId::v, {pr.B, pr.Sk, pr.HKV, pr.D}),
          rounded(dtype, TensorId::dout, {pr.B, pr.Sq, pr.H, pr.D})};
}

// start: the query rows' state holds garbage (no init_accumulator) and the first block's launch
// starts them itself (ForwardParams::init, forward_fa2_init_kernel; bf16 / fp16 only).
void check_forward(Dtype dtype, const Problem& pr, bool start = false) {
  const BlockInputs x = block_inputs(dtype, pr);
  const std::vector<int64_t>&q_pos = x.q_pos, &k_pos = x.k_pos;
  const MaskKind mask = x.mask;
  const Tensor<float>&q = x.q, &k = x.k, &v = x.v;
  SoftmaxState<float> want = make_accumulator(pr.B, pr.H, pr.Sq, pr.D);
  for (RowRange kv : pr.kv_blocks)
    flash_forward_accumulate(q, k, v, q_pos, k_pos, pr.q_rows, kv, mask, want, {0, pr.skip});

  SoftmaxState<float> got = make_accumulator(pr.B, pr.H, pr.Sq, pr.D);
  if (start) {
    for (int64_t bh = 0; bh < int64_t{pr.B} * pr.H; ++bh) {
      for (int64_t i = pr.q_rows.begin; i < pr.q_rows.end; ++i) {
        const auto row = static_cast<size_t>(bh * pr.Sq + i);
        got.max[row] = 2.f, got.sum[row] = 50.f;
        std::fill_n(got.out.begin() + static_cast<int64_t>(row) * pr.D, pr.D, 100.f);
      }
    }
  }
  const DeviceBuffer qd = upload(q, dtype), kd = upload(k, dtype), vd = upload(v, dtype);
  const DeviceBuffer qp = upload_positions(q_pos), kp = upload_positions(k_pos);
  DeviceBuffer m = upload_floats(got.max), l = upload_floats(got.sum), o = upload_floats(got.out);
  for (size_t i = 0; i < pr.kv_blocks.size(); ++i) {
    gpu::ForwardParams p;
    p.a = params(pr, qd, kd, vd, qp, kp, pr.kv_blocks[i]);
    p.acc_max = m.as<float>(), p.acc_sum = l.as<float>(), p.acc_out = o.as<float>();
    p.init = start && i == 0;  // the first block starts the rows; the later ones merge into it
    gpu::forward_accumulate(dtype, p, nullptr);
  }
  RINGLAB_CUDA_CHECK(cudaDeviceSynchronize());
  got.max = download(m), got.sum = download(l), got.out = download(o);
  const AttentionOutput<float> a = finalize_accumulator(got, pr.B, pr.H, pr.Sq, pr.D);
  const AttentionOutput<float> b = finalize_accumulator(want, pr.B, pr.H, pr.Sq, pr.D);
  const CompareResult out = compare(a.out, b.out, gpu::gpu_tolerance(dtype, "out"));
  const CompareResult lse = compare(a.lse, b.lse, gpu::gpu_tolerance(dtype, "lse"));
  INFO(gpu::dtype_name(dtype) << " D=" << pr.D << (start ? " (fused init)" : "") << " out: " << out.describe()
                              << " (max abs " << out.max_abs_error << "), lse: " << lse.describe());
  CHECK(out.ok);
  CHECK(lse.ok);
}

void check_backward(Dtype dtype, const Problem& pr) {
  const BlockInputs x = block_inputs(dtype, pr);
  const std::vector<int64_t>&q_pos = x.q_pos, &k_pos = x.k_pos;
  const MaskKind mask = x.mask;
  const Tensor<float>&q = x.q, &k = x.k, &v = x.v, &dout = x.dout;
  const AttentionOutput<float> forward = flash_attention(q, k, v, mask, q_pos, k_pos);
  const Tensor<float> delta = softmax_delta(dout, forward.out);
  AttentionGrads<float> want{Tensor<float>(q.shape()), Tensor<float>(k.shape()), Tensor<float>(k.shape())};
  for (RowRange kv : pr.kv_blocks) {
    flash_backward_accumulate(q, k, v, dout, forward.lse, delta, q_pos, k_pos, pr.q_rows, kv, mask, want.dq, want.dk,
                              want.dv, {0, pr.skip});
  }
  const DeviceBuffer qd = upload(q, dtype), kd = upload(k, dtype), vd = upload(v, dtype), dod = upload(dout, dtype);
  const DeviceBuffer qp = upload_positions(q_pos), kp = upload_positions(k_pos);
  const DeviceBuffer lse = upload_floats(forward.lse.storage()), dl = upload_floats(delta.storage());
  DeviceBuffer dq = upload_floats(std::vector<float>(static_cast<size_t>(q.size()), 0.f));
  DeviceBuffer dk = upload_floats(std::vector<float>(static_cast<size_t>(k.size()), 0.f));
  DeviceBuffer dv = upload_floats(std::vector<float>(static_cast<size_t>(k.size()), 0.f));
  for (RowRange kv : pr.kv_blocks) {
    gpu::BackwardParams p;
    p.a = params(pr, qd, kd, vd, qp, kp, kv);
    p.dout = dod.get(), p.lse = lse.as<float>(), p.delta = dl.as<float>();
    p.dq = dq.as<float>(), p.dk = dk.as<float>(), p.dv = dv.as<float>();
    gpu::backward_accumulate(dtype, p, nullptr);
  }
  RINGLAB_CUDA_CHECK(cudaDeviceSynchronize());
  const Tensor<float> got[] = {Tensor<float>(q.shape(), download(dq)), Tensor<float>(k.shape(), download(dk)),
                               Tensor<float>(k.shape(), download(dv))};
  const Tensor<float>* wants[] = {&want.dq, &want.dk, &want.dv};
  const char* names[] = {"dq", "dk", "dv"};
  for (int i = 0; i < 3; ++i) {
    const CompareResult r = compare(got[i], *wants[i], gpu::gpu_tolerance(dtype, names[i]));
    INFO(gpu::dtype_name(dtype) << " D=" << pr.D << " " << names[i] << ": " << r.describe() << " (max abs "
                                << r.max_abs_error << ")");
    CHECK(r.ok);
  }
}

}  // namespace

TEST_CASE("gpu kernels: forward and backward vs the reference kernel, every precision and D", "[gpu][kernels]") {
  RINGLAB_REQUIRE_GPU();
  const Dtype dtype = GENERATE(Dtype::bf16, Dtype::fp16, Dtype::fp32);
  const int D = GENERATE(64, 128);
  const bool causal = GENERATE(false, true);
  Problem pr;
  pr.D = D;
  pr.causal = causal;
  check_forward(dtype, pr);
  if (dtype != Dtype::fp32) check_forward(dtype, pr, true);
  check_backward(dtype, pr);
}

TEST_CASE("gpu kernels: forward computes masked tiles when skipping is off", "[gpu][kernels]") {
  RINGLAB_REQUIRE_GPU();
  Problem pr;
  pr.skip = false;
  check_forward(Dtype::bf16, pr);
  check_forward(Dtype::fp32, pr);
}

TEST_CASE("gpu kernels: fp32 path for any D up to 128", "[gpu][kernels]") {
  RINGLAB_REQUIRE_GPU();
  Problem pr;
  pr.D = 40;
  check_forward(Dtype::fp32, pr);
  check_backward(Dtype::fp32, pr);
}

TEST_CASE("gpu kernels: unsupported sizes are refused with the fix", "[gpu][kernels]") {
  // No device needed: the check is host-side.
  CHECK(gpu::kernel_support(Dtype::bf16, 64).empty());
  CHECK(gpu::kernel_support(Dtype::fp16, 128).empty());
  CHECK(gpu::kernel_support(Dtype::fp32, 40).empty());
  CHECK_THAT(gpu::kernel_support(Dtype::bf16, 96), Catch::Contains("--dtype fp32"));
  CHECK_THAT(gpu::kernel_support(Dtype::fp32, 256), Catch::Contains("D from 1 to 128"));
  // B x H rows of blocks beyond CUDA's 65535 in grid y: refused before anything is launched.
  gpu::ForwardParams forward;
  forward.a.batch = 2, forward.a.heads = 32768, forward.a.kv_heads = 1;
  forward.a.q_seq = forward.a.kv_seq = 64, forward.a.q_end = forward.a.kv_end = 64;
  // The fused init is the tensor-core kernel's: fp32 refuses it, before anything is launched.
  gpu::ForwardParams starting;
  starting.a.q_seq = starting.a.kv_seq = 64, starting.a.q_end = starting.a.kv_end = 64;
  starting.init = true;
  CHECK_THROWS_WITH(gpu::forward_accumulate(Dtype::fp32, starting, nullptr),
                    Catch::Contains("fused init") && Catch::Contains("init_accumulator"));
  for (const Dtype dtype : {Dtype::bf16, Dtype::fp32}) {
    try {
      gpu::forward_accumulate(dtype, forward, nullptr);
      FAIL("no error for B x H = 65536");
    } catch (const UsageError& e) {
      CHECK_THAT(e.what(), Catch::Contains("B x H = 65536") && Catch::Contains("65535") &&
                               Catch::Contains("smaller --batch or fewer --heads"));
    }
  }
  gpu::BackwardParams backward;
  backward.a = forward.a;
  CHECK_THROWS_AS(gpu::backward_accumulate(Dtype::fp16, backward, nullptr), UsageError);
  // The ladder's versions say they do not support it (their tests and benchmark skip it).
  gpu::ladder::Problem wide;
  wide.batch = 1, wide.heads = 65536, wide.seq = 64, wide.dim = 64;
  for (const gpu::ladder::Version& version : gpu::ladder::versions()) CHECK_FALSE(version.supports(wide));
}

}  // namespace ringlab
