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

// The matrix with both masks and both passes: every plan case, full or causal, forward or
// forward + backward.
struct MatrixCase : PlanCase {
  bool causal;
  bool backward;
};

inline std::vector<MatrixCase> matrix_cases() {
  std::vector<MatrixCase> cases;
  for (const PlanCase& c : plan_cases())
    for (bool causal : {false, true})
      for (bool backward : {false, true}) cases.push_back({c, causal, backward});
  return cases;
}

// A plan spec from the fields every test sets: the algorithm, layout, P ranks (U of them in each
// Ulysses group), dims, mask and pass; the rest (block, skipping, window, documents) default.
inline PlanSpec spec_for(Algorithm algo, LayoutKind layout, int64_t P, int64_t U, const AttentionDims& dims,
                         bool causal, bool backward) {
  return {
      .algo = algo, .layout = layout, .ranks = P, .ulysses = U, .dims = dims, .causal = causal, .backward = backward};
}

// A plan of the matrix: `dims` (sized for P: heads divisible by P for Ulysses), the hybrid at U = 2
// where P is even (else U = 1).
inline PlanSpec matrix_spec(Algorithm algo, LayoutKind layout, int64_t P, const AttentionDims& dims, bool causal,
                            bool skip, bool backward) {
  PlanSpec spec =
      spec_for(algo, layout, P, algo == Algorithm::hybrid ? (P % 2 == 0 ? 2 : 1) : 1, dims, causal, backward);
  spec.skip = skip;
  return spec;
}

// A spec with every field away from its default, as a trace can carry it: the hybrid (U = 2) at P = 8,
// striped per document with block 2, causal with window 77, documents {480, 496} filling S = 976,
// one padding head (H = 7 padded to 8 for U = 2), no skipping, the full ring, and the backward.
// The spec checks and the trace round trip start from it.
inline PlanSpec every_field_spec() {
  PlanSpec spec = spec_for(Algorithm::hybrid, LayoutKind::striped, 8, 2, {3, 976, 8, 8, 128}, true, true);
  spec.block = 2;
  spec.window = 77;
  spec.documents = {480, 496};
  spec.padding_heads = 1;
  spec.skip = false;
  spec.full_ring = true;
  return spec;
}

// Packed documents for a sequence of S tokens at P ranks under a layout: lengths of 1 and 5 tokens
// where the layout takes any (contiguous, balanced), multiples of 2P where it cuts every document
// into 2P chunks (per-document zig-zag and striped).
inline std::vector<int64_t> test_documents(LayoutKind layout, int64_t S, int64_t P) {
  if (layout == LayoutKind::zigzag || layout == LayoutKind::striped) return {2 * P, S - 6 * P, 4 * P};
  if (S < 32) return {1, S - 1};
  return {5, S - 25, 1, 19};
}

}  // namespace ringlab::test
