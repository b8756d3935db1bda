// Child processes for the grader: run a program in its own process group, capture what it prints,
// and kill the whole group when it outlives its wall-clock limit. Optionally as another user, under
// resource limits (Sandbox): how an autograder keeps a submission away from the grade.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace ringlab::grader {

struct ProcessResult {
  int exit_status = -1;  // when it exited
  int signal = 0;        // when a signal ended it (SIGKILL after a timeout)
  bool timed_out = false;
  double seconds = 0;
  std::string output;  // stdout and stderr together; the last `max_output` bytes
  // Processes it left running after it ended (then killed): under a sandbox, those of its user;
  // without one, its descendants that left its process group (setsid) and came back to the
  // grader, a child subreaper, when their parents ended.
  int lingering = 0;
};

// Where and as whom a child runs. uid < 0: as the caller, with no limit but the wall clock.
// With a uid (the caller must be root): the child drops to uid/gid with no supplementary groups,
// in `directory`, under RLIMIT_AS `memory_bytes` (0: none), RLIMIT_CPU, RLIMIT_NPROC, RLIMIT_FSIZE
// and no core files; after it ends, every process of that user is killed (a child that left the
// process group with setsid() included) and counted in ProcessResult::lingering. The user must be
// one that nothing else runs as (a dedicated account, such as the autograder's ringlab-student).
struct Sandbox {
  int uid = -1, gid = -1;
  std::string user;  // as --run-as named it, for messages ("" = say the uid)
  uint64_t memory_bytes = 0;
  std::string directory;  // the child's working directory ("" = the caller's)
  bool active() const { return uid >= 0; }
};

// Runs argv[0] with argv; `environment` entries ("NAME=value") are added to the inherited ones.
ProcessResult run_process(const std::vector<std::string>& argv, double timeout_seconds,
                          const std::vector<std::string>& environment = {}, size_t max_output = 64 * 1024,
                          const Sandbox& sandbox = {});

// A criterion judged from outside (exercises/labs/common/harness.hpp): the student's side, which
// runs the submission, and the judge, which holds none of it, joined by a pipe that is the
// student's descriptor 3 and the judge's descriptor 3. The student's side runs as run_process runs
// a program (its own group, the sandbox, the output captured). The judge runs as the caller, in its
// own group, under the sandbox's memory limit, with its standard output (the verdict) read by the
// grader alone: nothing the student's process can reach. When the judge ends, the student's side is
// killed with its group (it may still be running the criterion's own checks), and, under a
// sandbox, every process of its user. The caller becomes a child subreaper (PR_SET_CHILD_SUBREAPER)
// so that a process the student's side left behind - one that left its group with setsid() and
// outlived its parent - comes back to it; those are killed too, with their descendants, and
// counted in student.lingering (the caller's children from before the call are left alone).
struct JudgedResult {
  ProcessResult student;  // the student's side: what it printed; exit or signal when it ended by itself
  ProcessResult judge;    // the judge: `output` is its verdict (standard output) only
  std::string judge_errors;
  bool student_killed = false;  // still running when the judge ended, and killed then
};
JudgedResult run_judged(const std::vector<std::string>& student_argv, const std::vector<std::string>& judge_argv,
                        double timeout_seconds, const std::vector<std::string>& environment = {},
                        size_t max_output = 64 * 1024, const Sandbox& sandbox = {});

// Kills every process of `uid` (from a child that takes that uid: kill(-1) reaches exactly the
// processes that user may signal) until none is left; returns how many there were.
int kill_user_processes(int uid);
// The processes of `uid` alive now (from /proc).
int count_user_processes(int uid);
// This process's children now (from /proc): the ones kill_descendants leaves alone.
std::vector<pid_t> child_processes();
// Kills every descendant of this process except `keep` and theirs, reaping the children among them,
// until none is left; returns how many were alive and not in `killed_groups` (process groups the
// caller has killed already, whose members are only ending).
int kill_descendants(const std::vector<pid_t>& keep, const std::vector<pid_t>& killed_groups);

// The first of `paths` the sandbox's user can read (access(R_OK) from a child that took its uid
// and gid, with no supplementary groups: the permissions of every folder above count too); ""
// when it can read none. The caller must be root.
std::string first_readable(const Sandbox& sandbox, const std::vector<std::string>& paths);

// "SIGSEGV (segmentation fault)"
std::string signal_text(int signal);

}  // namespace ringlab::grader
