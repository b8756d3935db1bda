// Helpers the catalog files share: building parts with their units and tolerances, printing
// values inside statements and solutions, and the plan questions several exercises ask (bytes a
// rank sends, the wall clock of a causal ring under the compute-bound model).
#pragma once

#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "exercises/exercise.hpp"
#include "sim/plan/plan.hpp"

namespace ringlab::exercises::support {

// ---- text --------------------------------------------------------------------------------------

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

// ---- parts -------------------------------------------------------------------------------------

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

// "bf16 (2 bytes)" / "fp32 (4 bytes)"
std::string element_text(int64_t element_bytes);

// ---- problems and plans ------------------------------------------------------------------------

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

}  // namespace ringlab::exercises::support
