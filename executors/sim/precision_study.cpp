#include "executors/sim/precision_study.hpp"

#include <algorithm>
#include <cstdio>
#include <iterator>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <stdexcept>

#include "executors/sim/sim_executor.hpp"
#include "reference/error.hpp"
#include "sim/pipeline/inputs.hpp"
#include "sim/pipeline/verification.hpp"

namespace ringlab {

const PrecisionStudyRow& PrecisionStudy::row(const std::string& accumulate, int64_t p,
                                             const std::string& tensor) const {
  for (const PrecisionStudyRow& r : rows)
    if (r.accumulate == accumulate && r.ranks == p && r.tensor == tensor) return r;
  throw std::out_of_range("the precision study has no row " + accumulate + " P=" + std::to_string(p) + " " + tensor);
}

namespace {

// The flags at P ranks. One rank runs one step whatever the communication pattern, so P = 1 runs
// as a plain ring: a hybrid's Ulysses degree (2 or more) cannot divide one rank, and would refuse
// the whole study.
RunConfig config_at(RunConfig config, int64_t p) {
  config.ranks = p;
  if (p == 1) config.algo = "ring", config.ulysses = 0;
  return config;
}

// The problem at P ranks, resolved as a run resolves it (--docs against P's layout; the --in
// files' sizes), and its plan's spec.
PlanSpec spec_at(const RunConfig& flags, const AttentionDims* files, int64_t p) {
  const RunConfig at_p = config_at(flags, p);
  const Problem problem = resolve_problem(at_p, files);
  PlanSpec spec = plan_spec(problem.config);
  if (spec.padding_tokens() > 0 || spec.padding_heads > 0) {
    throw UsageError("S=" + std::to_string(problem.dims().seq) + " does not split evenly at P=" + std::to_string(p) +
                     " with --layout " + flags.layout +
                     " and the study does not pad; pick S a multiple of the largest P (2P for zigzag)");
  }
  return spec;
}

// Each tensor's (max, rms) error of one run at P ranks.
Verification run_once(RunConfig config, const AttentionDims* files, int64_t p, const std::string& accumulate,
                      const AttentionInputs<float>& x, const ReferenceOutputs& reference) {
  config.accumulate = accumulate;
  const PlanSpec spec = spec_at(config, files, p);
  SimExecutor executor;
  executor.configure(config_at(config, p));
  const Plan plan = build_plan(spec);
  ExecutionResult result = executor.execute(plan, x, {});
  if (result.failure) {
    if (result.failure->exit_status == kExitUsage) throw UsageError(result.failure->description);
    throw std::runtime_error("P=" + std::to_string(p) + ", accumulate " + accumulate + ": " +
                             result.failure->description);
  }
  return verify(result.outputs, reference, result.executor, executor.needs().tolerance);
}

}  // namespace

PrecisionStudy run_precision_study(RunConfig config, std::vector<int64_t> ranks) {
  const auto start = std::chrono::steady_clock::now();
  if (std::find(ranks.begin(), ranks.end(), 1) == ranks.end()) ranks.push_back(1);
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  if (ranks.front() < 1) {
    throw UsageError("--ranks must list positive rank counts, got " + std::to_string(ranks.front()) +
                     "; e.g. --ranks 1,2,4,8");
  }
  config.backward = true;  // forward and backward errors come from the same runs
  config.accumulate = "fp32";
  validate(config);
  if (config.precision == "fp32") {
    throw UsageError("the precision study compares low-precision storage with float64; pick --precision bf16 or fp16");
  }
  // Every P runs three times, forward and backward, and a run's steps grow as P^2: P = 512 takes
  // about 20 s at the default S, P = 1024 minutes and gigabytes. The study's trends show long
  // before that; one run at a larger P is `ringlab run`'s.
  if (ranks.back() > kMaxStudiedRanks) {
    const std::string p = std::to_string(ranks.back());
    throw UsageError("--ranks " + p + " is too many for the precision study (three runs per P, minutes beyond P=" +
                     std::to_string(kMaxStudiedRanks) + "); use at most --ranks " + std::to_string(kMaxStudiedRanks) +
                     ", or ringlab run -P " + p + " --precision " + config.precision + " --backward for one run");
  }
  SimExecutor executor;
  executor.configure(config);
  std::optional<AttentionInputs<double>> read = read_input_files(config);
  const AttentionDims file_dims = read ? input_dims(*read, true) : AttentionDims{};
  const AttentionDims* files = read ? &file_dims : nullptr;
  // --docs random:N draws its lengths in multiples of the layout's unit, which depends on P
  // (striped deals P tokens a round, zig-zag cuts 2P chunks), so each P would draw other
  // documents and run another mask than the oracle's. Every P runs the largest P's documents: the
  // problem `ringlab run` runs at that P, and the one the study's header names.
  const std::string docs_given = config.docs;
  if (docs_given.rfind("random:", 0) == 0) {
    RunConfig largest = config;
    largest.ranks = ranks.back();
    std::string lengths;
    for (const int64_t length : resolve_problem(largest, files).config.documents)
      lengths += (lengths.empty() ? "" : ",") + std::to_string(length);
    config.docs = lengths;
  }
  for (const int64_t p : ranks) {  // every P checked before any is run
    RunConfig given = config;
    given.docs = docs_given;
    spec_at(given, files, p);  // the flags as given: the run's own refusals
    try {
      spec_at(config, files, p);
    } catch (const UsageError&) {  // only the documents drawn at the largest P do not fit this P
      throw UsageError("--docs " + docs_given + " draws its documents (" + config.docs +
                       ") at the largest P=" + std::to_string(ranks.back()) + ", and --layout " + config.layout +
                       " cannot split them at P=" + std::to_string(p) +
                       "; list rank counts that divide the largest, e.g. --ranks 1,2,4,8");
    }
  }
  RunConfig largest = config;
  largest.ranks = ranks.back();
  const Problem problem = resolve_problem(largest, files);  // the problem at the largest P: the oracle's mask
  AttentionInputs<double> inputs = read ? std::move(*read) : generate_inputs(problem);
  executor.prepare_inputs(inputs);  // rounded to the storage precision: the problem studied
  const AttentionInputs<float> x = inputs.cast<float>();
  const ReferenceOutputs reference = compute_reference(inputs, problem.mask(), true);

  PrecisionStudy study;
  study.precision = config.precision;
  study.ranks = ranks;
  const Verification single = run_once(config, files, 1, "fp32", x, reference);
  for (const std::string accumulate : kStudiedAccumulations) {
    for (const int64_t p : ranks) {
      const Verification v = p == 1 ? single : run_once(config, files, p, accumulate, x, reference);
      for (size_t t = 0; t < v.checks.size(); ++t) {
        const CompareResult& r = v.checks[t].result;
        const CompareResult& one = single.checks[t].result;
        PrecisionStudyRow row{p, accumulate, v.checks[t].name, r.max_abs_error, r.rms_error, 1, 1};
        row.max_ratio = one.max_abs_error > 0 ? r.max_abs_error / one.max_abs_error : 1;
        row.rms_ratio = one.rms_error > 0 ? r.rms_error / one.rms_error : 1;
        study.rows.push_back(row);
      }
    }
  }
  study.config = plan_spec(problem.config).describe() + " | " + config.precision + ", merge " + config.merge;
  study.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return study;
}

void print_precision_study(std::ostream& out, const PrecisionStudy& study) {
  char line[160];
  out << "ringlab study precision | " << study.config << "\n";
  out << "errors against exact attention (float64) on the " << study.precision
      << "-rounded inputs; ratio: this P's error / P=1's\n";
  out << "accumulate fp32: each step's result stored in " << study.precision
      << ", the running output, dq, dK/dV kept in fp32; storage: those rounded to " << study.precision
      << " after every merge; fused: each step added into the fp32 accumulators unrounded\n\n";
  std::snprintf(line, sizeof line, "%4s  %-10s %-6s %11s %11s %8s %8s\n", "P", "accumulate", "tensor", "max_err",
                "rms_err", "max/P=1", "rms/P=1");
  out << line;
  std::string previous;
  for (const PrecisionStudyRow& r : study.rows) {
    const std::string group = r.accumulate + std::to_string(r.ranks);
    if (!previous.empty() && group != previous) out << "\n";
    previous = group;
    std::snprintf(line, sizeof line, "%4lld  %-10s %-6s %11.3e %11.3e %7.2fx %7.2fx\n", static_cast<long long>(r.ranks),
                  r.accumulate.c_str(), r.tensor.c_str(), r.max_error, r.rms_error, r.max_ratio, r.rms_ratio);
    out << line;
  }
  std::snprintf(line, sizeof line, "\n%zu runs in %.1f s\n",
                (study.ranks.size() - 1) * std::size(kStudiedAccumulations) + 1, study.seconds);
  out << line;
}

nlohmann::json to_json(const PrecisionStudy& study) {
  nlohmann::json rows = nlohmann::json::array();
  for (const PrecisionStudyRow& r : study.rows) {
    rows.push_back({{"ranks", r.ranks},
                    {"accumulate", r.accumulate},
                    {"tensor", r.tensor},
                    {"max_abs_error", r.max_error},
                    {"rms_error", r.rms_error},
                    {"max_ratio", r.max_ratio},
                    {"rms_ratio", r.rms_ratio}});
  }
  return {{"command", "study precision"}, {"config", study.config},   {"precision", study.precision},
          {"ranks", study.ranks},         {"seconds", study.seconds}, {"rows", rows}};
}

}  // namespace ringlab
