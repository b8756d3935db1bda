// Helpers shared by the GPU benchmarks: CUDA-event timing, the FLOP convention of the published
// figures (FlashAttention-3 paper's convention: 4 S^2 D heads batch per forward, causal halved, backward 2.5x), and the
// command-line parsing of comma lists.
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "gpu/device.hpp"

namespace ringlab::bench {

// Median milliseconds of `iterations` runs of `work` (after `warmup` runs), each bracketed by
// CUDA events on `stream`.
template <class F>
double time_ms(cudaStream_t stream, int warmup, int iterations, F&& work) {
  for (int i = 0; i < warmup; ++i) work();
  std::vector<double> times;
  gpu::Event start(true), end(true);
  for (int i = 0; i < iterations; ++i) {
    start.record(stream);
    work();
    end.record(stream);
    RINGLAB_CUDA_CHECK(cudaEventSynchronize(end.get()));
    times.push_back(gpu::elapsed_ms(start, end));
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

// FLOPs as the FlashAttention papers count them, so that ratios with their figures (and with
// PyTorch measured by bench/gpu/sdpa_compare.py, which uses the same formula) are like for like.
inline double attention_flops(int64_t batch, int64_t heads, int64_t seq, int64_t dim, bool causal, bool backward) {
  const double forward =
      4.0 * double(seq) * double(seq) * double(dim) * double(heads) * double(batch) / (causal ? 2 : 1);
  return backward ? 2.5 * forward : forward;
}

inline std::vector<int64_t> parse_list(const std::string& text) {
  std::vector<int64_t> values;
  size_t at = 0;
  while (at < text.size()) {
    const size_t comma = text.find(',', at);
    values.push_back(std::stoll(text.substr(at, comma == std::string::npos ? std::string::npos : comma - at)));
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  return values;
}

}  // namespace ringlab::bench
