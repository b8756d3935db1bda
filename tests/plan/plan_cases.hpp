// The matrix of plans the plan, walker and executor tests sweep: every algorithm, every layout
// (balanced included),
// P in {1, 2, 3, 4, 8} (P = 3 is where a wrong direction shows). One GENERATE of these replaces
// three nested ones: GENERATE(from_range(plan_cases())).
#pragma once

#include <cstdint>
#include <vector>

#include "sim/plan/plan.hpp"

namespace ringlab::test {

struct PlanCase {
  Algorithm algo;
  LayoutKind layout;
  int64_t ranks;
};

inline std::vector<PlanCase> plan_cases() {
  std::vector<PlanCase> cases;
  for (Algorithm algo : {Algorithm::ring, Algorithm::allgather, Algorithm::ulysses, Algorithm::hybrid})
    for (LayoutKind layout : {LayoutKind::contiguous, LayoutKind::zigzag, LayoutKind::striped, LayoutKind::balanced})
      for (int64_t ranks : {1, 2, 3, 4, 8}) cases.push_back({algo, layout, ranks});
  return cases;
}

// Packed documents for a sequence of S tokens at P ranks under a layout: lengths of 1 and 5 tokens
// where the layout takes any (contiguous, balanced), multiples of 2P where it cuts every document
// into 2P chunks (per-document zig-zag and striped).
// A plan of the matrix: `dims` (sized for P: heads divisible by P for Ulysses), the hybrid at U = 2
// where P is even (else U = 1).
inline PlanSpec matrix_spec(Algorithm algo, LayoutKind layout, int64_t P, const AttentionDims& dims, bool causal,
                            bool skip, bool backward) {
  PlanSpec spec;
  spec.algo = algo;
  spec.layout = layout;
  spec.ranks = P;
  spec.ulysses = algo == Algorithm::hybrid ? (P % 2 == 0 ? 2 : 1) : 1;
  spec.dims = dims;
  spec.causal = causal;
  spec.skip = skip;
  spec.backward = backward;
  return spec;
}

inline std::vector<int64_t> test_documents(LayoutKind layout, int64_t S, int64_t P) {
  if (layout == LayoutKind::zigzag || layout == LayoutKind::striped) return {2 * P, S - 6 * P, 4 * P};
  if (S < 32) return {1, S - 1};
  return {5, S - 25, 1, 19};
}

}  // namespace ringlab::test
