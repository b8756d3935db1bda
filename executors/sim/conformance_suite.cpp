// The conformance suite's cases and their case.json (the format: cli/ringlab/conformance_command.cpp).
// Sections: [cases] [tolerances] [building]
#include "executors/sim/conformance_suite.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <stdexcept>

#include "executors/sim/sim_executor.hpp"
#include "reference/error.hpp"
#include "reference/exact_attention.hpp"
#include "reference/inputs.hpp"
#include "reference/precision.hpp"
#include "sim/pipeline/problem.hpp"
#include "sim/plan/plan.hpp"

namespace ringlab {

namespace {

// ---- [cases] ---------------------------------------------------------------------------------

const CaseReport kTe3331{"TransformerEngine #3331",
                         "packed sequences (THD) with p2p context parallelism and tail padding computed wrong "
                         "attention and nondeterministic gradients"};
const CaseReport kTe1930{"TransformerEngine #1930",
                         "with packing and context parallelism a 7-token sequence was treated as 6: the last real "
                         "token of a sequence was dropped"};
const CaseReport kNemo3157{"NeMo Automodel PR #3157",
                           "a ring backward reused the K/V chunk saved at step 0 instead of the rotated ones"};
const CaseReport kPrimeRl2828{"prime-rl PR #2828",
                              "context parallelism silently ignored the sliding window and ran full causal attention"};
const CaseReport kTorch141429{"PyTorch #141429", "non-causal ring attention was broken by default load balancing"};
const CaseReport kTorch152261{"PyTorch #152261",
                              "the unsharded context-parallel output differed from the non-parallel one, and the "
                              "backward with load balancing hit an illegal memory access"};
const CaseReport kTorch189902{"PyTorch PR #189902",
                              "the per-document load balancer split the work 26 vs 62 while the numbers were right"};
const CaseReport kRfa42{"ring-flash-attention #42",
                        "the bf16 backward error grew with the ring size, catastrophic at 4 to 8 ranks"};

constexpr const char* kLargeLogitsNote =
    "the merge written as exp(lse_a) + exp(lse_b) without subtracting the maximum: any implementation that merges that "
    "way fails once a row's lse passes 88, whatever its dtype (kernels keep the lse in fp32; bf16 has fp32's range). "
    "The case is fp32: with bf16 inputs the keys' shared large component makes dq's rounding error relative to |k| "
    "(about 20) rather than to dq, which the elementwise bound does not model";

ConformanceCase make(std::string name, std::string title, std::vector<CaseReport> reports, int64_t seq, int64_t ranks,
                     std::string layout, bool causal) {
  ConformanceCase c;
  c.name = std::move(name), c.title = std::move(title), c.stands_for = std::move(reports);
  c.dims.seq = seq, c.ranks = ranks, c.layout = std::move(layout), c.causal = causal;
  return c;
}

ConformanceCase with_docs(ConformanceCase c, std::vector<int64_t> documents) {
  c.documents = std::move(documents);
  return c;
}

std::vector<ConformanceCase> quick_cases() {
  std::vector<ConformanceCase> cases;
  auto add = [&](ConformanceCase c) {
    c.seed = 2400 + cases.size();
    cases.push_back(std::move(c));
  };
  // Direction and staleness bugs: the same causal zig-zag problem at P = 2, 3, 4 (a dK/dV sent the
  // wrong way round the ring is right at P = 2, where both ways are the same neighbour).
  for (int64_t p : {2, 3, 4}) {
    add(make("causal-zigzag-p" + std::to_string(p),
             "causal zig-zag ring at P=" + std::to_string(p) + (p == 2 ? " (direction bugs hide here)" : ""),
             {kNemo3157}, 24 * p, p, "zigzag", true));
    if (p == 2) {
      cases.back().stands_for_note =
          "at P=2 a rank's only peer is both its next and its previous rank: dK/dV sent against the K/V "
          "direction land on the right rank, so compare with the P>=3 cases";
    }
  }
  add(make("causal-contiguous-p3", "causal contiguous ring at P=3 (the unbalanced layout)", {kNemo3157}, 48, 3,
           "contiguous", true));
  // Tail padding: S not divisible by 2P.
  add(make("tail-padding-zigzag-p4", "S=61 is not a multiple of 2P=8: three padding rows at the end", {kTe3331}, 61, 4,
           "zigzag", true));
  add(make("tail-padding-noncausal-zigzag-p3",
           "non-causal, S=40 not a multiple of 2P=6: padding rows are keys nobody may see", {kTe3331}, 40, 3, "zigzag",
           false));
  // Ranks whose chunk holds only padding; rows that see no key.
  add(make("padding-only-rank-contiguous-p8",
           "S=13 over 8 ranks of 2 rows: rank 7 holds only padding, rank 6 one real row; padding rows see no key",
           {kTe3331}, 13, 8, "contiguous", true));
  // Documents: shorter than a chunk, ending on and one past a chunk boundary.
  add(with_docs(make("docs-short-zigzag-p4",
                     "packed documents of 7, 40, 3 and 30 tokens, zig-zag per document: the 3-token document is "
                     "shorter than a chunk, rank 3 holds only its padding",
                     {kTe1930, kTe3331}, 80, 4, "zigzag", true),
                {7, 40, 3, 30}));
  add(with_docs(make("docs-chunk-boundary-contiguous-p4",
                     "contiguous chunks of 24: document 0 ends exactly on a chunk boundary, document 1 one token past "
                     "the next",
                     {kTe1930}, 96, 4, "contiguous", true),
                {24, 25, 47}));
  add(with_docs(make("docs-chunk-boundary-zigzag-p3",
                     "zig-zag per document at P=3: documents of 12 (a multiple of 2P), 13 (one token past), 6 and 7",
                     {kTe1930, kTe3331}, 38, 3, "zigzag", true),
                {12, 13, 6, 7}));
  add(with_docs(make("docs-one-token-noncausal-zigzag-p4",
                     "non-causal documents of 1, 20 and 3 tokens, zig-zag per document: the 1-token document sees only "
                     "itself, most of its chunks are padding",
                     {kTe1930, kTorch141429}, 24, 4, "zigzag", false),
                {1, 20, 3}));
  add(with_docs(make("docs-striped-p4", "striped per document, documents of 9, 2 and 21 tokens", {kTe1930}, 32, 4,
                     "striped", true),
                {9, 2, 21}));
  add(with_docs(make("docs-imbalanced-zigzag-p4",
                     "documents of 37, 5, 90 and 12 tokens, zig-zag per document: the numbers must be right whatever "
                     "the balance (work per rank in case.json)",
                     {kTorch189902}, 144, 4, "zigzag", true),
                {37, 5, 90, 12}));
  // Windows: crossing shard boundaries, shorter than a chunk, non-causal.
  ConformanceCase w = make("window-crosses-shards-contiguous-p4",
                           "causal window 40 over contiguous chunks of 32: every window crosses into the previous rank",
                           {kPrimeRl2828}, 128, 4, "contiguous", true);
  w.window = 40;
  add(w);
  w = make("window-shorter-than-chunk-zigzag-p4", "causal window 5 with zig-zag chunks of 16", {kPrimeRl2828}, 128, 4,
           "zigzag", true);
  w.window = 5;
  add(w);
  w = make("window-noncausal-zigzag-p3", "non-causal window 9 (|i-j| < 9), zig-zag at P=3", {kPrimeRl2828}, 96, 3,
           "zigzag", false);
  w.window = 9;
  add(w);
  w = with_docs(make("window-docs-zigzag-p4", "causal window 6 inside packed documents of 30, 11 and 23 tokens",
                     {kPrimeRl2828, kTe1930}, 64, 4, "zigzag", true),
                {30, 11, 23});
  w.window = 6;
  add(w);
  // Non-causal with the load-balanced layout.
  add(make("noncausal-zigzag-p4", "non-causal attention on the load-balanced (zig-zag) layout",
           {kTorch141429, kTorch152261}, 64, 4, "zigzag", false));
  add(make("noncausal-zigzag-p3", "non-causal zig-zag at P=3", {kTorch141429, kTorch152261}, 60, 3, "zigzag", false));
  // GQA with fewer K/V heads than ranks.
  ConformanceCase g = make("gqa-hkv1-zigzag-p4", "GQA: 4 query heads share 1 K/V head, P=4", {}, 64, 4, "zigzag", true);
  g.dims.heads = 4, g.dims.kv_heads = 1;
  g.stands_for_note =
      "no single report: with HKV < P a head-sharded (Ulysses) step cannot give every rank a K/V head, and a ring "
      "must sum dK/dV over the query heads of a group";
  add(g);
  g = make("gqa-hkv2-zigzag-p3", "GQA: 6 query heads in 2 groups, P=3", {}, 48, 3, "zigzag", true);
  g.dims.heads = 6, g.dims.kv_heads = 2;
  g.stands_for_note = cases.back().stands_for_note;
  add(g);
  // Large logits: lse near 100, past float32's exp range (e^88).
  ConformanceCase big = make("large-logits-zigzag-p4",
                             "every score shifted up by about 100: exp(lse) overflows float32, an unshifted exp merge "
                             "gives inf or NaN",
                             {}, 64, 4, "zigzag", true);
  big.logit_shift = 100;
  big.stands_for_note = kLargeLogitsNote;
  add(big);
  // bf16 as P grows.
  for (int64_t p : {4, 8}) {
    ConformanceCase b = make("bf16-zigzag-p" + std::to_string(p), "bf16, causal zig-zag at P=" + std::to_string(p),
                             {kRfa42}, 32 * p, p, "zigzag", true);
    b.dtype = "bf16", b.dims.heads = 2, b.dims.dim = 32;
    add(b);
  }
  return cases;
}

std::vector<ConformanceCase> full_cases() {
  std::vector<ConformanceCase> cases = quick_cases();
  auto add = [&](ConformanceCase c) {
    c.seed = 2400 + cases.size();
    c.dims.heads = std::max<int64_t>(c.dims.heads, 4), c.dims.kv_heads = std::max<int64_t>(c.dims.kv_heads, 4);
    c.dims.dim = 64;
    cases.push_back(std::move(c));
  };
  add(with_docs(make("docs-300-500-200-zigzag-p4", "documents of 300, 500 and 200 tokens, zig-zag per document at P=4",
                     {kTe1930, kTorch189902}, 1000, 4, "zigzag", true),
                {300, 500, 200}));
  add(make("causal-zigzag-p8-s1024", "causal zig-zag at P=8, S=1024", {kNemo3157}, 1024, 8, "zigzag", true));
  add(make("tail-padding-zigzag-p8-s1001", "S=1001 over 2P=16 chunks", {kTe3331}, 1001, 8, "zigzag", true));
  ConformanceCase w = make("window-256-zigzag-p8", "causal window 256 at S=2048, zig-zag chunks of 128", {kPrimeRl2828},
                           2048, 8, "zigzag", true);
  w.window = 256;
  add(w);
  add(make("noncausal-zigzag-p8", "non-causal zig-zag at P=8, S=1024", {kTorch141429, kTorch152261}, 1024, 8, "zigzag",
           false));
  for (int64_t p : {8, 16}) {
    ConformanceCase b = make("bf16-zigzag-p" + std::to_string(p) + "-s2048", "bf16 causal zig-zag, S=2048", {kRfa42},
                             2048, p, "zigzag", true);
    b.dtype = "bf16";
    add(b);
  }
  ConformanceCase bd = with_docs(make("bf16-docs-zigzag-p16", "bf16, documents of 700, 13, 1200 and 135 tokens at P=16",
                                      {kRfa42, kTe1930}, 2048, 16, "zigzag", true),
                                 {700, 13, 1200, 135});
  bd.dtype = "bf16";
  add(bd);
  ConformanceCase big =
      make("large-logits-zigzag-p8-s1024", "scores shifted up by about 100, P=8, S=1024", {}, 1024, 8, "zigzag", true);
  big.logit_shift = 100;
  big.stands_for_note = kLargeLogitsNote;
  add(big);
  return cases;
}

// ---- [tolerances] ----------------------------------------------------------------------------

Precision dtype_precision(const std::string& dtype) { return parse_precision(dtype, "dtype"); }

// The RMS criterion of low-precision cases: this many times the single-device RMS error. A ring
// that accumulates in fp32 measures 1.16 to 1.24 times it at P = 2 to 32 (flat in P); one that
// rounds its accumulators to bf16 after every merge 1.4 to 2.1 times at P = 8 and 1.7 to 2.8 times
// at P = 16 (dk and dv the highest: `ringlab run --precision bf16 --accumulate storage`).
constexpr double kRmsGrowth = 1.5;

// Scores shifted up by L: a float32 score s = scale q.k carries a rounding error of about
// eps scale sum_d |q_d k_d|, which grows with L, and every weight exp(s - lse) carries it as a
// relative error, and so does everything computed from the weights. The base tolerances hold for
// |s| up to about 10 (N(0, 1) inputs); out, dq, dk and dv get 1 + L / 10 times them (lse's
// relative term grows with it by itself). ringlab's own float32 run of a shift of 100 at D = 64
// uses 189% of the unscaled out tolerance and 17% of the scaled one.
double logit_factor(double logit_shift) { return 1 + std::max(0.0, logit_shift) / 10; }

}  // namespace

std::vector<ConformanceCase> conformance_suite(const std::string& suite) {
  if (suite == "quick") return quick_cases();
  if (suite == "full") return full_cases();
  throw UsageError("unknown suite '" + suite + "'; use --suite quick or --suite full");
}

Tolerance case_tolerance(const std::string& dtype, int64_t ranks, const std::string& tensor, double logit_shift) {
  (void)ranks;  // a correct implementation's error does not grow with P (case_tolerance_why)
  Tolerance t = precision_tolerance(dtype_precision(dtype), tensor);
  if (tensor != "lse") t.abs *= logit_factor(logit_shift), t.rel *= logit_factor(logit_shift);
  return t;
}

std::string case_tolerance_why(const std::string& dtype, int64_t ranks, double logit_shift) {
  const Precision precision = dtype_precision(dtype);
  std::string why =
      "elementwise |actual - oracle| <= abs + rel |oracle|, against float64 attention on the case's own inputs (the "
      "dtype's values: rounding the inputs is the problem posed, not an error of the implementation). ";
  if (precision == Precision::fp32) {
    why +=
        "fp32: a float32 kernel with fp32 accumulation (IEEE float32 products, no TF32) has an output error of a "
        "few float32 ulps times the row's magnitudes; out and lse get abs 2e-5 with rel 1e-4 (out) and 1e-5 (lse), "
        "dq, dk, dv abs 1e-4 rel 1e-3 (their sums cancel: dS = P (dP - delta), so an element's error is relative to "
        "the terms summed, not to itself). ringlab's own float32 kernels and schedules use a few percent of these; "
        "a wrong block, a missing rescale or a misrouted gradient is orders of magnitude above them.";
  } else {
    const double u = unit_roundoff(precision);
    char text[2048];
    std::snprintf(text, sizeof text,
                  "%s: unit roundoff u = %.3g. Kernels compute in fp32 and store in %s: the final rounding of an "
                  "output (<= u |x|), the rounding of each ring step's partial result before it is merged (a "
                  "convex combination of errors <= u: <= u again) and the kernel's rounding of P and dS before "
                  "its GEMMs (relative errors <= u that average out over a row's keys) bound out by about 2u |out|; "
                  "abs = rel = 8u = %.3g leaves room for the gradients' cancellation (abs covers elements of order "
                  "1, as the N(0,1) inputs give). This tolerance does not depend on P: an implementation that "
                  "accumulates out, dq and the travelling dK/dV in fp32 has an error flat in P (ringlab's precision "
                  "study: 1.16 to 1.24 times the single-device RMS error from P=2 to P=32). An elementwise bound "
                  "is too coarse to see an error that grows with P (accumulators rounded to %s after every merge "
                  "stay within 8u up to P=16 and beyond), so out, dq, dk and dv also carry an RMS bound: rms = "
                  "%.1f times rms_single_device, the RMS error of the same problem on one device computed with "
                  "these rounding points (ringlab's sim executor at P=1). fp32 accumulators stay below it at every "
                  "P; %s accumulators cross it from about P=8 (dk, dv: 1.9 to 2.1 times at P=8, 2.5 to 2.8 at "
                  "P=16; P=%lld here). An implementation whose own single-device error is larger (scores or "
                  "softmax rounded to %s) fails the RMS bound at every P, which running the case on one rank "
                  "shows. lse stays fp32 (every kernel returns it in fp32): the fp32 tolerance, abs 2e-5 rel 1e-5, "
                  "no RMS bound.",
                  precision_name(precision), u, precision_name(precision), 8 * u, precision_name(precision), kRmsGrowth,
                  precision_name(precision), static_cast<long long>(ranks), precision_name(precision));
    why += text;
  }
  if (logit_shift > 0) {
    char text[512];
    std::snprintf(text, sizeof text,
                  " Scores here are shifted up by about %.0f: a float32 score carries a rounding error of about eps "
                  "scale sum_d |q_d k_d|, which grows with the shift, and every softmax weight carries it as a "
                  "relative error; the bounds above hold for scores up to about 10, so out, dq, dk and dv get %.0f "
                  "times them (1 + shift / 10; lse's relative term grows with it by itself).",
                  logit_shift, logit_factor(logit_shift));
    why += text;
  }
  return why;
}

RunConfig case_config(const ConformanceCase& c) {
  RunConfig config;
  config.algo = "ring";
  config.layout = c.layout;
  config.ranks = c.ranks;
  config.dims = c.dims;
  config.causal = c.causal;
  config.window = c.window;
  if (c.window > 0) config.sizes_given.emplace_back("--window");
  config.docs = documents_string(c.documents, c.documents.size());
  config.backward = true;
  config.seed = c.seed;
  config.precision = c.dtype;
  config.accumulate = "fp32";
  config.progress = false;
  return resolve_problem(config).config;  // --docs laid out for the layout, as a run does
}

// ---- [building] ------------------------------------------------------------------------------

namespace {

// The inputs: ringlab's generated N(0, 1) values, the logit shift added to q's and k's first
// coordinate (scale a^2 = shift: every score rises by about the shift), rounded to the dtype.
AttentionInputs<float> case_inputs(const ConformanceCase& c) {
  AttentionInputs<float> x = make_inputs(c.dims, c.seed, true);
  if (c.logit_shift > 0) {
    const auto a = static_cast<float>(std::sqrt(c.logit_shift / c.dims.scale()));
    for (Tensor<float>* t : {&x.q, &x.k})
      for (int64_t i = 0; i < t->size(); i += c.dims.dim) (*t)[i] += a;
  }
  const Precision precision = dtype_precision(c.dtype);
  round_tensor(x.q, precision, "q");
  round_tensor(x.k, precision, "k");
  round_tensor(x.v, precision, "v");
  round_tensor(x.dout, precision, "dout");
  return x;
}

// Low precision: the RMS error of each output of the same problem on one device — ringlab's sim
// executor at P = 1 with the dtype's rounding points (a FlashAttention-style kernel: fp32
// arithmetic, P and dS rounded before their GEMMs, outputs stored in the dtype). Empty for fp32.
std::map<std::string, double> single_device_rms(const ConformanceCase& c, const AttentionInputs<float>& x,
                                                const ReferenceOutputs& oracle) {
  std::map<std::string, double> rms;
  if (c.dtype == "fp32") return rms;
  ConformanceCase one = c;
  one.ranks = 1, one.layout = "contiguous";
  const RunConfig config = case_config(one);
  const Plan plan = build_plan(plan_spec(config));
  SimExecutor sim;
  sim.configure(config);
  const ExecutionResult result = sim.execute(plan, x, {});
  if (result.failure) throw std::runtime_error("conformance case " + c.name + ": the single-device run failed");
  for (const TensorCheck& check : verify(result.outputs, oracle, "sim").checks)
    rms[check.name] = check.result.rms_error;
  return rms;
}

nlohmann::json reports_json(const ConformanceCase& c) {
  nlohmann::json reports = nlohmann::json::array();
  for (const CaseReport& r : c.stands_for) reports.push_back({{"report", r.report}, {"what", r.what}});
  return reports;
}

std::string padding_rule(const ConformanceCase& c, const PlanSpec& spec) {
  const int64_t P = c.ranks;
  std::string rule;
  if (spec.padded_documents()) {
    const int64_t granule = c.layout == "zigzag" ? 2 * P : P;
    rule = "each document padded at its end to a multiple of " + std::to_string(granule) + " (" +
           (c.layout == "zigzag" ? "2P: 2P chunks per document" : "P: one row per rank per round") +
           "), as TransformerEngine pads THD sequences; the padded documents are then laid out one after another";
  } else if (spec.padding > 0) {
    rule = "S padded at its end to a multiple of " + std::to_string(c.layout == "zigzag" ? 2 * P : P) +
           ", then laid out as if the padding were tokens";
  } else {
    rule = "none: S fits the layout";
  }
  return rule + ". A padding row holds zeros in q, k, v and dout, sees no key and is seen by no query.";
}

}  // namespace

CaseData build_case(const ConformanceCase& c) {
  const RunConfig config = case_config(c);
  const PlanSpec spec = plan_spec(config);
  const Plan plan = build_plan(spec);
  const int64_t P = c.ranks;
  CaseData data;
  data.inputs = case_inputs(c);
  data.oracle = compute_reference(data.inputs.cast<double>(), config.mask(), true);

  // The layout in the user's positions, and the ring's blocks.
  const std::vector<int64_t> user = spec.user_positions();
  nlohmann::json positions = nlohmann::json::array();
  std::vector<std::vector<int64_t>> plan_rows(static_cast<size_t>(P));
  for (int64_t r = 0; r < P; ++r) {
    plan_rows[static_cast<size_t>(r)] = plan.layout().positions(r);
    nlohmann::json rows = nlohmann::json::array();
    for (int64_t p : plan_rows[static_cast<size_t>(r)]) rows.push_back(user[static_cast<size_t>(p)]);
    positions.push_back(rows);
  }
  nlohmann::json origin = nlohmann::json::array(), pairs = nlohmann::json::array(), per_rank = nlohmann::json::array();
  int64_t most = 0, total = 0;
  for (int64_t r = 0; r < P; ++r) {
    nlohmann::json o = nlohmann::json::array(), n = nlohmann::json::array();
    int64_t sum = 0;
    for (int64_t t = 0; t < P; ++t) {
      const int64_t s = ((r - t) % P + P) % P;
      const int64_t count = plan.mask().pairs(plan_rows[static_cast<size_t>(r)], plan_rows[static_cast<size_t>(s)]);
      o.push_back(s), n.push_back(count), sum += count;
    }
    origin.push_back(o), pairs.push_back(n), per_rank.push_back(sum);
    most = std::max(most, sum), total += sum;
  }
  const double mean = static_cast<double>(total) / static_cast<double>(P);

  nlohmann::json tolerances = nlohmann::json::object();
  const std::map<std::string, double> single = single_device_rms(c, data.inputs, data.oracle);
  for (const char* tensor : kCaseTensors) {
    const Tolerance t = case_tolerance(c.dtype, P, tensor, c.logit_shift);
    tolerances[tensor] = {{"abs", t.abs}, {"rel", t.rel}};
    if (!single.empty() && std::string(tensor) != "lse") {
      tolerances[tensor]["rms_single_device"] = single.at(tensor);
      tolerances[tensor]["rms"] = kRmsGrowth * single.at(tensor);
    }
  }
  tolerances["compare"] =
      "an output passes when every element has |actual - oracle| <= abs + rel * |oracle| and, where \"rms\" is "
      "given, sqrt(mean((actual - oracle)^2)) over the tensor <= rms; over every element of the global out, lse, "
      "dq, dk, dv (padding rows are not part of them); NaN or inf never passes";
  tolerances["why"] = case_tolerance_why(c.dtype, P, c.logit_shift);

  nlohmann::json j;
  j["format"] = kCaseFormat;
  j["name"] = c.name;
  j["title"] = c.title;
  j["stands_for"] = reports_json(c);
  if (!c.stands_for_note.empty()) j["stands_for_note"] = c.stands_for_note;
  j["B"] = c.dims.batch, j["S"] = c.dims.seq, j["H"] = c.dims.heads, j["HKV"] = c.dims.kv_heads, j["D"] = c.dims.dim;
  j["dtype"] = c.dtype;
  j["causal"] = c.causal;
  j["documents"] = c.documents;
  j["window"] = c.window;
  j["scale"] = c.dims.scale();
  j["lse_base"] = "e";
  j["P"] = P;
  j["layout"] = {{"name", c.layout},
                 {"per_document", c.documents.size() > 1 && c.layout != "contiguous"},
                 {"rows_per_rank", spec.dims.seq / P},
                 {"padding_rule", padding_rule(c, spec)},
                 {"positions", positions}};
  j["padding"] = {{"rows", spec.padding_tokens()}, {"rule", padding_rule(c, spec)}};
  // cu_seqlens of the documents, and of the padded documents the ranks hold (THD adapters).
  std::vector<int64_t> cu{0}, cu_padded{0};
  const std::vector<int64_t> spans =
      plan.mask().has_documents() ? plan.mask().document_lengths() : std::vector<int64_t>{spec.dims.seq};
  for (const int64_t length : c.documents.empty() ? std::vector<int64_t>{c.dims.seq} : c.documents)
    cu.push_back(cu.back() + length);
  for (const int64_t length : spans) cu_padded.push_back(cu_padded.back() + length);
  if (plan.mask().has_documents()) cu_padded.back() += spec.padding;  // tail padding after the last document
  j["cu_seqlens"] = cu;
  j["cu_seqlens_padded"] = cu_padded;
  j["no_key_rows"] =
      "every real row sees at least one key (a causal row sees itself, a row its own document), so the global "
      "out and lse have no row that sees none; the rows that see no key are padding rows (position -1). The harness "
      "never compares them. An implementation should give them out 0 and lse -inf (ringlab's convention) or any "
      "finite out, and must not let them leak: their dout is 0, but a NaN out there makes delta = rowsum(dout * out) "
      "NaN and poisons dk and dv of real rows, which the tolerances catch";
  j["tolerances"] = tolerances;
  j["ring"] = {{"direction",
                "K/V blocks travel from rank r to rank (r + 1) mod P, one hop per step; at step t rank r computes its "
                "rows against the block of rank (r - t) mod P (step 0: its own)"},
               {"steps", P},
               {"kv_origin", origin},
               {"pairs", pairs},
               {"dkv",
                "backward: the dK/dV accumulator of the block rank r holds at step t travels with that block (to rank "
                "r + 1) and, after step P-1, takes one more hop home to kv_origin; dK/dV sent the opposite way add "
                "gradients to the wrong block for P >= 3 (at P = 2 both ways reach the same rank)"}};
  j["work"] = {{"pairs_per_rank", per_rank},
               {"imbalance", mean > 0 ? static_cast<double>(most) / mean : 1.0},
               {"what", "visible (query, key) pairs per (batch, head) of each rank's rows over all steps"}};
  j["inputs"] = {
      {"seed", c.seed},
      {"distribution",
       std::string("standard normal, each element a pure function of (seed, tensor, index) (ringlab's generator), ") +
           (c.logit_shift > 0 ? "plus a on q's and k's first coordinate (scale a^2 = logit_shift), " : "") +
           "rounded to " + c.dtype},
      {"logit_shift", c.logit_shift}};
  data.json = j;
  return data;
}

}  // namespace ringlab
