// The `run` command's configuration: the flags of the command-line contract, shared by
// `ringlab run` and `ringlab-gpu run` so both take exactly the same flags.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "reference/attention.hpp"
#include "reference/layout.hpp"
#include "sim/plan/plan.hpp"

namespace CLI {
class App;  // CLI11; the files that register flags include <CLI/CLI.hpp>
}  // namespace CLI

namespace ringlab {

struct RunConfig {
  std::string algo = "ring";              // ring | allgather | ulysses | hybrid
  std::string layout = "contiguous";      // contiguous | zigzag | striped
  int64_t block = 0;                      // tokens per layout unit; 0 = the layout's default
  int64_t ranks = 4;                      // P
  int64_t ulysses = 0;                    // hybrid: Ulysses degree U (ring degree P/U); 0 = not given
  AttentionDims dims{1, 1024, 4, 0, 64};  // kv_heads 0 = not given (the problem takes H)
  bool causal = false;
  int64_t window = 0;                    // sliding window W; 0 = none
  std::string docs;                      // --docs L1,L2,... | random:N ("" = one document)
  std::vector<int64_t> documents;        // the lengths --docs gives, filled by resolve_problem()
  std::vector<std::string> sizes_given;  // size flags (--heads..., --window) given on the command line
  bool no_skip = false;                  // compute fully masked blocks instead of skipping them
  bool full_ring = false;                // every K/V block makes all P-1 ring hops, whatever the mask
  bool backward = false;
  uint64_t seed = 0;
  std::string erratum;  // "" | reverse-dkv | kv-offset-mask (source-material mistakes)
  std::string in_dir;   // q.npy k.npy v.npy [dout.npy]
  std::string save_dir;
  std::string trace_file;
  bool json = false;
  bool dry_run = false;
  std::string hw = "h100-nvlink";   // cost-model preset
  std::vector<std::string> inject;  // KIND@RANK:STEP
  double timeout = 10.0;            // watchdog fallback, seconds without progress
  bool progress = true;             // progress bar on a terminal stderr
  // Low-precision emulation (the sim executor): the storage precision of the inputs, of K/V on the
  // wire and of each step's partial results; the precision of the running output and the
  // travelling dK/dV and dq accumulators (fp32 | storage); the form of the LSE merge.
  std::string precision = "fp32";   // fp32 | bf16 | fp16
  std::string accumulate = "fp32";  // fp32 | storage | fused
  std::string merge = "exp";        // exp | logsigmoid

  Mask mask() const { return Mask(causal, window, documents); }
  LayoutKind layout_kind() const { return parse_layout(layout); }
  // "ring | zigzag(block=64) | P=4 | B=1 S=1024 H=4 HKV=4 D=64 | causal | fwd+bwd | seed 0"
  std::string describe() const;
};

// Registers the contract's flags on a CLI11 (sub)command.
void add_run_flags(CLI::App& command, RunConfig& config);
// Only the flags that shape a schedule (algo, layout, block, ranks, ulysses, sizes, causal,
// no-skip, backward, erratum): for `ringlab plan` and `ringlab compare`.
// Without --ranks when `ranks` is false (ringlab study takes a list of them).
void add_schedule_flags(CLI::App& command, RunConfig& config, bool ranks = true);
// --precision, --accumulate and --merge (ringlab run, ringlab study precision).
void add_precision_flags(CLI::App& command, RunConfig& config);

// The plan spec of a resolved configuration (Problem::config).
PlanSpec plan_spec(const RunConfig& config);

// Refuses, with one line, sizes whose counts (pairs, bytes, padded tokens) would not fit in int64_t.
void check_countable(const AttentionDims& dims, int64_t ranks);

// Checks every constraint on the flags that needs no data: sizes, flag combinations. Throws
// UsageError (one line with a fix); changes nothing. The flags become a problem in one place:
// resolve_problem() (sim/pipeline/problem.hpp), which calls this first.
void validate(const RunConfig& flags);

}  // namespace ringlab
