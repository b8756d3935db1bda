// Checking outputs a student computed elsewhere (NumPy, PyTorch, their own C++) against the exact
// oracle, and saying where and why they are wrong: `ringlab verify DIR` and the Python module's
// `verify`.
//
// The outputs are compared as `ringlab run` compares an executor's (fp32 tolerances). For a wrong
// forward row the report names the query's position, the rank that owns it under the chosen layout
// and its local row, and which ring blocks its output is made of: the oracle's partial result of
// each block is merged over every subset of blocks, and a subset that reproduces the student's row
// names the blocks it missed - and, for a ring, the step at which each should have arrived. Wrong
// gradient rows are named with their owner rank. One likely cause is derived from the pattern
// (NaN, the missing 1/sqrt(D), no causal mask, blocks missed from a step on, dK/dV misrouted).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "reference/attention.hpp"
#include "reference/compare.hpp"
#include "reference/layout.hpp"

namespace ringlab::exercises {

// What the student hands in; an empty tensor is "not given" (at least one must be).
struct StudentOutputs {
  Tensor<double> out;  // (B, S, H, D)
  Tensor<double> lse;  // (B, H, S), natural log
  Tensor<double> dq;   // (B, S, H, D)
  Tensor<double> dk;   // (B, S, HKV, D)
  Tensor<double> dv;   // (B, S, HKV, D)
};

struct VerifyOptions {
  LayoutKind layout = LayoutKind::contiguous;
  int64_t ranks = 1;
  bool causal = false;
};

struct WrongRow {
  std::string tensor;  // "out", "lse", "dq", "dk", "dv"
  int64_t batch = 0, head = 0, position = 0;
  int64_t rank = 0, local_row = 0;                  // the owner of `position` under the layout
  double error = 0;                                 // max |given - exact| over the row
  bool explained = false;                           // a subset of whole blocks reproduces the row (forward only)
  std::vector<int64_t> blocks_seen, blocks_missed;  // ring blocks (= ranks' token sets)
  std::vector<int64_t> steps_missed;                // ring steps at which the missed blocks arrive
};

struct TensorVerdict {
  std::string name;
  Shape shape;
  Tolerance tolerance;
  CompareResult result;
};

struct VerifyReport {
  AttentionDims dims;
  VerifyOptions options;
  std::vector<TensorVerdict> tensors;
  std::vector<WrongRow> rows;  // the first wrong rows of each tensor (a few per tensor)
  int64_t wrong_rows = 0;      // all wrong rows, over all tensors
  std::vector<int64_t> wrong_ranks;
  std::string cause;  // the likely cause, one sentence ("" when every tensor is right)

  bool ok() const;
  // The report as `ringlab verify` prints it: the tensor table, the wrong rows, the cause.
  std::string text() const;
};

// Throws UsageError for shapes that disagree with q (naming the tensor and the shape expected),
// a layout that does not divide S, or no output given. inputs.dout is needed for dq, dk, dv.
VerifyReport verify_outputs(const AttentionInputs<double>& inputs, const StudentOutputs& given,
                            const VerifyOptions& options);

}  // namespace ringlab::exercises
