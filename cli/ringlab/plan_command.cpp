// `ringlab plan`: print a plan as a step x rank grid and check it.
// Exit status: 0 the plan checks clean, 1 the checker found problems (the erratum variants do) or,
// with --strict, the balance lint warned (max/mean FLOPs above --max-imbalance, default 1.10), 2 bad input.
#include <CLI/CLI.hpp>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "cli/ringlab/commands.hpp"
#include "reference/error.hpp"
#include "sim/pipeline/config.hpp"
#include "sim/pipeline/problem.hpp"
#include "sim/plan/check.hpp"
#include "sim/plan/print.hpp"
#include "sim/plan/queries.hpp"

namespace ringlab::cli {

namespace {

struct BalanceLint {
  double max_imbalance = 1.10;  // max/mean FLOPs above which the plan gets a warning
  bool strict = false;          // ... and exit status 1
};

// The balance lint: one warning line when max/mean FLOPs exceed the threshold; true if they do.
bool lint_balance(const Plan& plan, const BalanceLint& lint) {
  std::vector<RankWork> work;
  for (int64_t r = 0; r < plan.ranks(); ++r) work.push_back(rank_work(plan, r, expand(plan, r)));
  const FlopsBalance balance = flops_balance(work);
  if (balance.ratio <= lint.max_imbalance) return false;
  const PlanSpec& spec = plan.spec();
  std::string fix = "--layout balanced assigns work to ranks by the mask";
  if (spec.layout == LayoutKind::contiguous && spec.causal)
    fix =
        spec.documents.size() > 1 ? "--layout zigzag (per document) or balanced share it" : "--layout zigzag shares it";
  char line[320];
  std::snprintf(
      line, sizeof line,
      "warning: max/mean FLOPs %.3f is above --max-imbalance %.2f: rank %lld does %.2fx the mean work; %s%s\n",
      balance.ratio, lint.max_imbalance, static_cast<long long>(balance.busiest), balance.ratio, fix.c_str(),
      lint.strict ? " (--strict: exit 1)" : "");
  std::cout << line;
  return true;
}

// The widest plan printed: the grid has a row per step (P of them in a ring) and the footer a
// line per shown rank from every rank's work, so P = 4096 takes seconds and P = 16384 half a minute.
constexpr int64_t kMaxPrintedRanks = 4096;

int plan_command(const RunConfig& flags, int64_t max_ranks, const BalanceLint& lint) {
  const RunConfig config = resolve_problem(flags).config;
  if (max_ranks < 2) {
    throw UsageError("--show-ranks must be at least 2 (the first and the last rank), got " + std::to_string(max_ranks) +
                     "; e.g. --show-ranks 16");
  }
  if (config.ranks > kMaxPrintedRanks) {
    throw UsageError("ringlab plan prints a row per step: a grid of P=" + std::to_string(config.ranks) +
                     " ranks is too long to read (at most P=" + std::to_string(kMaxPrintedRanks) +
                     "); use ringlab run --dry-run with the same flags for its summary, or fewer --ranks");
  }
  if (!(lint.max_imbalance >= 1.0)) {
    char got[32];
    std::snprintf(got, sizeof got, "%g", lint.max_imbalance);
    throw UsageError(std::string("--max-imbalance must be at least 1 (max/mean FLOPs of a perfect balance), got ") +
                     got + "; e.g. --max-imbalance 1.10");
  }
  const Plan plan = build_plan(plan_spec(config));
  print_plan(std::cout, plan, {max_ranks});
  if (plan.ranks() > 1024) {
    std::cout << "\nplan checker: skipped above P = 1024 (the test suite checks the same templates at small P)\n";
    return kExitVerified;
  }
  const bool unbalanced = lint_balance(plan, lint);
  const PlanCheck check = check_plan(plan);
  std::cout << "\nplan checker: " << check.ops << " ops, " << check.messages << " messages matched, "
            << check.pairs_checked << " unit pairs covered"
            << (check.coverage_checked ? "" : " (coverage skipped: too many units)") << "\n";
  for (const PlanFinding& finding : check.findings) std::cout << "  " << finding.describe() << "\n";
  std::cout << (check.ok() ? "OK: the plan is well formed\n" : "FOUND PROBLEMS: the plan is wrong as listed above\n");
  return check.ok() && !(unbalanced && lint.strict) ? kExitVerified : kExitMismatch;
}

}  // namespace

void add_plan_command(CLI::App& app, Registry& registry) {
  auto config = std::make_shared<RunConfig>();
  auto max_ranks = std::make_shared<int64_t>(16);
  auto lint = std::make_shared<BalanceLint>();
  CLI::App* command = app.add_subcommand("plan", "print a schedule's plan as a step x rank grid and check it");
  add_schedule_flags(*command, *config);
  whole_number(command
                   ->add_option("--show-ranks", *max_ranks,
                                "columns shown for wide plans (at least 2: the first and last ranks)")
                   ->capture_default_str(),
               INT64_MIN);
  command
      ->add_option("--max-imbalance", lint->max_imbalance,
                   "warn when the busiest rank's FLOPs exceed this multiple of the mean (the balance lint)")
      ->capture_default_str();
  command->add_flag("--strict", lint->strict, "exit 1 when the balance lint warns");
  registry.add(command, [config, max_ranks, lint] { return plan_command(*config, *max_ranks, *lint); });
}

}  // namespace ringlab::cli
