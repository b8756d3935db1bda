// `ringlab plan`: print a plan as a step x rank grid and check it.
// Exit status: 0 the plan checks clean, 1 the checker found problems (the erratum variants do),
// 2 bad input.
#include <iostream>
#include <memory>

#include "reference/error.hpp"
#include "sim/cli/commands.hpp"
#include "sim/plan/check.hpp"
#include "sim/plan/print.hpp"
#include "sim/run/config.hpp"

namespace ringlab::cli {

namespace {

int plan_command(RunConfig& config, int64_t max_ranks) {
  validate(config);
  const Plan plan = build_plan(plan_spec(config));
  print_plan(std::cout, plan, {max_ranks});
  if (plan.ranks() > 1024) {
    std::cout << "\nplan checker: skipped above P = 1024 (the test suite checks the same templates at small P)\n";
    return kExitVerified;
  }
  const PlanCheck check = check_plan(plan);
  std::cout << "\nplan checker: " << check.ops << " ops, " << check.messages << " messages matched, "
            << check.pairs_checked << " unit pairs covered"
            << (check.coverage_checked ? "" : " (coverage skipped: too many units)") << "\n";
  for (const PlanFinding& finding : check.findings) std::cout << "  " << finding.describe() << "\n";
  std::cout << (check.ok() ? "OK: the plan is well formed\n" : "FOUND PROBLEMS: the plan is wrong as listed above\n");
  return check.ok() ? kExitVerified : kExitMismatch;
}

}  // namespace

void add_plan_command(CLI::App& app, Registry& registry) {
  auto config = std::make_shared<RunConfig>();
  auto max_ranks = std::make_shared<int64_t>(16);
  CLI::App* command = app.add_subcommand("plan", "print a schedule's plan as a step x rank grid and check it");
  add_schedule_flags(*command, *config);
  command->add_option("--show-ranks", *max_ranks, "columns shown for wide plans")->capture_default_str();
  registry.add(command, [config, max_ranks] { return plan_command(*config, *max_ranks); });
}

}  // namespace ringlab::cli
