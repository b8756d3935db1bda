#include "sim/pipeline/result.hpp"

namespace ringlab {

void count_block(RankSummary& summary, const ComputeOp& compute) {
  if (compute.kernels.empty()) {
    ++summary.blocks_skipped;
    return;
  }
  ++summary.blocks_computed;
  if (compute.shape == BlockShape::diagonal || compute.shape == BlockShape::masked ||
      compute.shape == BlockShape::erratum || compute.shape == BlockShape::partial) {
    ++summary.blocks_masked;
  }
  summary.pairs += compute.pairs;
  summary.flops += compute.flops;
}

}  // namespace ringlab
