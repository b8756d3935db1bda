// The conformance suite: cases that judge a context-parallel attention implementation ringlab did
// not write (`ringlab conformance cases DIR`; the format is in cli/ringlab/conformance_command.cpp
// and `ringlab conformance cases --help`). Each case is one problem — sizes, dtype, mask,
// documents, P, layout — with inputs, the float64 oracle's outputs, per-output tolerances derived
// from the precision model, the layout's token-to-rank map and ringlab's ring schedule for it,
// and the real-world failure it stands for.
//
// A case's layout is ringlab's (reference/layout.hpp and the plan's padding, PlanSpec): the
// positions it writes are those ringlab's own sim executor runs, so ringlab passes its own suite
// by construction of the same map, and tests/executors/test_conformance_cases.cpp checks that it
// does, within the written tolerances.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "reference/attention.hpp"
#include "reference/compare.hpp"
#include "sim/pipeline/config.hpp"
#include "sim/pipeline/verification.hpp"

namespace ringlab {

inline constexpr const char* kCaseFormat = "ringlab-conformance-case/1";
inline constexpr const char* kCaseTensors[] = {"out", "lse", "dq", "dk", "dv"};

struct CaseReport {
  std::string report;  // "TransformerEngine #1930"
  std::string what;    // what went wrong there, in one sentence
};

// One case of the suite, before its tensors are made.
struct ConformanceCase {
  std::string name;   // folder name
  std::string title;  // one line
  std::vector<CaseReport> stands_for;
  std::string stands_for_note;  // where no single report fits
  AttentionDims dims{1, 64, 2, 2, 16};
  std::string dtype = "fp32";  // fp32 | bf16 | fp16
  bool causal = true;
  int64_t window = 0;
  std::vector<int64_t> documents;  // empty = one document
  int64_t ranks = 4;
  std::string layout = "zigzag";  // contiguous | zigzag | striped
  uint64_t seed = 0;
  double logit_shift = 0;  // > 0: every score of a row shifted up by about this (q, k share a large component)
};

// The cases of a suite: "quick" (small shapes, written in seconds) or "full" (quick's and larger
// ones). Throws UsageError for another name.
std::vector<ConformanceCase> conformance_suite(const std::string& suite);

// The run configuration ringlab uses for a case (ring, the case's layout, forward and backward,
// the dtype as --precision with fp32 accumulation).
RunConfig case_config(const ConformanceCase& c);

// The tolerance of one output ("out", "lse", "dq", "dk", "dv") for a dtype at P ranks, with the
// scores shifted up by about `logit_shift` (0 = none), and the derivation in words.
Tolerance case_tolerance(const std::string& dtype, int64_t ranks, const std::string& tensor, double logit_shift = 0);
std::string case_tolerance_why(const std::string& dtype, int64_t ranks, double logit_shift = 0);

// A case with its tensors: inputs as the implementation gets them (float32 holding dtype values)
// and the float64 oracle on exactly those values.
struct CaseData {
  nlohmann::json json;            // case.json
  AttentionInputs<float> inputs;  // q, k, v, dout: global order
  ReferenceOutputs oracle;        // out, lse, dq, dk, dv
};
CaseData build_case(const ConformanceCase& c);

struct CasesWritten {
  int64_t cases = 0;
  int64_t files = 0;
};
// Writes suite.json and one folder per case into dir, all or nothing. Throws UsageError: an unknown
// suite, dir not creatable or not writable, dir holding cases (without force) or other files.
CasesWritten write_conformance_cases(const std::string& dir, const std::string& suite, bool force);

// A case folder read back: case.json, the inputs as float64 and the oracle. Throws UsageError naming
// the folder and the missing or malformed file, or a tensor whose shape disagrees with case.json.
struct CaseFolder {
  nlohmann::json json;
  AttentionInputs<double> inputs;
  ReferenceOutputs oracle;
  Tolerance tolerance(const std::string& tensor) const;   // from case.json
  double rms_tolerance(const std::string& tensor) const;  // tolerances[tensor].rms; -1 when none
};
CaseFolder read_case(const std::string& folder);

}  // namespace ringlab
