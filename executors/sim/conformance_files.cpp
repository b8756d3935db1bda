// The conformance suite on disk: writing a suite's case folders (all or nothing) and reading one
// back (the format: cli/ringlab/conformance_command.cpp).
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "executors/sim/conformance_suite.hpp"
#include "reference/error.hpp"
#include "reference/npy.hpp"
#include "sim/pipeline/output_files.hpp"

namespace ringlab {

namespace fs = std::filesystem;

namespace {

constexpr const char* kInputFiles[] = {"q", "k", "v", "dout"};

// What an existing DIR holds: nothing, conformance cases (suite.json and case folders only), or
// something else.
enum class DirectoryHolds : uint8_t { nothing, cases, other };

DirectoryHolds directory_holds(const fs::path& dir) {
  std::error_code error;
  bool any = false, other = false;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir, error)) {
    any = true;
    const std::string name = entry.path().filename().string();
    if (name == "suite.json" && entry.is_regular_file(error)) continue;
    if (entry.is_directory(error) && fs::exists(entry.path() / "case.json", error)) continue;
    other = true;
  }
  if (error) throw UsageError("cannot list " + dir.string() + " (" + error.message() + "); pick another directory");
  return !any ? DirectoryHolds::nothing : other ? DirectoryHolds::other : DirectoryHolds::cases;
}

// Throws when the cases cannot go to dir: checked before any work.
DirectoryHolds check_target(const fs::path& dir, bool force) {
  std::error_code error;
  const std::string name = dir.string();
  if (fs::exists(dir, error) && !fs::is_directory(dir, error)) {
    throw UsageError("conformance cases " + name + ": exists and is not a directory; pick a new directory name");
  }
  fs::path parent = fs::absolute(dir).lexically_normal().parent_path();
  if (!fs::is_directory(parent, error)) {
    throw UsageError("conformance cases " + name + ": directory " + parent.string() +
                     " does not exist; create it first");
  }
  if (::access(parent.c_str(), W_OK) != 0) {
    throw UsageError("conformance cases " + name + ": directory " + parent.string() +
                     " is not writable; pick another place");
  }
  if (!fs::exists(dir, error)) return DirectoryHolds::nothing;
  if (::access(dir.c_str(), W_OK) != 0) {
    throw UsageError("conformance cases " + name + ": the directory is not writable; pick another place");
  }
  const DirectoryHolds holds = directory_holds(dir);
  if (holds == DirectoryHolds::other) {
    throw UsageError("conformance cases " + name +
                     ": the directory holds files that are not conformance cases; pick a new or empty directory");
  }
  if (holds == DirectoryHolds::cases && !force) {
    throw UsageError("conformance cases " + name +
                     ": the directory already holds conformance cases; pass --force to replace them, or pick a new "
                     "directory");
  }
  return holds;
}

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  file << text;
  if (!file.flush()) throw UsageError(path.string() + ": write failed (disk full?); free space and run again");
}

}  // namespace

CasesWritten write_conformance_cases(const std::string& dir_given, const std::string& suite, bool force) {
  const std::vector<ConformanceCase> cases = conformance_suite(suite);  // an unknown suite first
  const std::string dir = without_trailing_separators(dir_given);       // "cases/" is "cases"
  const fs::path target(dir);
  const DirectoryHolds holds = check_target(target, force);

  // Everything goes to <dir>.partial-<pid> first; only a finished suite is renamed into place.
  const std::string staging = dir + ".partial-" + std::to_string(::getpid());
  std::error_code error;
  fs::remove_all(staging, error);
  if (!fs::create_directories(staging, error)) {
    throw UsageError("conformance cases " + dir + ": cannot create " + staging + " (" + error.message() + ")");
  }
  struct Cleanup {
    std::string path;
    bool keep = false;
    ~Cleanup() {
      std::error_code ignored;
      if (!keep) fs::remove_all(path, ignored);
    }
  } cleanup{staging};

  CasesWritten written;
  nlohmann::json names = nlohmann::json::array();
  for (const ConformanceCase& c : cases) {
    const CaseData data = build_case(c);
    const fs::path folder = fs::path(staging) / c.name;
    fs::create_directory(folder, error);
    if (error) throw UsageError("conformance cases " + dir + ": cannot create " + folder.string());
    write_text(folder / "case.json", data.json.dump(1) + "\n");
    write_npy((folder / "q.npy").string(), data.inputs.q);
    write_npy((folder / "k.npy").string(), data.inputs.k);
    write_npy((folder / "v.npy").string(), data.inputs.v);
    write_npy((folder / "dout.npy").string(), data.inputs.dout);
    write_npy((folder / "out.npy").string(), data.oracle.forward.out);
    write_npy((folder / "lse.npy").string(), data.oracle.forward.lse);
    write_npy((folder / "dq.npy").string(), data.oracle.grads.dq);
    write_npy((folder / "dk.npy").string(), data.oracle.grads.dk);
    write_npy((folder / "dv.npy").string(), data.oracle.grads.dv);
    written.files += 10;
    ++written.cases;
    names.push_back(c.name);
  }
  const nlohmann::json index = {
      {"format", kCaseFormat}, {"suite", suite}, {"cases", names}, {"written_by", "ringlab conformance cases"}};
  write_text(fs::path(staging) / "suite.json", index.dump(1) + "\n");
  ++written.files;

  // Into place: an empty DIR is replaced; with --force the old cases are moved aside first and
  // removed only once the new ones are in place.
  const std::string aside = dir + ".old-" + std::to_string(::getpid());
  if (holds == DirectoryHolds::cases) {
    fs::rename(target, aside, error);
    if (error)
      throw UsageError("conformance cases " + dir + ": cannot move the old cases aside (" + error.message() + ")");
  } else if (fs::exists(target, error)) {
    fs::remove(target, error);  // empty (check_target)
  }
  fs::rename(staging, target, error);
  if (error) {
    std::error_code ignored;
    if (holds == DirectoryHolds::cases) fs::rename(aside, target, ignored);
    throw UsageError("conformance cases " + dir + ": cannot rename the finished cases into place (" + error.message() +
                     ")");
  }
  cleanup.keep = true;
  if (holds == DirectoryHolds::cases) fs::remove_all(aside, error);
  return written;
}

Tolerance CaseFolder::tolerance(const std::string& tensor) const {
  const nlohmann::json& t = json.at("tolerances").at(tensor);
  return {t.at("abs").get<double>(), t.at("rel").get<double>()};
}

double CaseFolder::rms_tolerance(const std::string& tensor) const {
  const nlohmann::json& t = json.at("tolerances").at(tensor);
  return t.contains("rms") ? t.at("rms").get<double>() : -1;
}

CaseFolder read_case(const std::string& folder) {
  const fs::path dir(folder);
  std::error_code error;
  if (!fs::is_directory(dir, error))
    throw UsageError(folder + " is not a case folder; pass a folder holding case.json");
  CaseFolder c;
  {
    std::ifstream file(dir / "case.json");
    if (!file) throw UsageError(folder + " has no case.json; rewrite it with ringlab conformance cases");
    std::stringstream text;
    text << file.rdbuf();
    try {
      c.json = nlohmann::json::parse(text.str());
    } catch (const nlohmann::json::exception& e) {
      throw UsageError(folder + "/case.json is not valid JSON (" + std::string(e.what()) + ")");
    }
  }
  if (c.json.value("format", "") != kCaseFormat) {
    throw UsageError(folder + "/case.json is not a " + std::string(kCaseFormat) + " case");
  }
  AttentionDims dims;
  try {
    dims = {c.json.at("B").get<int64_t>(), c.json.at("S").get<int64_t>(), c.json.at("H").get<int64_t>(),
            c.json.at("HKV").get<int64_t>(), c.json.at("D").get<int64_t>()};
  } catch (const nlohmann::json::exception& e) {
    throw UsageError(folder + "/case.json lacks a size (" + std::string(e.what()) + ")");
  }
  auto read = [&](const std::string& name, const Shape& shape, const char* want) {
    const fs::path path = dir / (name + ".npy");
    if (!fs::exists(path, error)) throw UsageError(folder + " has no " + name + ".npy; rewrite the case");
    NpyArray array = read_npy(path.string());
    if (array.descr != want) {
      throw UsageError(path.string() + " is " + array.descr + ", the format says " + want);
    }
    if (array.values.shape() != shape) {
      throw UsageError(path.string() + " has shape " + shape_string(array.values.shape()) + ", case.json says " +
                       shape_string(shape));
    }
    return std::move(array.values);
  };
  c.inputs.q = read(kInputFiles[0], dims.q_shape(), "<f4");
  c.inputs.k = read(kInputFiles[1], dims.kv_shape(), "<f4");
  c.inputs.v = read(kInputFiles[2], dims.kv_shape(), "<f4");
  c.inputs.dout = read(kInputFiles[3], dims.q_shape(), "<f4");
  c.oracle.forward.out = read("out", dims.q_shape(), "<f8");
  c.oracle.forward.lse = read("lse", dims.lse_shape(), "<f8");
  c.oracle.grads.dq = read("dq", dims.q_shape(), "<f8");
  c.oracle.grads.dk = read("dk", dims.kv_shape(), "<f8");
  c.oracle.grads.dv = read("dv", dims.kv_shape(), "<f8");
  return c;
}

}  // namespace ringlab
