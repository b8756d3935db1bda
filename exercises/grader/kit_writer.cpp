// Making grader kits from this build (kit.hpp): the autograder package and the student kit.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "exercises/grader/build_setup.hpp"
#include "exercises/grader/handout.hpp"
#include "exercises/grader/kit.hpp"
#include "reference/error.hpp"
#include "sim/pipeline/output_files.hpp"

namespace ringlab::grader {

namespace fs = std::filesystem;

namespace {

constexpr const char* kStudentUser = "ringlab-student";

// The compiler a kit asks for: GCC of the major version that built the archives ("g++-12").
std::string kit_compiler() {
  const std::string version = setup().toolchain.compiler_version;  // "GNU 12.2.0"
  if (version.rfind("GNU ", 0) != 0)
    throw UsageError("kits are made from a GCC build (this one is " + version +
                     "); configure ringlab with g++ and build again");
  return "g++-" + version.substr(4, version.find('.') - 4);
}

class KitWriter {
 public:
  KitWriter(const std::string& directory, const std::string& command) : staged_(directory, "kit"), command_(command) {
    if (!setup().sanitize.empty())
      throw UsageError("this build's libraries carry " + setup().sanitize +
                       " instrumentation; make kits from a default build (cmake --preset default)");
    runner_ = runner_binary();
    if (runner_.empty() || !fs::is_regular_file(runner_))
      throw UsageError(
          "the grader program ringlab-grade is not built; build it (cmake --build build --target ringlab-grade)");
    compiler_ = kit_compiler();
  }

  void text(const std::string& path, const std::string& content, bool executable = false) {
    const fs::path target = staged_.path(path);
    fs::create_directories(target.parent_path());
    std::ofstream out(target, std::ios::binary);
    out << content;
    if (!out.flush()) throw UsageError("kit: write failed (disk full?); free space and run again");
    out.close();
    if (executable)
      fs::permissions(target, fs::perms::owner_exec | fs::perms::group_exec | fs::perms::others_exec,
                      fs::perm_options::add);
    written_.push_back(path);
  }

  void copy(const std::string& from, const std::string& path) {
    const fs::path target = staged_.path(path);
    fs::create_directories(target.parent_path());
    std::error_code error;
    fs::copy_file(from, target, fs::copy_options::overwrite_existing, error);
    if (error) throw UsageError("kit: cannot copy " + from + " (" + error.message() + "); build ringlab again");
    written_.push_back(path);
  }

  // The lab's archive and headers under grader/, and its entry of grader.json.
  void lab(const LabInfo& lab) {
    const std::string harness = "lib/" + fs::path(lab.harness).filename().string();
    copy(lab.harness, "grader/" + harness);
    for (const HandoutFile& file : handout_files(lab)) {
      if (file.path == "lab.hpp" || file.path.rfind("include/", 0) == 0)
        text("grader/labs/" + lab.id + "/" + file.path, file.content);
      // The judge is the starter linked with the harness: outside the folder submissions include from.
      if (file.path == "starter.cpp") text("grader/judges/" + lab.id + ".cpp", file.content);
    }
    labs_.push_back({{"id", lab.id},
                     {"title", lab.title},
                     {"harness", harness},
                     {"headers", "labs/" + lab.id},
                     {"judge", "judges/" + lab.id + ".cpp"},
                     {"criteria", list_lab_criteria(lab)}});
  }

  void finish(bool native_warning_to_readme) {
    copy(runner_, "grader/ringlab-grade");
    fs::permissions(staged_.path("grader/ringlab-grade"), fs::perms::owner_all | fs::perms::group_read |
                                                              fs::perms::group_exec | fs::perms::others_read |
                                                              fs::perms::others_exec);
    nlohmann::json libraries = nlohmann::json::array();
    std::set<std::string> names;
    for (const std::string& library : setup().toolchain.libraries) {
      const std::string name = fs::path(library).filename().string();
      if (!names.insert(name).second) throw std::logic_error("two grader libraries named " + name);
      copy(library, "grader/lib/" + name);
      libraries.push_back("lib/" + name);
    }
    const nlohmann::json config = {{"format", "ringlab-grader-kit 1"},
                                   {"command", command_},
                                   {"compiler", compiler_},
                                   {"compiler_version", setup().toolchain.compiler_version},
                                   {"compile_flags", setup().toolchain.compile_flags},
                                   {"link_flags", setup().toolchain.link_flags},
                                   {"libraries", libraries},
                                   {"labs", labs_}};
    text("grader/grader.json", config.dump(2) + "\n");
    (void)native_warning_to_readme;
    staged_.commit();
  }

  const std::string& compiler() const { return compiler_; }
  std::vector<std::string> written() const {
    std::vector<std::string> sorted = written_;
    std::sort(sorted.begin(), sorted.end());
    return sorted;
  }

 private:
  StagedDirectory staged_;
  std::string command_, runner_, compiler_;
  nlohmann::json labs_ = nlohmann::json::array();
  std::vector<std::string> written_;
};

std::string setup_script(const std::string& compiler) {
  return "#!/usr/bin/env bash\n"
         "# Gradescope runs this once, as root, when it builds the autograder's image (Ubuntu base).\n"
         "# It installs the one thing the grader needs, the C++ compiler that built its archives, and\n"
         "# creates the unprivileged user that submissions run as.\n"
         "set -euo pipefail\n"
         "compiler=" +
         compiler +
         "\n"
         "if ! command -v \"$compiler\" > /dev/null 2>&1; then\n"
         "  apt-get update\n"
         "  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \"$compiler\"\n"
         "fi\n"
         "user=${RINGLAB_STUDENT_USER:-" +
         kStudentUser +
         "}\n"
         "if ! id -u \"$user\" > /dev/null 2>&1; then\n"
         "  useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin \"$user\"\n"
         "fi\n";
}

std::string run_script(const LabInfo& lab) {
  return R"SH(#!/usr/bin/env bash
# Gradescope runs this for every submission, as root, as /autograder/run_autograder (a copy of
# source/run_autograder). It grades the submitted .cpp with the grader in source/grader and writes
# results/results.json. The submission's program runs as an unprivileged user (setup.sh made it),
# in its own folder, under time and memory limits, and cannot read source/ or write results/.
# RINGLAB_AUTOGRADER_ROOT overrides where /autograder is (a test tree).
set -uo pipefail
lab=)SH" +
         lab.id + R"SH(
here=$(cd "$(dirname "$0")" && pwd)
if [ -d "$here/grader" ]; then root=$(dirname "$here"); else root=$here; fi
root=${RINGLAB_AUTOGRADER_ROOT:-$root}
user=${RINGLAB_STUDENT_USER:-)SH" +
         kStudentUser + R"SH(}
memory_mib=${RINGLAB_MEMORY_MIB:-2048}
results=$root/results
mkdir -p "$results"
rm -f "$results/results.json"

give_up() {  # a results.json that says why nothing was graded
  local why=${1//\\/\\\\}
  why=${why//\"/\\\"}
  printf '{"score": 0, "output": "%s", "visibility": "visible", "stdout_visibility": "visible", "tests": []}\n' \
    "$why" > "$results/results.json"
  echo "$1" >&2
  exit 0
}

# The grader's files are root's alone; the results folder is written by the grader only.
chown -R root:root "$root/source" "$root/submission" 2> /dev/null
chmod -R go-rwx "$root/source" "$root/submission"
chmod 755 "$root" "$results"
work=$root/work
rm -rf "$work"
mkdir -m 711 "$work"

mapfile -t files < <(cd "$root/submission" && find . -type f -name '*.cpp' | sort)
if [ ${#files[@]} -eq 1 ]; then
  file=${files[0]#./}
elif [ -f "$root/submission/starter.cpp" ]; then
  file=starter.cpp
else
  give_up "submit one .cpp file (found ${#files[@]}: ${files[*]:-none}); a second file may be a header (.hpp) of your own"
fi

sandbox=()
if [ "$(id -u)" -eq 0 ]; then
  id -u "$user" > /dev/null 2>&1 || give_up "the user $user does not exist: run setup.sh first"
  sandbox=(--run-as "$user" --memory-limit "$memory_mib")
else
  echo "run_autograder: not root, so the submission runs as this user, without the sandbox" >&2
fi
# From the submission's folder, so that its reports name the file as the student does.
cd "$root/submission" || give_up "no submission folder"
RINGLAB_GRADE_CACHE=$work/cache TMPDIR=$work "$root/source/grader/ringlab-grade" --kit "$root/source/grader" \
  "$lab" "$file" --format gradescope --output "$results/results.json" "${sandbox[@]}"
status=$?
[ -s "$results/results.json" ] || give_up "the grader stopped with status $status before writing results"
exit 0
)SH";
}

}  // namespace

std::vector<std::string> write_autograder(const LabInfo& lab, const std::string& directory) {
  check_output_directory(directory, "autograder");
  KitWriter kit(directory, "ringlab grade");
  kit.lab(lab);
  kit.text("setup.sh", setup_script(kit.compiler()), true);
  kit.text("run_autograder", run_script(lab), true);
  kit.text("README.md",
           "# Autograder: " + lab.title +
               "\n\nUpload this folder's contents as a zip (`cd` into it, then `zip -r ../autograder.zip .`) "
               "as a Gradescope programming assignment's autograder (any Ubuntu base image).\n"
               "`setup.sh` installs " +
               kit.compiler() +
               " and creates the user submissions run as; `run_autograder` grades the one .cpp "
               "of a submission and writes `results/results.json`. `grader/` holds the grader, the "
               "lab's prebuilt archives and its hand-out headers: no solution, broken version or "
               "hidden test source.\n");
  kit.finish(false);
  return kit.written();
}

std::vector<std::string> write_student_kit(const std::string& directory) {
  check_output_directory(directory, "student-kit");
  KitWriter kit(directory, "./ringlab-grade");
  std::string list;
  for (const LabInfo& lab : labs()) {
    kit.lab(lab);
    for (const HandoutFile& file : handout_files(lab)) kit.text(lab.id + "/" + file.path, file.content);
    list += "- `" + lab.id + "/` - " + lab.title + "\n";
  }
  kit.text("ringlab-grade",
           "#!/bin/sh\n"
           "# Grades a lab: ./ringlab-grade LAB FILE.cpp [--only CRITERION] [--format text|json|gradescope]\n"
           "here=$(cd \"$(dirname \"$0\")\" && pwd)\n"
           "exec \"$here/grader/ringlab-grade\" --kit \"$here/grader\" \"$@\"\n",
           true);
  kit.text("README.md",
           "# ringlab code labs\n\nOne folder per lab, each with its README, `starter.cpp`, `lab.hpp` and "
           "the headers it uses:\n\n" +
               list +
               "\nGrade a file with `./ringlab-grade LAB FILE.cpp` (or `make grade` in the lab's "
               "folder); it needs " +
               kit.compiler() + " on Linux x86-64 (Debian 12, Ubuntu 22.04 or newer: `apt-get install " +
               kit.compiler() + "`). No solution is in this folder.\n");
  kit.finish(false);
  return kit.written();
}

}  // namespace ringlab::grader
