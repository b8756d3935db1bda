// Output files that are never left half-written: each goes to a temporary name first and is
// renamed into place only when complete, and a directory of outputs (--save DIR) appears whole
// or not at all.
#pragma once

#include <string>

#include "sim/pipeline/verification.hpp"

namespace ringlab {

// `path` without trailing separators ("cases/" -> "cases"; "/" stays): a directory named with a
// slash is the same directory, and its parent and staging name are those of the name without it.
std::string without_trailing_separators(std::string path);

// Throws UsageError when `target` exists and is not an empty directory, or cannot be created
// (its parent missing or not writable). Call before any work so a bad --save fails fast. `what`
// names the option or command in the message.
void check_output_directory(const std::string& target, const std::string& what = "--save");
// Throws UsageError when `path`'s directory does not exist or `path` is a directory.
void check_output_file(const std::string& path);

// Writes `content` to `path` through `path.partial-<pid>` and a rename.
void write_file_atomically(const std::string& path, const std::string& content);

// --save DIR: out.npy (B, S, H, D), lse.npy (B, H, S) and, after a backward pass, dq.npy dk.npy
// dv.npy, in global token order, float32 — through a StagedDirectory (whole or not at all).
void save_outputs(const std::string& directory, const RunOutputs& outputs);

class StagedDirectory {
 public:
  explicit StagedDirectory(std::string target, std::string what = "--save");  // creates <target>.partial-<pid>
  StagedDirectory(const StagedDirectory&) = delete;
  StagedDirectory& operator=(const StagedDirectory&) = delete;
  ~StagedDirectory();  // removes the staging directory unless committed

  std::string path(const std::string& file) const;  // a file inside the staging directory
  void commit();                                    // renames the staging directory to the target

 private:
  std::string target_, what_, staging_;
  bool committed_ = false;
};

}  // namespace ringlab
