// `ringlab grade LAB [FILE] [--only CRITERION]... [--json]`: compile a student's file against a
// code lab's hidden tests and report per criterion. Exit 0 every criterion passed, 1 some did not
// (or it did not compile), 2 an unknown lab, file or criterion.
#include <iostream>
#include <memory>

#include "exercises/cli/commands.hpp"
#include "exercises/grader/grader.hpp"
#include "reference/error.hpp"

namespace ringlab::cli {

void add_grade_command(CLI::App& app, Registry& registry) {
  struct GradeArgs {
    grader::GradeOptions options;
    bool json = false, list = false, no_cache = false;
  };
  auto args = std::make_shared<GradeArgs>();
  CLI::App* command =
      app.add_subcommand("grade", "grade a code lab: compile FILE against the lab's hidden tests and report");
  command->add_option("lab", args->options.lab, "lab id, number or name (run 'ringlab grade --list')");
  command->add_option("file", args->options.file,
                      "your .cpp (default: the lab's starter); also starter, solution or broken/NAME of the lab");
  command->add_option("--only", args->options.only, "run only these criteria (repeatable)");
  command->add_option("--timeout", args->options.timeout_seconds, "seconds per criterion, overriding the lab's limits");
  command->add_flag("--no-cache", args->no_cache, "compile again even if this exact file was graded before");
  command->add_flag("--list", args->list, "list the labs");
  command->add_flag("--json", args->json, "the report as one JSON object");
  registry.add(command, [args] {
    if (args->list) {
      std::cout << "code labs (ringlab grade LAB [FILE]):\n";
      for (const grader::LabInfo& lab : grader::labs()) std::cout << "  " << lab.id << "  " << lab.title << "\n";
      for (const grader::AbsentLab& lab : grader::absent_labs())
        std::cout << "  " << lab.id << "  not in this build: " << lab.reason << "\n";
      return kExitVerified;
    }
    if (args->options.lab.empty()) {
      throw UsageError(
          "grade needs a lab; run 'ringlab grade --list' for them, then 'ringlab grade LAB your_file.cpp'");
    }
    args->options.use_cache = !args->no_cache;
    const grader::GradeReport report = grader::grade(args->options);
    if (args->json) {
      std::cout << grader::to_json(report).dump(2) << "\n";
    } else {
      grader::print_report(std::cout, report);
    }
    return report.passed() ? kExitVerified : kExitMismatch;
  });
}

}  // namespace ringlab::cli
