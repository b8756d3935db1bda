// The run pipeline. Sections: [problem, inputs and plan] [uneven shapes] [execution] [failure] [report]
//                             [pipeline]
#include "sim/pipeline/pipeline.hpp"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <thread>

#include "reference/error.hpp"
#include "reference/layout.hpp"
#include "sim/pipeline/inputs.hpp"
#include "sim/pipeline/output_files.hpp"
#include "sim/pipeline/progress.hpp"
#include "sim/pipeline/tables.hpp"
#include "sim/plan/check.hpp"
#include "sim/plan/queries.hpp"

namespace ringlab {

namespace {

int64_t host_cores() { return std::max<int64_t>(1, std::thread::hardware_concurrency()); }

// ---- [problem, inputs and plan] -------------------------------------------------------------

// Refuses, before anything is allocated (the plan included), a problem the executor cannot
// finish on this machine: one line with what it would take, pointing to the cost model.
void refuse_what_cannot_finish(const Executor& executor, const Problem& problem, const PipelineNeeds& needs,
                               const PipelineOptions& options) {
  const ExecutionCost cost = executor.cost(problem.plan_spec(needs.element_bytes));
  if (cost.refusal.empty()) return;
  throw UsageError(cost.refusal + "; " + options.tool + " run --dry-run costs it without running it");
}

// The inputs of the resolved problem: the --in files when it has them (already read), else
// generated from the seed; rounded to the executor's precision.
AttentionInputs<double> problem_inputs(std::optional<AttentionInputs<double>> files, const Problem& problem,
                                       const Executor& executor) {
  AttentionInputs<double> inputs = files ? std::move(*files) : generate_inputs(problem);
  executor.prepare_inputs(inputs);
  return inputs;
}

Plan make_plan(const Problem& problem, const PipelineNeeds& needs) {
  return build_plan(problem.plan_spec(needs.element_bytes));  // the executor's precision on the wire and in memory
}

// A plan the checker finds wrong is ringlab's bug — unless it is an erratum variant, which is
// wrong by construction and runs so that its error can be seen.
PlanCheck check_or_refuse(const Plan& plan) {
  PlanCheck check = check_plan(plan);
  if (!check.ok() && plan.spec().erratum == Erratum::none) {
    throw UsageError("the plan checker refused this plan: " + check.findings.front().describe() +
                     "; this is a bug in ringlab's plan for these flags, please report it");
  }
  return check;
}

// ---- [uneven shapes] -------------------------------------------------------------------------

// When S does not fit the layout, the plan covers S + padding tokens (PlanSpec::padding at the
// end, PlanSpec::document_padding at the end of each document) whose rows the mask hides: the
// inputs' rows are scattered to the plan's positions of the real tokens (PlanSpec::token_positions)
// with zero rows between, and the outputs gathered back from there. A padded row sees no key and
// no query sees it, so its out is 0 and its lse -inf, as the padded reference says.
template <class T>
Tensor<T> padded(const Tensor<T>& t, int axis, int64_t rows, std::span<const int64_t> positions, T fill = T(0)) {
  if (t.empty()) return t;
  Shape shape = t.shape();
  shape[static_cast<size_t>(axis)] = rows;
  Tensor<T> result(shape, fill);
  scatter_rows(t, positions, axis, result);
  return result;
}

template <class T>
Tensor<T> padded(const Tensor<T>& t, int axis, int64_t rows, T fill = T(0)) {
  return padded(t, axis, rows, iota_positions(t.empty() ? 0 : t.dim(axis)), fill);
}

template <class T>
Tensor<T> cropped(const Tensor<T>& t, int axis, std::span<const int64_t> positions) {
  if (t.empty() || t.dim(axis) == static_cast<int64_t>(positions.size())) return t;
  return gather_rows(t, positions, axis);
}

template <class T>
Tensor<T> cropped(const Tensor<T>& t, int axis, int64_t rows) {
  return cropped(t, axis, iota_positions(rows));
}

// The plan's problem from the user's: tokens (axis 1) and heads (axis 2) padded with zeros.
AttentionInputs<double> padded_inputs(const AttentionInputs<double>& x, const PlanSpec& spec) {
  const AttentionDims& d = spec.dims;
  const std::vector<int64_t> at = spec.token_positions();
  return {padded(padded(x.q, 1, d.seq, at), 2, d.heads), padded(padded(x.k, 1, d.seq, at), 2, d.kv_heads),
          padded(padded(x.v, 1, d.seq, at), 2, d.kv_heads), padded(padded(x.dout, 1, d.seq, at), 2, d.heads)};
}

// Padding tokens see nothing: out 0, lse -inf, no gradient. (Padding heads are only diagnosed
// for their real rows: the diagnosis runs without head padding, see run_pipeline.)
ReferenceOutputs padded_reference(const ReferenceOutputs& r, const PlanSpec& spec) {
  const double none = -std::numeric_limits<double>::infinity();
  const int64_t seq = spec.dims.seq;
  const std::vector<int64_t> at = spec.token_positions();
  return {{padded(r.forward.out, 1, seq, at), padded(r.forward.lse, 2, seq, at, none)},
          {padded(r.grads.dq, 1, seq, at), padded(r.grads.dk, 1, seq, at), padded(r.grads.dv, 1, seq, at)}};
}

// The user's problem from the plan's outputs: tokens and heads cut back to d.
void crop_outputs(RunOutputs& o, const PlanSpec& spec, const AttentionDims& d) {
  const std::vector<int64_t> at = spec.token_positions();
  o.out = cropped(cropped(o.out, 1, at), 2, d.heads), o.lse = cropped(cropped(o.lse, 2, at), 1, d.heads);
  o.dq = cropped(cropped(o.dq, 1, at), 2, d.heads);
  o.dk = cropped(cropped(o.dk, 1, at), 2, d.kv_heads), o.dv = cropped(cropped(o.dv, 1, at), 2, d.kv_heads);
}

// ---- [execution] -----------------------------------------------------------------------------

ExecutionResult execute_with_progress(Executor& executor, const Plan& plan, const AttentionInputs<float>& inputs,
                                      const RunConfig& config, const PipelineNeeds& needs) {
  std::atomic<int64_t> ops_done{0};
  ExecuteOptions options;
  options.trace = !config.trace_file.empty();
  if (!needs.counts_progress) return executor.execute(plan, inputs, options);
  options.ops_done = &ops_done;
  cli::ProgressBar progress(ops_done, total_ops(plan), config.progress && !config.json);
  return executor.execute(plan, inputs, options);
}

// A second run with every compute block checked on its own, to name where the error enters.
std::vector<BlockError> diagnose(Executor& executor, const Plan& plan, const AttentionInputs<float>& x,
                                 const AttentionInputs<double>& inputs, const ReferenceOutputs& reference) {
  ExecuteOptions options;
  options.diagnose_inputs = &inputs;
  options.diagnose_reference = &reference;
  return executor.execute(plan, x, options).block_errors;
}

// The same problem on one rank, the executor configured the same (low precision: the error the
// distributed run is read against). Nothing when it does not complete.
std::optional<Verification> single_rank(Executor& executor, const Problem& problem, const PipelineNeeds& needs,
                                        const AttentionInputs<double>& inputs, const ReferenceOutputs& reference) {
  Problem one = problem;
  one.config.ranks = 1, one.config.algo = "ring", one.config.layout = "contiguous", one.config.block = 0;
  one.config.ulysses = 0;
  const Plan plan = make_plan(one, needs);
  const ExecutionResult result = executor.execute(plan, inputs.cast<float>(), {});
  if (result.failure) return std::nullopt;
  return verify(result.outputs, reference, result.executor, needs.tolerance);
}

// ---- [failure] -------------------------------------------------------------------------------

// A deadlock or a communication fault: one line on the error stream (or the report as it is,
// when it has the per-rank lines of a deadlock), and with --json one object on the output.
int report_failure(const RunFailure& failure, const Plan& plan, const RunConfig& config, bool reports,
                   std::ostream& out, std::ostream& err, const std::string& prefix) {
  if (config.json && reports) {
    out << nlohmann::json{{"command", "run"},
                          {"config", plan.spec().describe()},
                          {"status", failure_kind_name(failure.kind)},
                          {"report", failure.description},
                          {"exit_status", failure.exit_status}}
               .dump()
        << "\n";
  }
  err << prefix << failure.description << "\n";
  return failure.exit_status;
}

// ---- [report] --------------------------------------------------------------------------------

void add_time(nlohmann::json& summary, const RunTime& time) {
  switch (time.kind) {
    case TimeKind::wall_clock: summary["wall_seconds"] = time.seconds; break;
    case TimeKind::device: summary["device_ms"] = time.seconds * 1e3; break;
    case TimeKind::predicted: summary["predicted_seconds"] = time.seconds; break;
  }
}

// The wall clock of virtual ranks sharing the CPU is no measurement worth a line (the table's busy
// and blocked columns are); device and predicted times are.
void print_time(std::ostream& out, const RunTime& time) {
  char line[128];
  switch (time.kind) {
    case TimeKind::wall_clock: return;
    case TimeKind::device:
      std::snprintf(line, sizeof line, "device time: %.3f ms (CUDA events, first to last)\n", time.seconds * 1e3);
      break;
    case TimeKind::predicted:
      std::snprintf(line, sizeof line, "predicted time: %.6f s (cost model)\n", time.seconds);
      break;
  }
  out << line;
}

struct Verdict {
  const Plan& plan;
  const PlanCheck& check;
  const ExecutionResult& result;
  const Verification& verification;
  const PipelineNeeds& needs;
  int status = kExitVerified;
};

nlohmann::json json_report(const Verdict& v) {
  nlohmann::json summary = {{"command", "run"},
                            {"config", v.plan.spec().describe()},
                            {"executor", v.result.executor},
                            {"plan_check", to_json(v.check)},
                            {"ranks", to_json(v.result.ranks)},
                            {"load_imbalance", to_json(load_imbalance(v.result.ranks))},
                            {"verification", to_json(v.verification)},
                            {"exit_status", v.status}};
  if (!v.needs.dtype.empty()) summary["dtype"] = v.needs.dtype;
  add_time(summary, v.result.time);
  if (!v.result.block_errors.empty()) summary["block_errors"] = to_json(v.result.block_errors);
  if (!v.result.faults.empty()) summary["injected_faults"] = v.result.faults;
  return summary;
}

void print_erratum_findings(std::ostream& out, const PlanCheck& check) {
  if (check.ok()) return;
  out << "plan checker: this erratum variant is wrong by construction; it reports\n";
  for (size_t i = 0; i < check.findings.size() && i < 4; ++i) out << "  " << check.findings[i].describe() << "\n";
  if (check.findings.size() > 4) out << "  ... and " << check.findings.size() - 4 << " more\n";
  out << "\n";
}

void print_report(std::ostream& out, const Verdict& v, const PipelineOptions& options) {
  out << options.tool << " run | " << v.plan.spec().describe() << "\n";
  if (options.executor_line) out << "executor: " << v.result.executor << "\n";
  out << "\n";
  print_erratum_findings(out, v.check);
  print_rank_table(out, v.result.ranks);
  print_load_imbalance(out, load_imbalance(v.result.ranks), static_cast<int64_t>(v.result.ranks.size()),
                       v.result.time.kind, host_cores());
  print_time(out, v.result.time);
  // What --inject did: a silent fault (delay, alter) shows nowhere else.
  for (const std::string& fault : v.result.faults) out << "injected fault " << fault << "\n";
  out << "\n";
  print_verification(out, v.verification);
  if (v.verification.ok()) return;
  out << "\n";
  if (v.needs.diagnoses) {
    print_diagnosis(out, v.plan, v.check, v.result.block_errors);
  } else {
    out << "for the first (rank, step, block) that diverges, run the simulator with the same flags: ringlab run "
           "(its diagnosis checks every block on its own)\n";
  }
}

// An executor that computes no outputs and has no report of its own: what it did, rank by rank.
void print_work(std::ostream& out, const Plan& plan, const ExecutionResult& result, bool json,
                const PipelineOptions& options) {
  if (json) {
    nlohmann::json summary = {{"command", "run"},
                              {"config", plan.spec().describe()},
                              {"executor", result.executor},
                              {"ranks", to_json(result.ranks)},
                              {"load_imbalance", to_json(load_imbalance(result.ranks))},
                              {"exit_status", kExitVerified}};
    add_time(summary, result.time);
    out << summary.dump() << "\n";
    return;
  }
  out << options.tool << " run | " << plan.spec().describe() << "\n";
  out << "executor: " << result.executor << "\n\n";
  print_rank_table(out, result.ranks);
  print_load_imbalance(out, load_imbalance(result.ranks), static_cast<int64_t>(result.ranks.size()), result.time.kind,
                       host_cores());
  print_time(out, result.time);
}

// --inject KIND@RANK:STEP at a step no phase of the plan has would never fire: refused, naming the
// steps there are (the executor parses the rest of the text: a STEP it cannot read is left to it).
void refuse_faults_past_the_plan(const Plan& plan, const std::vector<std::string>& inject) {
  int64_t steps = 0;
  for (const Phase& phase : plan.phases()) steps = std::max(steps, phase.steps);
  for (const std::string& text : inject) {
    const size_t colon = text.rfind(':');
    if (colon == std::string::npos) continue;
    int64_t step = -1;
    const auto [end, error] = std::from_chars(text.data() + colon + 1, text.data() + text.size(), step);
    if (error != std::errc() || end != text.data() + text.size() || step < steps) continue;
    throw UsageError("--inject " + text + ": there is no step " + std::to_string(step) + " in this plan (its phases " +
                     "have steps 0 to " + std::to_string(steps - 1) + "); pick a STEP from 0 to " +
                     std::to_string(steps - 1));
  }
}

}  // namespace

// ---- [pipeline] ------------------------------------------------------------------------------

int run_pipeline(const RunConfig& flags, Executor& executor, std::ostream& out, std::ostream& err,
                 const PipelineOptions& options) {
  validate(flags);
  executor.configure(flags);
  const PipelineNeeds needs = executor.needs();
  if (needs.reports && !flags.save_dir.empty()) check_output_directory(flags.save_dir);
  if (needs.reports && !flags.trace_file.empty()) check_output_file(flags.trace_file);

  // The flags become the problem here, once: with --in, the files' shapes are its sizes.
  std::optional<AttentionInputs<double>> files;
  if (needs.computes_outputs) files = read_input_files(flags);
  const AttentionDims file_dims = files ? input_dims(*files, flags.backward) : AttentionDims{};
  const Problem problem = resolve_problem(flags, files ? &file_dims : nullptr);
  const RunConfig& config = problem.config;
  refuse_what_cannot_finish(executor, problem, needs, options);
  if (needs.computes_outputs) executor.check_sizes(problem.dims());  // before the inputs are generated

  AttentionInputs<double> inputs;
  if (needs.computes_outputs) inputs = problem_inputs(std::move(files), problem, executor);
  const Plan plan = make_plan(problem, needs);
  refuse_faults_past_the_plan(plan, config.inject);
  const PlanCheck check = needs.computes_outputs ? check_or_refuse(plan) : PlanCheck{};
  const int64_t seq = plan.spec().dims.seq, tokens = plan.spec().tokens();
  const bool pads = tokens < seq || plan.spec().padding_heads > 0;
  const AttentionInputs<double> run_inputs = pads ? padded_inputs(inputs, plan.spec()) : inputs;
  const AttentionInputs<float> x = run_inputs.cast<float>();

  ExecutionResult result = execute_with_progress(executor, plan, x, config, needs);
  const int ranks = static_cast<int>(plan.ranks());
  const TraceRun traced{options.tool + " run", result.executor, plan.spec()};  // the trace says what ran
  const std::string prefix = options.error_prefix.empty() ? options.tool + ": " : options.error_prefix;
  if (result.failure) {
    if (needs.reports && !config.trace_file.empty())
      write_chrome_trace(config.trace_file, result.trace, ranks, &traced);
    return report_failure(*result.failure, plan, config, needs.reports, out, err, prefix);
  }
  if (!needs.reports) return kExitVerified;  // rank 0's process verifies and reports for everyone
  if (!needs.computes_outputs) {
    if (!config.trace_file.empty()) write_chrome_trace(config.trace_file, result.trace, ranks, &traced);
    if (!executor.print_own_report(out, plan, result, config.json)) print_work(out, plan, result, config.json, options);
    return kExitVerified;
  }

  const ReferenceOutputs reference = compute_reference(inputs, config.mask(), config.backward);
  if (pads) crop_outputs(result.outputs, plan.spec(), config.dims);  // outputs are exactly (B, S, H, D)
  Verification verification = verify(result.outputs, reference, result.executor, needs.tolerance);
  if (needs.single_rank_baseline && plan.ranks() > 1 && config.inject.empty()) {
    if (const auto one = single_rank(executor, problem, needs, inputs, reference)) verification.add_single_rank(*one);
  }
  // The per-block diagnosis compares against the oracle for the plan's problem: padded tokens have a
  // closed form (nothing); padded heads have none, so a head-padded run is not diagnosed block by block.
  if (!verification.ok() && needs.diagnoses && plan.spec().padding_heads == 0) {
    result.block_errors = tokens < seq
                              ? diagnose(executor, plan, x, run_inputs, padded_reference(reference, plan.spec()))
                              : diagnose(executor, plan, x, inputs, reference);
  }
  if (!config.save_dir.empty()) save_outputs(config.save_dir, result.outputs);
  if (!config.trace_file.empty()) write_chrome_trace(config.trace_file, result.trace, ranks, &traced);

  Verdict verdict{plan, check, result, verification, needs, verification.ok() ? kExitVerified : kExitMismatch};
  if (config.json) {
    out << json_report(verdict).dump() << "\n";
  } else {
    print_report(out, verdict, options);
  }
  return verdict.status;
}

}  // namespace ringlab
