// `ringlab grade LAB [FILE] [--only CRITERION]... [--format text|json|gradescope] [--output FILE]`:
// compile a student's file against a code lab's hidden tests and report per criterion. Exit 0
// every criterion passed, 1 some did not (or it did not compile), 2 an unknown lab, file or
// criterion, or an output file that cannot be written.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "exercises/cli/commands.hpp"
#include "exercises/grader/grader.hpp"
#include "exercises/grader/handout.hpp"
#include "reference/error.hpp"
#include "sim/pipeline/output_files.hpp"

namespace ringlab::cli {

void add_grade_command(CLI::App& app, Registry& registry) {
  struct GradeArgs {
    grader::GradeOptions options;
    bool json = false, list = false, no_cache = false;
    std::string format = "text", output;
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
  command->add_flag("--json", args->json, "the report as one JSON object (--format json)");
  command
      ->add_option("--format", args->format,
                   "text (default), json (the report as one object), or gradescope (Gradescope's "
                   "autograder results.json: score and one test per criterion, with the lab's points)")
      ->check(CLI::IsMember({"text", "json", "gradescope"}));
  command->add_option("--output", args->output,
                      "write the report to this file instead of standard output (written whole, or not at all); "
                      "for Gradescope: --output /autograder/results/results.json");
  registry.add(command, [args] {
    if (args->list) {
      // In lab order, those this build left out in their place.
      std::vector<std::pair<std::string, std::string>> lines;
      for (const grader::LabInfo& lab : grader::labs()) lines.emplace_back(lab.id, lab.title);
      for (const grader::AbsentLab& lab : grader::absent_labs())
        lines.emplace_back(lab.id, "not in this build: " + lab.reason);
      std::sort(lines.begin(), lines.end());
      std::cout << "code labs (ringlab grade LAB [FILE]):\n";
      for (const auto& [id, text] : lines) std::cout << "  " << id << "  " << text << "\n";
      return kExitVerified;
    }
    if (args->options.lab.empty()) {
      throw UsageError(
          "grade needs a lab; run 'ringlab grade --list' for them, then 'ringlab grade LAB your_file.cpp'");
    }
    if (args->json && args->format == "gradescope") {
      throw UsageError("--json and --format gradescope disagree; give one of them");
    }
    const std::string format = args->json ? "json" : args->format;
    if (!args->output.empty()) check_output_file(args->output);
    args->options.use_cache = !args->no_cache;
    const grader::GradeReport report = grader::grade(args->options);
    std::ostringstream text;
    if (format == "json") {
      text << grader::to_json(report).dump(2) << "\n";
    } else if (format == "gradescope") {
      text << grader::to_gradescope(report).dump(2) << "\n";
    } else {
      grader::print_report(text, report);
    }
    if (args->output.empty()) {
      std::cout << text.str();
    } else {
      write_file_atomically(args->output, text.str());
    }
    return report.passed() ? kExitVerified : kExitMismatch;
  });
}

void add_handout_command(CLI::App& app, Registry& registry) {
  struct HandoutArgs {
    std::string lab, directory;
  };
  auto args = std::make_shared<HandoutArgs>();
  CLI::App* command = app.add_subcommand(
      "handout", "write a lab's student folder: README, starter, headers, Makefile; no solution or broken version");
  command->add_option("lab", args->lab, "lab id, number or name (run 'ringlab grade --list')")->required();
  command->add_option("dir", args->directory, "the folder to create (must not exist, or be empty)")->required();
  registry.add(command, [args] {
    const grader::LabInfo lab = grader::find_lab(args->lab);
    const std::vector<std::string> files = grader::write_handout(lab, args->directory);
    std::cout << "ringlab handout " << lab.id << ": " << files.size() << " files in " << args->directory << "\n";
    for (const std::string& file : files)
      if (file.rfind("include/", 0) != 0) std::cout << "  " << file << "\n";
    std::cout << "  include/  (" << files.size() - 4 << " ringlab headers the starter uses)\n"
              << "grade: cd " << args->directory << " && ringlab grade " << lab.id << " starter.cpp\n";
    return kExitVerified;
  });
}

}  // namespace ringlab::cli
