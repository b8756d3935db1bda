// Helpers the exercises of the catalog (exercises/catalog/<id>.cpp) share: building parts with
// their units and tolerances, printing values inside statements and solutions, drawing variant
// parameters, the published GPUs and links the timing questions use, and the plan questions
// several exercises ask (bytes a rank sends, the wall clock of a causal ring under the
// compute-bound model).
// Sections: [text] [parts] [variants] [machines] [problems and plans]
#pragma once

#include <cstdint>
#include <initializer_list>
#include <sstream>
#include <string>
#include <vector>

#include "exercises/exercise.hpp"
#include "sim/plan/plan.hpp"

namespace ringlab::exercises::catalog {

// ---- [text] ------------------------------------------------------------------------------------

// Concatenates anything streamable: cat("P = ", 8, " ranks").
template <class... Args>
std::string cat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}

std::string bytes_text(double bytes, int significant = 4);    // "68.72 GB"
std::string seconds_text(double seconds, int significant = 4);  // "80 ms"
std::string ratio_text(double ratio, int significant = 4);    // "1.067x"
std::string percent_text(double fraction, int significant = 4);  // "43.75%"
std::string num(double value, int significant = 4);           // "3.5"
std::string flops_text(double flops_per_second);              // "312 TFLOP/s"
std::string bandwidth_text(double bytes_per_second);          // "300 GB/s"

// ---- [parts] -----------------------------------------------------------------------------------

Part bytes_part(std::string name, std::string question, double bytes, double rel = 0.01);
Part seconds_part(std::string name, std::string question, double seconds, double rel = 0.01);
Part ratio_part(std::string name, std::string question, double ratio, double rel = 0.005);
// Fractions are judged in percentage points: abs 0.005 = half a point.
Part fraction_part(std::string name, std::string question, double fraction, double abs = 0.005);
Part tokens_part(std::string name, std::string question, double tokens, double rel = 0.01);
Part number_part(std::string name, std::string question, double value, double rel = 0.005, double abs = 0);
Part list_part(std::string name, std::string question, std::vector<int64_t> list);

Part& mistake(Part& part, double value, std::string origin, std::string why);
Part& mistake_list(Part& part, std::vector<int64_t> list, std::string origin, std::string why);

inline constexpr const char* kSourceMaterial = "the source material (000)";
inline constexpr const char* kNotes = "the context-parallelism notes (001)";

// ---- [variants] --------------------------------------------------------------------------------

// Variant parameters: the source's for variant 0, else drawn by `make` (redrawn while they equal
// the source's, so every variant N > 0 has other numbers).
template <class Params, class Make>
Params variant_params(VariantDraw& draw, const Params& source, Make&& make) {
  if (draw.source()) return source;
  for (int attempt = 0; attempt < 64; ++attempt) {
    Params params = make(draw);
    if (!(params == source)) return params;
  }
  return make(draw);
}

// P GPUs holding n tokens each (S = P n): the parameters of the causal-balance exercises.
struct RanksTokens {
  int64_t ranks = 0, tokens_per_rank = 0;
  int64_t seq() const { return ranks * tokens_per_rank; }
  bool operator==(const RanksTokens&) const = default;
};
// `source` for variant 0; else P drawn from `ranks`, then n from `tokens` (variant_params).
RanksTokens draw_ranks_tokens(VariantDraw& draw, const RanksTokens& source, std::initializer_list<int64_t> ranks,
                              std::initializer_list<int64_t> tokens);

// "bf16 (2 bytes)" / "fp32 (4 bytes)"
std::string element_text(int64_t element_bytes);

// ---- [machines] --------------------------------------------------------------------------------

// A GPU and its link as the timing questions (overlap-threshold, overlap-profile) state them.
struct Machine {
  const char* name;
  double flops;           // dense bf16 FLOP/s
  double link;            // bytes/s, one direction
  const char* link_note;  // where the link figure comes from
  bool operator==(const Machine&) const = default;
};

// Published peaks (bf16 dense) and link bandwidths; one direction, as a ring GPU sends.
inline constexpr Machine kA100{"A100 SXM, NVLink 3", 312e12, 300e9, "600 GB/s counting both directions"};
inline constexpr Machine kH100{"H100 SXM, NVLink 4", 989e12, 450e9, "900 GB/s counting both directions"};
inline constexpr Machine kH100Measured{"H100 SXM, measured NVLink P2P", 989e12, 375e9, "measured one way"};
inline constexpr Machine kA100Ib{"A100 SXM, 200 Gb/s InfiniBand", 312e12, 25e9, "200 Gb/s, across nodes"};

// One of the four, uniformly.
Machine draw_machine(VariantDraw& draw);

// ---- [problems and plans] ----------------------------------------------------------------------

AttentionDims dims_of(int64_t batch, int64_t seq, int64_t heads, int64_t kv_heads, int64_t dim);

PlanSpec ring_spec(const AttentionDims& dims, int64_t ranks, LayoutKind layout = LayoutKind::contiguous,
                   bool causal = false, int64_t element_bytes = 2);

// Bytes rank `rank` sends in Exchange ops of `payload` during the phases of `pass`, from the
// expanded plan.
int64_t exchange_send_bytes(const Plan& plan, int64_t rank, Payload payload, Pass pass);
// Number of such sends.
int64_t exchange_sends(const Plan& plan, int64_t rank, Payload payload, Pass pass);
// Bytes rank `rank` sends in its collectives of the plan (CollectiveOp::send_bytes summed).
int64_t collective_send_bytes(const Plan& plan, int64_t rank, Collective collective);

// The compute-bound cost model of the causal exercises: a step costs the (query, key) pairs its
// kernels compute — ComputeOp::pairs when fully masked blocks are skipped and the kernel skips
// masked tiles (a diagonal block costs about half), ComputeOp::computed_pairs (every block in
// full) when nothing is skipped; communication is hidden; the wall clock is the slowest rank's
// sum. Pair units (per batch and head): multiply by forward_flops / pair for time.
struct CausalWork {
  std::vector<int64_t> rank_pairs;  // [P]: with skipping
  std::vector<int64_t> rank_pairs_no_skip;  // [P]: every block computed in full
  std::vector<int64_t> rank_skipped;        // [P]: blocks skipped
  int64_t slowest_rank = 0;                 // argmax of rank_pairs (the first one)
  int64_t max_pairs() const;
  int64_t max_pairs_no_skip() const;
  double speedup() const;                   // max no-skip / max skip
};
CausalWork causal_work(const AttentionDims& dims, int64_t ranks, LayoutKind layout, int64_t block = 0);

// Visible causal pairs of each rank's queries (against all keys), from the layout's closed forms.
std::vector<int64_t> causal_pairs_per_rank(const Layout& layout);

}  // namespace ringlab::exercises::catalog
