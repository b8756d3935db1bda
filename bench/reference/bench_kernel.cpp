// bench_kernel — the blockwise CPU kernel against its ceiling and a NumPy baseline, in one run.
//
//   ceiling   Eigen SGEMM (2048^3, OpenMP on all cores): the best this machine does on GEMMs
//   kernel    flash_attention forward (and backward) on B=1 H=8 D=64 S=4096, non-causal, all cores
//   numpy     softmax(Q K^T scale) V in float32 (bench/reference/numpy_attention.py), same shape
// Targets (issue 2): kernel >= 50% of the SGEMM rate; >= 2x faster than NumPy.
// Usage: bench_kernel [--seq S] [--repeat N] [--no-numpy]
#include <omp.h>

#include <Eigen/Dense>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>

#include "bench/report_row.hpp"
#include "reference/flash_attention.hpp"
#include "reference/formulas.hpp"
#include "reference/inputs.hpp"

using namespace ringlab;
using bench::best_seconds;

namespace {

double sgemm_gflops(int repeat) {
  const int n = 2048;
  Eigen::MatrixXf a = Eigen::MatrixXf::Random(n, n), b = Eigen::MatrixXf::Random(n, n), c(n, n);
  c.noalias() = a * b;  // warm up
  const double seconds = best_seconds(repeat, [&] { c.noalias() = a * b; });
  return 2.0 * n * double(n) * n / seconds / 1e9;
}

// Runs the NumPy baseline; returns its best time in seconds (negative when unavailable).
double numpy_seconds(int64_t seq, std::string& blas) {
  const std::string command = std::string("/usr/bin/python3 ") + RINGLAB_BENCH_DIR + "/numpy_attention.py --seq " +
                              std::to_string(seq) + " --heads 8 --dim 64 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return -1;
  char line[512];
  double seconds = -1;
  while (fgets(line, sizeof line, pipe)) {
    char library[128] = "";
    if (std::sscanf(line, "numpy seconds=%lf blas=%127s", &seconds, library) >= 1) blas = library;
  }
  pclose(pipe);
  return seconds;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t seq = 4096;
  int repeat = 3;
  bool with_numpy = true;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--seq") && i + 1 < argc)
      seq = std::atoll(argv[++i]);
    else if (!std::strcmp(argv[i], "--repeat") && i + 1 < argc)
      repeat = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--no-numpy"))
      with_numpy = false;
    else {
      std::fprintf(stderr, "usage: bench_kernel [--seq S] [--repeat N] [--no-numpy]\n");
      return 2;
    }
  }
  const AttentionDims dims{1, seq, 8, 8, 64};
  const AttentionInputs<float> x = make_inputs(dims, 0, true);
  const double fwd_flops = forward_flops(full_pairs(seq, false), dims);
  const double bwd_flops = backward_flops(full_pairs(seq, false), dims);

  const double ceiling = sgemm_gflops(repeat + 2);
  AttentionOutput<float> forward = flash_attention(x.q, x.k, x.v, MaskKind::none);  // warm up
  const double fwd_s = best_seconds(repeat, [&] { forward = flash_attention(x.q, x.k, x.v, MaskKind::none); });
  const double bwd_s = best_seconds(repeat, [&] {
    const AttentionGrads<float> grads = flash_attention_backward(x.q, x.k, x.v, forward, x.dout, MaskKind::none);
    (void)grads;
  });
  const double causal_s = best_seconds(repeat, [&] { (void)flash_attention(x.q, x.k, x.v, MaskKind::causal); });
  std::string blas = "-";
  const double numpy_s = with_numpy ? numpy_seconds(seq, blas) : -1;

  std::printf("bench_kernel: B=1 H=8 D=64 S=%lld, %d threads, best of %d\n", static_cast<long long>(seq),
              omp_get_max_threads(), repeat);
  std::printf("%-44s %10s %10s\n", "item", "time_ms", "GFLOP/s");
  std::printf("%-44s %10s %10.1f\n", "eigen sgemm 2048^3 (ceiling)", "-", ceiling);
  std::printf("%-44s %10.1f %10.1f\n", "blockwise forward, non-causal", fwd_s * 1e3, fwd_flops / fwd_s / 1e9);
  std::printf("%-44s %10.1f %10.1f\n", "blockwise forward, causal (skip future tiles)", causal_s * 1e3,
              forward_flops(full_pairs(seq, true), dims) / causal_s / 1e9);
  std::printf("%-44s %10.1f %10.1f\n", "blockwise backward, non-causal", bwd_s * 1e3, bwd_flops / bwd_s / 1e9);
  if (numpy_s > 0) {
    std::printf("%-44s %10.1f %10.1f\n", ("numpy float32 (" + blas + ")").c_str(), numpy_s * 1e3,
                fwd_flops / numpy_s / 1e9);
  }
  std::printf("ratios\n");
  const double share = fwd_flops / fwd_s / 1e9 / ceiling;
  std::printf("  blockwise forward / sgemm ceiling  %6.2f   (target >= 0.50) %s\n", share,
              share >= 0.5 ? "met" : "MISSED");
  bench::report_row("blockwise kernel",
                    bench::format("forward GFLOP/s / Eigen SGEMM GFLOP/s (S=%lld, %d threads)",
                                  static_cast<long long>(seq), omp_get_max_threads()),
                    bench::format("%.2f (%.0f / %.0f)", share, fwd_flops / fwd_s / 1e9, ceiling), ">= 0.50",
                    bench::verdict(share >= 0.5));
  if (numpy_s > 0) {
    const double speedup = numpy_s / fwd_s;
    std::printf("  numpy time / blockwise time        %6.2fx  (target >= 2x)   %s\n", speedup,
                speedup >= 2 ? "met" : "MISSED");
    bench::report_row("blockwise kernel", "NumPy float32 time / blockwise forward time (" + blas + ")",
                      bench::format("%.2fx (%.0f / %.0f ms)", speedup, numpy_s * 1e3, fwd_s * 1e3), ">= 2x",
                      bench::verdict(speedup >= 2));
  } else {
    std::printf("  numpy baseline not run (needs /usr/bin/python3 with numpy)\n");
    bench::report_row("blockwise kernel", "NumPy float32 time / blockwise forward time", "not run (no NumPy)", ">= 2x",
                      "-");
  }
  return 0;
}
