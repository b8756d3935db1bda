// The teaching ladder, rung by rung: each version checked against the CPU reference, then timed
// on the same problem, with its speedup over the previous rung (gpu/kernels/ladder/README.md).
#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <iostream>

#include "bench/gpu/bench_gpu_common.hpp"
#include "gpu/kernels/ladder/ladder.hpp"
#include "reference/compare.hpp"
#include "reference/flash_attention.hpp"
#include "reference/inputs.hpp"

namespace ringlab {
namespace {

gpu::DeviceBuffer upload(const Tensor<float>& t, gpu::Dtype dtype) {
  const std::vector<unsigned char> bytes = gpu::encode(t.span(), dtype);
  gpu::DeviceBuffer b(bytes.size());
  b.upload(bytes.data(), bytes.size());
  return b;
}

Tensor<float> inputs(const gpu::ladder::Problem& p, TensorId id, gpu::Dtype dtype) {
  Tensor<float> t({p.batch, p.seq, p.heads, p.dim});
  for (int64_t i = 0; i < t.size(); ++i) t[i] = gpu::round_to_dtype(dtype, input_value(5, id, uint64_t(i)));
  return t;
}

// Runs one version on a problem; returns the outputs.
AttentionOutput<float> run(const gpu::ladder::Version& version, const gpu::ladder::Problem& p, cudaStream_t stream) {
  const Tensor<float> q = inputs(p, TensorId::q, version.dtype), k = inputs(p, TensorId::k, version.dtype),
                      v = inputs(p, TensorId::v, version.dtype);
  const gpu::DeviceBuffer qd = upload(q, version.dtype), kd = upload(k, version.dtype), vd = upload(v, version.dtype);
  gpu::DeviceBuffer out(gpu::ladder::out_bytes(version, p)), lse(size_t(p.batch) * p.heads * p.seq * 4),
      ws(version.workspace_bytes(p));
  version.launch(p, qd.get(), kd.get(), vd.get(), out.get(), lse.as<float>(), ws.get(), stream);
  RINGLAB_CUDA_CHECK(cudaStreamSynchronize(stream));
  AttentionOutput<float> result{Tensor<float>(q.shape()), Tensor<float>({p.batch, p.heads, p.seq})};
  gpu::ladder::read_out(version, out, result.out.data(), static_cast<size_t>(result.out.size()));
  lse.download(result.lse.data(), lse.bytes());
  return result;
}

bool check(const gpu::ladder::Version& version, gpu::ladder::Problem p, cudaStream_t stream, std::string& detail) {
  p.batch = 1, p.seq = std::min(p.seq, 777), p.heads = 2;  // ragged on purpose
  const AttentionOutput<float> got = run(version, p, stream);
  const AttentionOutput<float> want =
      flash_attention(inputs(p, TensorId::q, version.dtype), inputs(p, TensorId::k, version.dtype),
                      inputs(p, TensorId::v, version.dtype), p.causal ? MaskKind::causal : MaskKind::none);
  const CompareResult out = compare(got.out, want.out, gpu::gpu_tolerance(version.dtype, "out"));
  const CompareResult lse = compare(got.lse, want.lse, gpu::gpu_tolerance(version.dtype, "lse"));
  detail = !out.ok ? "out: " + out.describe() : !lse.ok ? "lse: " + lse.describe() : "";
  return out.ok && lse.ok;
}

}  // namespace
}  // namespace ringlab

int main(int argc, char** argv) {
  using namespace ringlab;
  CLI::App app{"bench_gpu_ladder: the teaching ladder, each version checked then timed"};
  gpu::ladder::Problem problem;
  problem.batch = 4, problem.seq = 4096, problem.heads = 16;
  std::string dims = "64,128";
  int iterations = 10;
  app.add_option("--batch", problem.batch)->capture_default_str();
  app.add_option("--seq", problem.seq)->capture_default_str();
  app.add_option("--heads", problem.heads)->capture_default_str();
  app.add_option("--dims", dims)->capture_default_str();
  app.add_option("--iterations", iterations)->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  std::string why;
  if (!gpu::device_available(&why)) {
    std::cerr << "bench_gpu_ladder: no CUDA device (" << why << "); nothing to measure\n";
    return 2;
  }
  gpu::Stream stream;
  int failures = 0;
  std::printf("teaching ladder on %s: B=%d S=%d H=%d, forward\n", gpu::device_description(0).c_str(), problem.batch,
              problem.seq, problem.heads);
  std::printf("%3s %-24s %4s %4s %6s %10s %9s %8s  %s\n", "#", "file", "type", "D", "causal", "ms", "TFLOP/s",
              "vs prev", "check");
  for (int64_t D : bench::parse_list(dims)) {
    for (bool causal : {false, true}) {
      problem.dim = static_cast<int>(D);
      problem.causal = causal;
      double previous = 0;
      for (const gpu::ladder::Version& version : gpu::ladder::versions()) {
        if (!version.supports(problem)) continue;
        std::string detail;
        const bool ok = check(version, problem, stream.get(), detail);
        failures += ok ? 0 : 1;
        const Tensor<float> zeros({problem.batch, problem.seq, problem.heads, problem.dim});
        const gpu::DeviceBuffer q = upload(zeros, version.dtype), k = upload(zeros, version.dtype),
                                v = upload(zeros, version.dtype);
        gpu::DeviceBuffer out(gpu::ladder::out_bytes(version, problem)),
            lse(size_t(problem.batch) * problem.heads * problem.seq * 4), ws(version.workspace_bytes(problem));
        // The naive versions are slow: fewer iterations for them.
        const int n = version.number <= 2 ? std::max(1, iterations / 5) : iterations;
        const double ms = bench::time_ms(stream.get(), 1, n, [&] {
          version.launch(problem, q.get(), k.get(), v.get(), out.get(), lse.as<float>(), ws.get(), stream.get());
        });
        const double tflops =
            bench::attention_flops(problem.batch, problem.heads, problem.seq, D, causal, false) / (ms * 1e-3) / 1e12;
        char speedup[16] = "";
        if (previous > 0) std::snprintf(speedup, sizeof speedup, "%.2fx", previous / ms);
        std::printf("%3d %-24s %4s %4lld %6s %10.3f %9.2f %8s  %s\n", version.number, version.file,
                    gpu::dtype_name(version.dtype), static_cast<long long>(D), causal ? "yes" : "no", ms, tflops,
                    speedup, ok ? "ok" : ("FAIL " + detail).c_str());
        previous = ms;
      }
    }
  }
  for (const gpu::ladder::Version& version : gpu::ladder::versions())
    std::printf("  %02d %s: %s\n", version.number, version.file, version.adds);
  std::printf("%s: %d version(s) failed the check before timing\n", failures ? "FAIL" : "PASS", failures);
  return failures ? 1 : 0;
}
