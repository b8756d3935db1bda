// The attention kernels' mask arguments (kernel_params.hpp) from the reference's Mask
// (reference/mask.hpp) — host code only: the executors and the tests fill AttentionParams with it.
//
//   causal, window       as the Mask's (window clamped to kFarPosition: no position reaches it)
//   doc_first, doc_last  per query row, the row's document bounds with the padding cut off
//                        (Mask::keys_of of the mask without causal and window), an empty row
//                        (first = kFarPosition > last = -kFarPosition) for a padding query; empty
//                        vectors (null pointers) when the mask has neither documents nor padding
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "reference/error.hpp"
#include "reference/mask.hpp"

namespace ringlab::gpu {

inline constexpr int64_t kKernelFarPosition = int64_t{1} << 30;  // dev::kFarPosition

struct KernelMask {
  bool causal = false;
  int window = 0;
  std::vector<int32_t> doc_first, doc_last;
};

// positions: the global positions of the query rows the kernels will be given (q_pos).
inline KernelMask kernel_mask(const Mask& mask, std::span<const int64_t> positions) {
  KernelMask k;
  k.causal = mask.causal();
  k.window = static_cast<int>(std::min(mask.window(), kKernelFarPosition));
  for (int64_t p : positions) {
    if (p < 0 || p >= kKernelFarPosition) {
      throw UsageError("the GPU kernels take token positions below 2^30, got " + std::to_string(p));
    }
  }
  if (!mask.has_documents() && !mask.padded()) return k;
  const Mask documents = mask.bounds();  // documents and padding (tail and per document), no causal, no window
  k.doc_first.reserve(positions.size());
  k.doc_last.reserve(positions.size());
  for (int64_t p : positions) {
    KeyRange keys = documents.keys_of(p);
    if (keys.empty()) keys = {kKernelFarPosition, -kKernelFarPosition};
    k.doc_first.push_back(static_cast<int32_t>(std::max(keys.first, -kKernelFarPosition)));
    k.doc_last.push_back(static_cast<int32_t>(std::min(keys.last, kKernelFarPosition)));
  }
  return k;
}

}  // namespace ringlab::gpu
