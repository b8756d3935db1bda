// Kernel throughput of the production kernels: TFLOP/s forward and backward, D = 64 and 128,
// S from 1K to 16K, causal and not — each configuration first checked against the CPU reference
// (on a reduced shape with the same D, mask and dtype), then timed with CUDA events.
//
// Shapes follow the FlashAttention benchmarks: batch x S = 16K tokens, heads x D = 2048.
// Forward, bf16 / fp16: one launch that starts its rows from the empty state and finalises them
// (the fused init and finalize, ForwardParams::init / out / lse) — how the executors run a rank's
// only block, and what PyTorch's SDPA does. Timed beside it in the same run, the staged forward:
// accumulator init + attention + finalize, three launches and the fp32 state's round trip, the path
// of a ring step that merges into earlier steps (fp32 has only this one). Under the causal mask the
// fused forward also runs in the plain grid, its blocks in launch order rather than heaviest tiles
// first (ForwardParams::plain_order; kernel_params.hpp, the forward's block order), timed beside
// it: what the block order gains. Backward = zeroing dq + delta + attention backward storing dk
// and dv (bf16 / fp16; fp32 zeroes them too and adds). Output: one fixed-width table (and --csv FILE with the
// same rows), which bench/gpu/sdpa_compare.py puts side by side with PyTorch's SDPA on the same GPU.
#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <tuple>
#include <vector>

#include "bench/gpu/bench_gpu_common.hpp"
#include "gpu/dtype.hpp"
#include "gpu/kernels/attention_kernels.hpp"
#include "reference/compare.hpp"
#include "reference/flash_attention.hpp"
#include "reference/inputs.hpp"

namespace ringlab {
namespace {

using gpu::DeviceBuffer;
using gpu::Dtype;

struct Problem {
  int B, S, H, D;
  bool causal;
};

struct Buffers {
  DeviceBuffer q, k, v, dout, positions, acc_max, acc_sum, acc_out, out, lse, delta, dq, dk, dv;
};

// Element i of a tensor is input_value(7, id, i) whatever the shape, and every configuration of the
// table has the same element count (B S = tokens, H D = hidden), so the encoded values are made
// once per (count, dtype, tensor) and uploaded for each configuration. Made anew for each, they
// cost 1.2 s per tensor on one core of a developer machine, four tensors per configuration and 24
// configurations in the bf16 table: about as long as that table's whole stage took in the H100
// bundle run of 2026-11-27 (118 s).
const std::vector<unsigned char>& encoded_values(int64_t count, Dtype dtype, TensorId id) {
  static std::map<std::tuple<int64_t, Dtype, TensorId>, std::vector<unsigned char>> made;
  std::vector<unsigned char>& bytes = made[{count, dtype, id}];
  if (bytes.empty()) {
    std::vector<float> values(static_cast<size_t>(count));
    for (int64_t i = 0; i < count; ++i) values[static_cast<size_t>(i)] = input_value(7, id, static_cast<uint64_t>(i));
    bytes = gpu::encode(values, dtype);
  }
  return bytes;
}

DeviceBuffer device_values(int64_t count, Dtype dtype, TensorId id) {
  const std::vector<unsigned char>& bytes = encoded_values(count, dtype, id);
  DeviceBuffer b(bytes.size());
  b.upload(bytes.data(), bytes.size());
  return b;
}

Buffers allocate(const Problem& s, Dtype dtype, cudaStream_t stream) {
  const int64_t elements = int64_t(s.B) * s.S * s.H * s.D, rows = int64_t(s.B) * s.H * s.S;
  Buffers b;
  b.q = device_values(elements, dtype, TensorId::q);
  b.k = device_values(elements, dtype, TensorId::k);
  b.v = device_values(elements, dtype, TensorId::v);
  b.dout = device_values(elements, dtype, TensorId::dout);
  b.positions = DeviceBuffer(static_cast<size_t>(s.S) * 4);
  gpu::fill_iota(b.positions.as<int32_t>(), s.S, stream);
  b.acc_max = DeviceBuffer(static_cast<size_t>(rows) * 4);
  b.acc_sum = DeviceBuffer(static_cast<size_t>(rows) * 4);
  b.acc_out = DeviceBuffer(static_cast<size_t>(elements) * 4);
  b.out = DeviceBuffer(static_cast<size_t>(elements * gpu::dtype_bytes(dtype)));  // out in the dtype
  b.lse = DeviceBuffer(static_cast<size_t>(rows) * 4);
  b.delta = DeviceBuffer(static_cast<size_t>(rows) * 4);
  b.dq = DeviceBuffer(static_cast<size_t>(elements) * 4);
  b.dk = DeviceBuffer(static_cast<size_t>(elements) * 4);
  b.dv = DeviceBuffer(static_cast<size_t>(elements) * 4);
  return b;
}

gpu::AttentionParams params(const Problem& s, const Buffers& b) {
  gpu::AttentionParams a;
  a.q = b.q.get(), a.k = b.k.get(), a.v = b.v.get();
  a.q_pos = a.k_pos = b.positions.as<int32_t>();
  a.batch = s.B, a.q_seq = a.kv_seq = a.q_end = a.kv_end = s.S;
  a.heads = a.kv_heads = s.H, a.dim = s.D;
  a.causal = s.causal;
  a.scale = 1.0f / std::sqrt(static_cast<float>(s.D));
  return a;
}

// fused: one launch (bf16 / fp16 only); fused_plain: the same in the plain block order (causal);
// staged: init + attention + finalize.
enum class ForwardPath { fused, fused_plain, staged };

bool has_fused(Dtype dtype) { return dtype != Dtype::fp32; }

void forward(Dtype dtype, const Problem& s, Buffers& b, ForwardPath path, cudaStream_t stream) {
  gpu::ForwardParams p;
  p.a = params(s, b);
  if (path != ForwardPath::staged) {  // the accumulator is neither read nor written
    p.init = true;
    p.plain_order = path == ForwardPath::fused_plain;
    p.out = b.out.get(), p.lse = b.lse.as<float>();
    gpu::forward_accumulate(dtype, p, stream);
    return;
  }
  const int64_t rows = int64_t(s.B) * s.H * s.S;
  gpu::init_accumulator(b.acc_max.as<float>(), b.acc_sum.as<float>(), b.acc_out.as<float>(), rows, s.D, stream);
  p.acc_max = b.acc_max.as<float>(), p.acc_sum = b.acc_sum.as<float>(), p.acc_out = b.acc_out.as<float>();
  gpu::forward_accumulate(dtype, p, stream);
  gpu::finalize_accumulator(dtype, p.acc_max, p.acc_sum, p.acc_out, s.B, s.H, s.S, s.D, b.out.get(), b.lse.as<float>(),
                            stream);
}

// The launch is the only writer of dk and dv (one block, H = HKV here): the tensor-core kernel
// stores them (BackwardParams::store_dkv), as FlashAttention-2 writes dK and dV once, and nothing
// clears them first; the fp32 kernel only adds, into zeroed buffers. dq is added to by every key
// block, so it is zeroed either way (as SDPA zeroes its fp32 dq accumulator).
void backward(Dtype dtype, const Problem& s, Buffers& b, cudaStream_t stream) {
  const bool store = dtype != Dtype::fp32;
  b.dq.zero_async(stream);
  if (!store) {
    b.dk.zero_async(stream);
    b.dv.zero_async(stream);
  }
  gpu::softmax_delta(dtype, b.dout.get(), b.out.get(), s.B, s.S, s.H, s.D, b.delta.as<float>(), stream);
  gpu::BackwardParams p;
  p.a = params(s, b);
  p.dout = b.dout.get(), p.lse = b.lse.as<float>(), p.delta = b.delta.as<float>();
  p.dq = b.dq.as<float>(), p.dk = b.dk.as<float>(), p.dv = b.dv.as<float>();
  p.store_dkv = store;
  gpu::backward_accumulate(dtype, p, stream);
}

Tensor<float> fetch(const DeviceBuffer& b, ringlab::Shape shape) {
  Tensor<float> t(std::move(shape));
  b.download(t.data(), static_cast<size_t>(t.size()) * 4);
  return t;
}

// A tensor stored in the dtype (out), widened to float.
Tensor<float> fetch(const DeviceBuffer& b, ringlab::Shape shape, Dtype dtype) {
  Tensor<float> t(std::move(shape));
  std::vector<unsigned char> bytes(static_cast<size_t>(t.size() * gpu::dtype_bytes(dtype)));
  b.download(bytes.data(), bytes.size());
  gpu::decode(bytes, dtype, {t.data(), static_cast<size_t>(t.size())});
  return t;
}

// The check before timing: a reduced shape (B = 1, S <= 1024, 2 heads) with the same D, mask and
// dtype, every output of every forward path and of the backward against the reference kernel on
// the same rounded inputs. Before each forward its outputs are poisoned (NaN bytes), so a path that
// wrote nothing cannot pass on what the other path left.
bool check(Dtype dtype, Problem s, cudaStream_t stream, std::string& detail) {
  s.B = 1, s.S = std::min(s.S, 1024), s.H = 2;
  Buffers b = allocate(s, dtype, stream);
  const ringlab::Shape shape{s.B, s.S, s.H, s.D};
  AttentionInputs<float> x{Tensor<float>(shape), Tensor<float>(shape), Tensor<float>(shape), Tensor<float>(shape)};
  for (int64_t i = 0; i < x.q.size(); ++i) {
    x.q[i] = gpu::round_to_dtype(dtype, input_value(7, TensorId::q, uint64_t(i)));
    x.k[i] = gpu::round_to_dtype(dtype, input_value(7, TensorId::k, uint64_t(i)));
    x.v[i] = gpu::round_to_dtype(dtype, input_value(7, TensorId::v, uint64_t(i)));
    x.dout[i] = gpu::round_to_dtype(dtype, input_value(7, TensorId::dout, uint64_t(i)));
  }
  const MaskKind mask = s.causal ? MaskKind::causal : MaskKind::none;
  const AttentionOutput<float> want = flash_attention(x.q, x.k, x.v, mask);
  const AttentionGrads<float> grads = flash_attention_backward(x.q, x.k, x.v, want, x.dout, mask);
  auto failed = [&](const std::string& name, const CompareResult& r) {
    if (!r.ok) detail = name + ": " + r.describe();
    return !r.ok;
  };
  std::vector<ForwardPath> paths{ForwardPath::staged};
  if (has_fused(dtype) && s.causal) paths.push_back(ForwardPath::fused_plain);
  if (has_fused(dtype)) paths.push_back(ForwardPath::fused);  // last: the backward reads its out and lse
  for (ForwardPath path : paths) {
    const std::string which = path == ForwardPath::fused         ? " (fused forward)"
                              : path == ForwardPath::fused_plain ? " (fused forward, plain block order)"
                                                                 : " (staged forward)";
    RINGLAB_CUDA_CHECK(cudaMemsetAsync(b.out.get(), 0xff, b.out.bytes(), stream));
    RINGLAB_CUDA_CHECK(cudaMemsetAsync(b.lse.get(), 0xff, b.lse.bytes(), stream));
    forward(dtype, s, b, path, stream);
    RINGLAB_CUDA_CHECK(cudaStreamSynchronize(stream));
    if (failed("out" + which, compare(fetch(b.out, shape, dtype), want.out, gpu::gpu_tolerance(dtype, "out"))) ||
        failed("lse" + which, compare(fetch(b.lse, {s.B, s.H, s.S}), want.lse, gpu::gpu_tolerance(dtype, "lse"))))
      return false;
  }
  // NaN in dk and dv first: where the backward stores them (store_dkv), every element must be written.
  RINGLAB_CUDA_CHECK(cudaMemsetAsync(b.dk.get(), 0xff, b.dk.bytes(), stream));
  RINGLAB_CUDA_CHECK(cudaMemsetAsync(b.dv.get(), 0xff, b.dv.bytes(), stream));
  backward(dtype, s, b, stream);
  RINGLAB_CUDA_CHECK(cudaStreamSynchronize(stream));
  return !failed("dq", compare(fetch(b.dq, shape), grads.dq, gpu::gpu_tolerance(dtype, "dq"))) &&
         !failed("dk", compare(fetch(b.dk, shape), grads.dk, gpu::gpu_tolerance(dtype, "dk"))) &&
         !failed("dv", compare(fetch(b.dv, shape), grads.dv, gpu::gpu_tolerance(dtype, "dv")));
}

}  // namespace
}  // namespace ringlab

int main(int argc, char** argv) {
  using namespace ringlab;
  CLI::App app{"bench_gpu_kernels: TFLOP/s of the production attention kernels (checked, then timed)"};
  std::string dims = "64,128", seqs = "1024,2048,4096,8192,16384", dtype_name = "bf16", csv;
  int64_t tokens = 16384, hidden = 2048;
  int warmup = 3, iterations = 10;
  app.add_option("--dims", dims, "head dimensions D")->capture_default_str();
  app.add_option("--seqs", seqs, "sequence lengths S")->capture_default_str();
  app.add_option("--tokens", tokens, "batch x S")->capture_default_str();
  app.add_option("--hidden", hidden, "heads x D")->capture_default_str();
  app.add_option("--dtype", dtype_name, "bf16 | fp16 | fp32")->capture_default_str();
  app.add_option("--warmup", warmup)->capture_default_str();
  app.add_option("--iterations", iterations)->capture_default_str();
  app.add_option("--csv", csv, "also write the rows as CSV to this file");
  CLI11_PARSE(app, argc, argv);
  std::string why;
  if (!gpu::device_available(&why)) {
    std::cerr << "bench_gpu_kernels: no CUDA device (" << why << "); nothing to measure\n";
    return 2;
  }
  const gpu::Dtype dtype = gpu::parse_dtype(dtype_name);
  gpu::Stream stream;
  std::ofstream csv_file;
  if (!csv.empty()) {
    csv_file.open(csv);
    csv_file << "dtype,D,S,batch,heads,causal,pass,ms,tflops,checked,staged_ms,plain_ms\n";
  }
  std::printf("ringlab production kernels on %s (%s), FLOPs = 4 S^2 D H B (causal /2), bwd = 2.5x fwd\n",
              gpu::device_description(0).c_str(), gpu::dtype_name(dtype));
  std::printf(
      "fwd: %s; staged = init + attention + finalize (3 launches), timed in the same run; st/fused = its time / fwd "
      "time\n",
      has_fused(dtype) ? "one launch (fused init and finalize)" : "staged (fp32 has no fused path)");
  std::printf(
      "causal fwd: heaviest tiles first; plain = the same launch in the plain block order, timed in the same "
      "run; pl/fused = its time / fwd time\n");
  std::printf("%4s %6s %5s %5s %6s %5s %10s %9s %10s %8s %10s %8s  %s\n", "D", "S", "batch", "heads", "causal", "pass",
              "ms", "TFLOP/s", "staged ms", "st/fused", "plain ms", "pl/fused", "check");
  std::printf("%4s %6s %5s %5s %6s %5s %10s %9s %10s %8s %10s %8s  %s\n", "", "", "", "", "", "", "[ms]", "[TFLOP/s]",
              "[ms]", "[x]", "[ms]", "[x]", "");
  int failures = 0;
  for (int64_t D : bench::parse_list(dims)) {
    if (!gpu::kernel_support(dtype, D).empty()) continue;
    for (int64_t S : bench::parse_list(seqs)) {
      for (bool causal : {false, true}) {
        const Problem s{static_cast<int>(std::max<int64_t>(1, tokens / S)), static_cast<int>(S),
                        static_cast<int>(hidden / D), static_cast<int>(D), causal};
        std::string detail;
        const bool ok = check(dtype, s, stream.get(), detail);
        failures += ok ? 0 : 1;
        Buffers b = allocate(s, dtype, stream.get());
        auto time_forward = [&](ForwardPath path) {
          return bench::time_ms(stream.get(), warmup, iterations, [&] { forward(dtype, s, b, path, stream.get()); });
        };
        const double staged_ms = time_forward(ForwardPath::staged);
        const double fwd_ms = has_fused(dtype) ? time_forward(ForwardPath::fused) : staged_ms;
        const bool has_plain = has_fused(dtype) && causal;  // the block order differs only under the mask
        const double plain_ms = has_plain ? time_forward(ForwardPath::fused_plain) : 0;
        const double bwd_ms =
            bench::time_ms(stream.get(), warmup, iterations, [&] { backward(dtype, s, b, stream.get()); });
        for (bool bwd : {false, true}) {
          const double ms = bwd ? bwd_ms : fwd_ms;
          const double tflops = bench::attention_flops(s.B, s.H, s.S, s.D, causal, bwd) / (ms * 1e-3) / 1e12;
          char staged[32] = "-", gain[32] = "-", plain[32] = "-", plain_gain[32] = "-";  // beside the fused one
          if (!bwd) {
            std::snprintf(staged, sizeof staged, "%.3f", staged_ms);
            std::snprintf(gain, sizeof gain, "%.2f", staged_ms / fwd_ms);
          }
          if (!bwd && has_plain) {
            std::snprintf(plain, sizeof plain, "%.3f", plain_ms);
            std::snprintf(plain_gain, sizeof plain_gain, "%.2f", plain_ms / fwd_ms);
          }
          std::printf("%4d %6d %5d %5d %6s %5s %10.3f %9.1f %10s %8s %10s %8s  %s\n", s.D, s.S, s.B, s.H,
                      causal ? "yes" : "no", bwd ? "bwd" : "fwd", ms, tflops, staged, gain, plain, plain_gain,
                      ok ? "ok" : ("FAIL " + detail).c_str());
          if (csv_file) {
            csv_file << gpu::dtype_name(dtype) << "," << s.D << "," << s.S << "," << s.B << "," << s.H << ","
                     << (causal ? 1 : 0) << "," << (bwd ? "bwd" : "fwd") << "," << ms << "," << tflops << ","
                     << (ok ? 1 : 0) << "," << (bwd ? "" : std::to_string(staged_ms)) << ","
                     << (!bwd && has_plain ? std::to_string(plain_ms) : "") << "\n";
          }
        }
      }
    }
  }
  std::printf("%s\n", std::string(112, '-').c_str());
  std::printf("%s: %d configuration(s) failed the check before timing\n", failures ? "FAIL" : "PASS", failures);
  return failures ? 1 : 0;
}
