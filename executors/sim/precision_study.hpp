// The low-precision study (`ringlab study precision`): the same problem — the same inputs, rounded
// to the storage precision once, and one float64 oracle — run on the sim executor at each P and
// with each accumulation (fp32 | storage | fused), forward and backward in one run; every output
// tensor's max and RMS error against the oracle, and its ratio to the same accumulation's error at
// P = 1 (one rank: one step, nothing merged, so every accumulation gives the same P = 1 run).
#pragma once

#include <chrono>
#include <cstdint>
#include <iosfwd>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "sim/pipeline/config.hpp"

namespace ringlab {

// The largest P the study runs (it refuses more: three runs per P, each slower as P^2).
inline constexpr int64_t kMaxStudiedRanks = 256;

// The --accumulate choices the study runs, in its table's order.
inline constexpr const char* kStudiedAccumulations[] = {"fp32", "storage", "fused"};

struct PrecisionStudyRow {
  int64_t ranks = 1;
  std::string accumulate;  // "fp32" | "storage" | "fused"
  std::string tensor;      // "out" | "lse" | "dq" | "dk" | "dv"
  double max_error = 0, rms_error = 0;
  double max_ratio = 1, rms_ratio = 1;  // this P's error / P = 1's, same accumulator
};

struct PrecisionStudy {
  std::string config;     // the problem, "ring | zigzag | ... | bf16"
  std::string precision;  // "bf16"
  std::vector<int64_t> ranks;
  std::vector<PrecisionStudyRow> rows;  // by accumulate, then P, then tensor
  double seconds = 0;                   // the whole study, wall clock

  // The row of (accumulate, P, tensor); throws std::out_of_range when the study has none.
  const PrecisionStudyRow& row(const std::string& accumulate, int64_t ranks, const std::string& tensor) const;
};

// Runs the study for `config` (its --ranks is replaced by each of `ranks`; P = 1 is always run,
// first). Throws UsageError for flags a run would refuse, a P the layout cannot split S over
// (the study does not pad), a P above kMaxStudiedRanks, or fp32 storage (there is nothing to
// study). --docs random:N is drawn once, at the largest P, and every P runs those documents.
PrecisionStudy run_precision_study(RunConfig config, std::vector<int64_t> ranks);

void print_precision_study(std::ostream& out, const PrecisionStudy& study);
nlohmann::json to_json(const PrecisionStudy& study);

}  // namespace ringlab
