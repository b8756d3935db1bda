// The grading command line (grade_cli.hpp).
#include "exercises/grader/grade_cli.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <utility>
#include <vector>

#include "reference/error.hpp"

namespace ringlab::grader {

namespace fs = std::filesystem;

namespace {

// Writes the report whole or not at all: a partial file, then a rename.
void write_whole(const std::string& path, const std::string& text) {
  const std::string partial = path + ".partial-" + std::to_string(getpid());
  {
    std::ofstream out(partial, std::ios::binary);
    if (!out) {  // never opened: the folder, not the disk (a read-only or missing folder)
      const std::string why = std::strerror(errno);
      throw UsageError("cannot write " + path + ": " + why + "; pass an --output in a folder you can write");
    }
    out << text;
    if (!out.flush()) {
      std::error_code error;
      fs::remove(partial, error);
      throw UsageError("cannot write " + path + " (disk full?); free space and run again");
    }
  }
  std::error_code error;
  fs::rename(partial, path, error);
  if (error) {
    fs::remove(partial, error);
    throw UsageError("cannot write " + path + ": " + error.message());
  }
}

}  // namespace

std::pair<int, int> find_user(const std::string& user) {
  if (!user.empty() && std::all_of(user.begin(), user.end(), [](char c) { return std::isdigit(c) || c == ':'; })) {
    const size_t colon = user.find(':');
    const int uid = std::stoi(user.substr(0, colon));
    return {uid, colon == std::string::npos ? uid : std::stoi(user.substr(colon + 1))};
  }
  std::ifstream passwd("/etc/passwd");
  for (std::string line; std::getline(passwd, line);) {
    std::vector<std::string> fields;
    std::istringstream parts(line);
    for (std::string field; std::getline(parts, field, ':');) fields.push_back(field);
    if (fields.size() >= 4 && fields[0] == user) return {std::stoi(fields[2]), std::stoi(fields[3])};
  }
  throw UsageError("no user '" + user + "' on this machine; create it (useradd --system " + user +
                   ", as the autograder's setup.sh does) or give a numeric UID[:GID]");
}

void add_grade_options(CLI::App& command, const std::shared_ptr<GradeArgs>& args) {
  command.add_option("lab", args->options.lab, "lab id, number or name (--list names them)");
  command.add_option("file", args->options.file,
                     "your .cpp (default: the lab's starter); also starter, solution or broken/NAME of the lab");
  command.add_option("--only", args->options.only, "run only these criteria (repeatable)");
  command.add_option("--timeout", args->options.timeout_seconds, "seconds per criterion, overriding the lab's limits");
  command.add_flag("--no-cache", args->no_cache, "compile again even if this exact unit was graded before");
  command.add_flag("--list", args->list, "list the labs");
  command.add_flag("--json", args->json, "the report as one JSON object (--format json)");
  command
      .add_option("--format", args->format,
                  "text (default), json (the report as one object), or gradescope (Gradescope's "
                  "autograder results.json: score and one test per criterion, with the lab's points)")
      ->check(CLI::IsMember({"text", "json", "gradescope"}));
  command.add_option("--output", args->output,
                     "write the report to this file instead of standard output (written whole, or not at all); "
                     "for Gradescope: --output /autograder/results/results.json");
  command.add_option("--run-as", args->run_as,
                     "run the submission's program as this user (a name or UID[:GID]; needs root): in its own "
                     "folder, its processes killed after each criterion - what an autograder does; refused "
                     "while that user can read the lab's answers");
  command
      .add_option("--memory-limit", args->memory_mib, "MiB of address space per criterion's process (with --run-as)")
      ->check(CLI::PositiveNumber);
}

int run_grade(GradeArgs& args) {
  if (args.list) {
    // In lab order, those this build left out in their place.
    std::vector<std::pair<std::string, std::string>> lines;
    for (const LabInfo& lab : labs()) lines.emplace_back(lab.id, lab.title);
    for (const AbsentLab& lab : absent_labs()) lines.emplace_back(lab.id, "not in this build: " + lab.reason);
    std::sort(lines.begin(), lines.end());
    std::cout << "code labs (" << setup().command << " LAB [FILE]):\n";
    for (const auto& [id, text] : lines) std::cout << "  " << id << "  " << text << "\n";
    return kExitVerified;
  }
  if (args.options.lab.empty())
    throw UsageError("grade needs a lab; run '" + setup().command + " --list' for them, then '" + setup().command +
                     " LAB your_file.cpp'");
  if (args.json && args.format == "gradescope")
    throw UsageError("--json and --format gradescope disagree; give one of them");
  if (args.memory_mib > 0 && args.run_as.empty())
    throw UsageError("--memory-limit goes with --run-as (the limits are the sandbox's); add --run-as USER");
  const std::string format = args.json ? "json" : args.format;
  if (!args.output.empty()) {
    const fs::path parent = fs::absolute(args.output).parent_path();
    if (!fs::is_directory(parent) || fs::is_directory(args.output))
      throw UsageError("cannot write --output " + args.output + ": its folder does not exist or it is a folder");
  }
  args.options.use_cache = !args.no_cache;
  args.options.warn_unsandboxed = format != "text";  // marks for a pipeline, not a student's self-check
  if (!args.run_as.empty()) {
    const auto [uid, gid] = find_user(args.run_as);
    if (uid == 0) throw UsageError("--run-as root is no sandbox; give an unprivileged user");
    args.options.sandbox.uid = uid;
    args.options.sandbox.gid = gid;
    if (args.run_as.find_first_not_of("0123456789:") != std::string::npos) args.options.sandbox.user = args.run_as;
    args.options.sandbox.memory_bytes = static_cast<uint64_t>(args.memory_mib * 1024 * 1024);
  }
  const GradeReport report = grade(args.options);
  std::ostringstream text;
  if (format == "json") {
    text << to_json(report).dump(2) << "\n";
  } else if (format == "gradescope") {
    text << to_gradescope(report).dump(2) << "\n";
  } else {
    print_report(text, report);
  }
  if (args.output.empty()) {
    std::cout << text.str();
  } else {
    write_whole(args.output, text.str());
  }
  return report.passed() ? kExitVerified : kExitMismatch;
}

}  // namespace ringlab::grader
