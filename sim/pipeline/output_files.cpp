#include "sim/pipeline/output_files.hpp"

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "reference/error.hpp"
#include "reference/npy.hpp"

namespace ringlab {
namespace fs = std::filesystem;

namespace {

std::string partial_name(const std::string& path) { return path + ".partial-" + std::to_string(::getpid()); }

void require_writable_parent(const fs::path& path, const std::string& flag) {
  fs::path parent = path.parent_path();
  if (parent.empty()) parent = ".";
  std::error_code error;
  if (!fs::is_directory(parent, error)) {
    throw UsageError(flag + " " + path.string() + ": directory " + parent.string() +
                     " does not exist; create it first");
  }
  if (::access(parent.c_str(), W_OK) != 0) {
    throw UsageError(flag + " " + path.string() + ": directory " + parent.string() +
                     " is not writable; pick another place");
  }
}

}  // namespace

std::string without_trailing_separators(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  return path;
}

void check_output_directory(const std::string& target, const std::string& what) {
  std::error_code error;
  const fs::path path(without_trailing_separators(target));
  if (fs::exists(path, error)) {
    if (!fs::is_directory(path, error)) {
      throw UsageError(what + " " + target + " exists and is not a directory; pick a new directory name");
    }
    if (!fs::is_empty(path, error)) {
      throw UsageError(what + " " + target + " exists and is not empty; pick a new directory or empty this one");
    }
    // The finished outputs replace the empty folder (a rename): one the user may not write to must
    // not be replaced by a writable one.
    if (access(path.c_str(), W_OK) != 0) {
      throw UsageError(what + " " + target + " exists and is not writable; pick a directory you can write");
    }
  }
  require_writable_parent(fs::absolute(path).lexically_normal(), what);
}

void check_output_file(const std::string& path) {
  std::error_code error;
  if (fs::is_directory(path, error)) throw UsageError(path + " is a directory; name a file to write");
  require_writable_parent(fs::absolute(path).lexically_normal(), "output");
}

void write_file_atomically(const std::string& path, const std::string& content) {
  const std::string temporary = partial_name(path);
  {
    std::ofstream file(temporary, std::ios::binary | std::ios::trunc);
    if (!file) throw UsageError(path + ": cannot open for writing; check the directory is writable");
    file.write(content.data(), static_cast<std::streamsize>(content.size()));
    if (!file.flush()) {
      file.close();
      fs::remove(temporary);
      throw UsageError(path + ": write failed (disk full?); free space and run again");
    }
  }
  std::error_code error;
  fs::rename(temporary, path, error);
  if (error) {
    fs::remove(temporary);
    throw UsageError(path + ": cannot rename into place (" + error.message() + ")");
  }
}

void save_outputs(const std::string& directory, const RunOutputs& outputs) {
  StagedDirectory staged(directory);
  write_npy(staged.path("out.npy"), outputs.out);
  write_npy(staged.path("lse.npy"), outputs.lse);
  if (outputs.has_backward()) {
    write_npy(staged.path("dq.npy"), outputs.dq);
    write_npy(staged.path("dk.npy"), outputs.dk);
    write_npy(staged.path("dv.npy"), outputs.dv);
  }
  staged.commit();
}

StagedDirectory::StagedDirectory(std::string target, std::string what)
    : target_(without_trailing_separators(std::move(target))), what_(std::move(what)), staging_(partial_name(target_)) {
  std::error_code error;
  fs::remove_all(staging_, error);
  if (!fs::create_directories(staging_, error)) {
    throw UsageError(what_ + " " + target_ + ": cannot create " + staging_ + " (" + error.message() + ")");
  }
}

StagedDirectory::~StagedDirectory() {
  if (!committed_) {
    std::error_code error;
    fs::remove_all(staging_, error);
  }
}

std::string StagedDirectory::path(const std::string& file) const { return (fs::path(staging_) / file).string(); }

void StagedDirectory::commit() {
  std::error_code error;
  if (fs::exists(target_, error)) fs::remove(target_, error);  // check_output_directory made sure it is empty
  fs::rename(staging_, target_, error);
  if (error)
    throw UsageError(what_ + " " + target_ + ": cannot rename the finished outputs into place (" + error.message() +
                     ")");
  committed_ = true;
}

}  // namespace ringlab
