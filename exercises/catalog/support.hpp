// Helpers the exercises of the catalog (exercises/catalog/<id>.cpp) share: printing values inside
// statements and solutions, the parameter rows and demonstration commands most exercises show,
// building parts with their units and tolerances, drawing variant parameters, the published GPUs
// and links the timing questions use, and the plan questions several exercises ask (bytes a rank
// sends, the wall clock of a causal ring under the compute-bound model).
// Sections: [text] [parameters and commands] [parts] [variants] [machines] [problems and plans]
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <sstream>
#include <string>
#include <string_view>
#include <tuple>
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

// The lines of a statement or a solution that prints values, one element per printed line, joined
// with '\n' (none after the last): lines({"m = max(m_A, m_B)", cat("l = ", num(l))}). A text with
// no values stays adjacent literals, one "...\n" per line.
std::string lines(std::initializer_list<std::string> text_lines);

std::string bytes_text(double bytes, int significant = 4);       // "68.72 GB"
std::string seconds_text(double seconds, int significant = 4);   // "80 ms"
std::string ratio_text(double ratio, int significant = 4);       // "1.067x"
std::string percent_text(double fraction, int significant = 4);  // "43.75%"
std::string num(double value, int significant = 4);              // "3.5"
std::string flops_text(double flops_per_second);                 // "312 TFLOP/s"
std::string bandwidth_text(double bytes_per_second);             // "300 GB/s"
std::string element_text(int64_t element_bytes);                 // "bf16 (2 bytes)", "fp32 (4 bytes)"

// ---- [parameters and commands] -----------------------------------------------------------------

// The rows most exercises show: {"P", "8", meaning} and {"S", "256K (262,144) tokens", meaning}.
Parameter ranks_parameter(int64_t ranks, std::string meaning = "GPUs");
Parameter seq_parameter(int64_t seq, std::string meaning = "sequence length");

// A ringlab command run on the exercise's own P and S, with the rest of its flags and what to look
// at: demo_command("plan", 8, 65536, "--causal", "per-rank pairs in the footer") is
// "ringlab plan --ranks 8 --seq 65536 --causal    # per-rank pairs in the footer".
std::string demo_command(const std::string& subcommand, int64_t ranks, int64_t seq, const std::string& flags = "",
                         const std::string& look_at = "");

// ---- [parts] -----------------------------------------------------------------------------------

// A part with its unit and tolerance; its known mistakes chain on it (Part::mistake).
Part bytes_part(std::string name, std::string question, double bytes, double rel = 0.01);
Part seconds_part(std::string name, std::string question, double seconds, double rel = 0.01);
Part ratio_part(std::string name, std::string question, double ratio, double rel = 0.005);
// Fractions are judged in percentage points: abs 0.005 = half a point.
Part fraction_part(std::string name, std::string question, double fraction, double abs = 0.005);
Part tokens_part(std::string name, std::string question, double tokens, double rel = 0.01);
Part number_part(std::string name, std::string question, double value, double rel = 0.005, double abs = 0);
// A relative tolerance no looser than `rel` that still rejects every value of `wrong` (known
// mistakes close to the answer, e.g. the source's 1.17x beside the right 1.175x): `rel`, or the
// largest of rel/2, rel/5, rel/10, rel/20, ... below half the smallest relative gap. Values within
// 1e-6 of the answer are the answer (a variant where the mistake coincides) and do not count.
double tolerance_rejecting(double expected, std::initializer_list<double> wrong, double rel);
// A whole number that must be exact (a count, a GPU, a block): a number part with no tolerance.
Part count_part(std::string name, std::string question, int64_t count);
Part list_part(std::string name, std::string question, std::vector<int64_t> list);

inline constexpr const char* kNotes = "the context-parallelism notes";

// ---- [variants] --------------------------------------------------------------------------------

// An exercise's parameters, declared at the top of its write(): a plain aggregate (up to 8 fields)
// whose default values are the source's numbers (variant 0), with a static `drawn` giving another
// variant's:
//   struct Params {
//     int64_t seq = 256 * 1024, ranks = 8;
//     static Params drawn(VariantDraw& d) { return {d.pick<int64_t>({64 * 1024, 128 * 1024}), 4}; }
//   };
// They are compared field by field (same_params), so they need no operator==.

namespace detail {

// Converts to any field's type: only named in unevaluated contexts, to count an aggregate's fields.
struct AnyField {
  template <class T>
  operator T() const;
};

// The number of fields of the aggregate T: the most AnyFields it can be brace-initialised from.
template <class T, class... Fields>
constexpr size_t field_count() {
  if constexpr (requires { T{Fields{}..., AnyField{}}; }) {
    return field_count<T, Fields..., AnyField>();
  } else {
    return sizeof...(Fields);
  }
}

// The fields of x, in order, as a tuple of references.
template <class T>
auto fields_of(const T& x) {
  constexpr size_t n = field_count<T>();
  static_assert(n >= 1 && n <= 8, "a Params aggregate has 1 to 8 fields");
  if constexpr (n == 1) {
    const auto& [a] = x;
    return std::tie(a);
  } else if constexpr (n == 2) {
    const auto& [a, b] = x;
    return std::tie(a, b);
  } else if constexpr (n == 3) {
    const auto& [a, b, c] = x;
    return std::tie(a, b, c);
  } else if constexpr (n == 4) {
    const auto& [a, b, c, d] = x;
    return std::tie(a, b, c, d);
  } else if constexpr (n == 5) {
    const auto& [a, b, c, d, e] = x;
    return std::tie(a, b, c, d, e);
  } else if constexpr (n == 6) {
    const auto& [a, b, c, d, e, f] = x;
    return std::tie(a, b, c, d, e, f);
  } else if constexpr (n == 7) {
    const auto& [a, b, c, d, e, f, g] = x;
    return std::tie(a, b, c, d, e, f, g);
  } else {
    const auto& [a, b, c, d, e, f, g, h] = x;
    return std::tie(a, b, c, d, e, f, g, h);
  }
}

}  // namespace detail

// Whether two parameter aggregates hold the same values, field by field.
template <class Params>
bool same_params(const Params& x, const Params& y) {
  return detail::fields_of(x) == detail::fields_of(y);
}

// Variant parameters: the source's for variant 0, else drawn by `make` (redrawn while they equal
// the source's, so every variant N > 0 has other numbers).
template <class Params, class Make>
Params variant_params(VariantDraw& draw, const Params& source, Make&& make) {
  if (draw.source()) return source;
  for (int attempt = 0; attempt < 64; ++attempt) {
    Params params = make(draw);
    if (!same_params(params, source)) return params;
  }
  return make(draw);
}
// The same with Params' defaults as the source's numbers and Params::drawn as `make`.
template <class Params>
Params variant_params(VariantDraw& draw) {
  return variant_params(draw, Params{}, &Params::drawn);
}

// P GPUs holding n tokens each (S = P n): the parameters of the causal-balance exercises.
struct RanksTokens {
  int64_t ranks = 0, tokens_per_rank = 0;
  int64_t seq() const { return ranks * tokens_per_rank; }
  // The numbers P and n, and the rows P ("GPUs") and S (`seq_meaning`), as these exercises give them.
  void write_parameters(Exercise& e, std::string seq_meaning) const;
};
// `source` for variant 0; else P drawn from `ranks`, then n from `tokens` (variant_params).
RanksTokens draw_ranks_tokens(VariantDraw& draw, const RanksTokens& source, std::initializer_list<int64_t> ranks,
                              std::initializer_list<int64_t> tokens);

// ---- [machines] --------------------------------------------------------------------------------

// A GPU and its link as the timing questions (overlap-threshold, overlap-profile) state them.
// Names are string_views so that == compares their text: a string literal's address differs
// between translation units when the compiler does not merge them (it does not under ASan).
struct Machine {
  std::string_view name;
  double flops;                // dense bf16 FLOP/s
  double link;                 // bytes/s, one direction
  std::string_view link_note;  // where the link figure comes from
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
  std::vector<int64_t> rank_pairs;          // [P]: with skipping
  std::vector<int64_t> rank_pairs_no_skip;  // [P]: every block computed in full
  std::vector<int64_t> rank_skipped;        // [P]: blocks skipped
  int64_t slowest_rank = 0;                 // argmax of rank_pairs (the first one)
  int64_t max_pairs() const;
  int64_t max_pairs_no_skip() const;
  double speedup() const;  // max no-skip / max skip
};
CausalWork causal_work(const AttentionDims& dims, int64_t ranks, LayoutKind layout, int64_t block = 0);

// Visible causal pairs of each rank's queries (against all keys), from the layout's closed forms.
std::vector<int64_t> causal_pairs_per_rank(const Layout& layout);

}  // namespace ringlab::exercises::catalog
