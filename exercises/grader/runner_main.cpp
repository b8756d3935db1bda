// ringlab-grade: the grader program of a kit (kit.hpp) - `ringlab grade` without the ringlab
// source tree or build: ringlab-grade [--kit DIR] LAB FILE.cpp [options]. DIR defaults to the
// folder this program is in.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <filesystem>
#include <iostream>
#include <memory>

#include "exercises/grader/grade_cli.hpp"
#include "exercises/grader/kit.hpp"
#include "reference/error.hpp"

int main(int argc, char** argv) {
  CLI::App app{"ringlab-grade: grade a code lab submission with this kit's grader"};
  app.name("ringlab-grade");
  auto args = std::make_shared<ringlab::grader::GradeArgs>();
  std::string kit;
  app.add_option("--kit", kit, "the kit's grader folder (default: the folder of this program)");
  ringlab::grader::add_grade_options(app, args);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    if (error.get_exit_code() == 0) return app.exit(error);
    std::cerr << "ringlab-grade: error: " << error.what() << "; run 'ringlab-grade --help' for the flags\n";
    return ringlab::kExitUsage;
  }
  try {
    if (kit.empty()) kit = std::filesystem::read_symlink("/proc/self/exe").parent_path().string();
    ringlab::grader::install_setup(ringlab::grader::load_kit(kit));
    return ringlab::grader::run_grade(*args);
  } catch (const ringlab::UsageError& error) {
    std::cerr << "ringlab-grade: error: " << error.what() << "\n";
    return ringlab::kExitUsage;
  } catch (const std::exception& error) {
    std::cerr << "ringlab-grade: internal error: " << error.what() << "\n";
    return 70;
  }
}
