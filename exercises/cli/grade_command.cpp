// `ringlab grade LAB [FILE] [--only CRITERION]... [--format text|json|gradescope] [--output FILE]`:
// compile a student's file against a code lab's hand-out and hidden tests and report per
// criterion (grade_cli.hpp). `ringlab handout LAB DIR`, `ringlab autograder LAB DIR` and
// `ringlab student-kit DIR`: what students and Gradescope get (handout.hpp, kit.hpp).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <filesystem>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "exercises/cli/commands.hpp"
#include "exercises/grader/build_setup.hpp"
#include "exercises/grader/grade_cli.hpp"
#include "exercises/grader/grader.hpp"
#include "exercises/grader/handout.hpp"
#include "exercises/grader/kit.hpp"
#include "reference/error.hpp"
#include "sim/pipeline/output_files.hpp"

namespace ringlab::cli {

namespace {

// The labs' archives (each lab's harness, the libraries a submission links, the kits' ringlab-grade)
// are built by `cmake --build` with everything else, but the ringlab target does not wait for
// them: the first `ringlab run` comes sooner. Grading before they are built would fail at the
// link, as if the student's file were at fault; say so instead, with the command that builds them.
void require_lab_archives(const grader::LabInfo& lab, bool runner) {
  std::vector<std::string> needed = grader::setup().toolchain.libraries;
  needed.insert(needed.begin(), lab.harness);
  if (runner) needed.push_back(grader::runner_binary());
  for (const std::string& file : needed)
    if (!file.empty() && !std::filesystem::is_regular_file(file))
      throw UsageError("the labs' archives are not built yet (no " + std::filesystem::path(file).filename().string() +
                       "); build them once: " RINGLAB_LABS_BUILD_COMMAND);
}

// DIR, the folder a command writes (a hand-out, an autograder, a student kit).
void add_folder_argument(CLI::App* command, std::string& directory) {
  command->add_option("dir", directory, "the folder to create (must not exist, or be empty)")->required();
}

// LAB and DIR, the arguments of `ringlab handout` and `ringlab autograder`.
struct LabFolder {
  std::string lab, directory;
};

std::shared_ptr<LabFolder> add_lab_folder_arguments(CLI::App* command) {
  auto args = std::make_shared<LabFolder>();
  command->add_option("lab", args->lab, "lab id, number or name (run 'ringlab grade --list')")->required();
  add_folder_argument(command, args->directory);
  return args;
}

}  // namespace

void add_grade_command(CLI::App& app, Registry& registry) {
  grader::install_setup(grader::build_setup());
  auto args = std::make_shared<grader::GradeArgs>();
  CLI::App* command = app.add_subcommand(
      "grade", "grade a code lab: compile FILE against the lab's hand-out and hidden tests, and report");
  grader::add_grade_options(*command, args);
  registry.add(command, [args] {
    if (!args->list && !args->options.lab.empty()) require_lab_archives(grader::find_lab(args->options.lab), false);
    return grader::run_grade(*args);
  });

  CLI::App* autograder = app.add_subcommand(
      "autograder", "write a lab's Gradescope autograder: setup.sh, run_autograder and the grader, relocatable");
  const std::shared_ptr<LabFolder> kit = add_lab_folder_arguments(autograder);
  registry.add(autograder, [kit] {
    const grader::LabInfo lab = grader::find_lab(kit->lab);
    require_lab_archives(lab, true);
    const std::vector<std::string> files = grader::write_autograder(lab, kit->directory);
    std::cout << "ringlab autograder " << lab.id << ": " << files.size() << " files in " << kit->directory << "\n"
              << "  setup.sh          installs the compiler, creates the user submissions run as\n"
              << "  run_autograder    grades the submission's .cpp into results/results.json\n"
              << "  grader/           the grader, the lab's prebuilt archives and hand-out headers\n"
              << "upload: cd " << kit->directory << " && zip -r ../autograder.zip .\n";
    return kExitVerified;
  });
  auto student = std::make_shared<std::string>();
  CLI::App* student_kit = app.add_subcommand(
      "student-kit", "write the students' distribution: every lab's hand-out and a grader, no solution");
  add_folder_argument(student_kit, *student);
  registry.add(student_kit, [student] {
    for (const grader::LabInfo& lab : grader::labs()) require_lab_archives(lab, true);
    const std::vector<std::string> files = grader::write_student_kit(*student);
    std::cout << "ringlab student-kit: " << files.size() << " files in " << *student << "\n";
    for (const grader::LabInfo& lab : grader::labs()) std::cout << "  " << lab.id << "/\n";
    std::cout << "  ringlab-grade     grades: ./ringlab-grade LAB FILE.cpp\n"
              << "share: tar czf ringlab-labs.tar.gz -C " << *student << " .\n";
    return kExitVerified;
  });
}

void add_handout_command(CLI::App& app, Registry& registry) {
  CLI::App* command = app.add_subcommand(
      "handout", "write a lab's student folder: README, starter, headers, Makefile; no solution or broken version");
  const std::shared_ptr<LabFolder> args = add_lab_folder_arguments(command);
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
