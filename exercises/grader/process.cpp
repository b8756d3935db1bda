// Child processes with a wall-clock limit (process.hpp).
#include "exercises/grader/process.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <set>

namespace ringlab::grader {

std::string signal_text(int signal) {
  switch (signal) {
    case SIGSEGV: return "SIGSEGV (segmentation fault: an out-of-range index or a dangling reference)";
    case SIGABRT: return "SIGABRT (abort: a failed assert or an uncaught exception)";
    case SIGFPE: return "SIGFPE (arithmetic fault, e.g. an integer division by zero)";
    case SIGBUS: return "SIGBUS (bus error)";
    case SIGKILL: return "SIGKILL";
    case SIGILL: return "SIGILL (illegal instruction)";
    default: return "signal " + std::to_string(signal) + " (" + strsignal(signal) + ")";
  }
}

namespace {

// In the child, before exec: only system calls from here on (the parent may have threads).
void enter_sandbox(const Sandbox& sandbox, double timeout_seconds) {
  auto fail = [](const char* what) {
    (void)!write(STDERR_FILENO, what, strlen(what));
    _exit(126);
  };
  auto limit = [](int resource, rlim_t value) {
    const rlimit r{value, value};
    return setrlimit(resource, &r) == 0;
  };
  if (sandbox.memory_bytes > 0 && !limit(RLIMIT_AS, sandbox.memory_bytes)) fail("could not set the memory limit\n");
  // CPU seconds over all threads: a backstop behind the wall clock, which is the limit that counts.
  const auto cpu = static_cast<rlim_t>(std::ceil(timeout_seconds)) * 4 + 10;
  if (!limit(RLIMIT_CPU, cpu) || !limit(RLIMIT_CORE, 0) || !limit(RLIMIT_FSIZE, rlim_t{256} << 20) ||
      !limit(RLIMIT_NPROC, 512))
    fail("could not set the process limits\n");
  if (!sandbox.directory.empty() && chdir(sandbox.directory.c_str()) != 0) fail("could not enter the work folder\n");
  if (setgroups(0, nullptr) != 0 || setresgid(sandbox.gid, sandbox.gid, sandbox.gid) != 0 ||
      setresuid(sandbox.uid, sandbox.uid, sandbox.uid) != 0)
    fail("could not switch to the sandbox's user (the grader must run as root to use one)\n");
  if (geteuid() == 0 && sandbox.uid != 0) fail("still root after switching users\n");
}

// In the child, before exec: `moves` (from, to) become its descriptors `to`; every other descriptor
// the grader made is close-on-exec, so the program gets these and its standard ones only.
void move_descriptors(const std::vector<std::pair<int, int>>& moves) {
  std::vector<std::pair<int, int>> high;
  for (const auto& [from, to] : moves) high.emplace_back(fcntl(from, F_DUPFD_CLOEXEC, 100), to);
  for (const auto& [from, to] : high) {
    if (from < 0 || dup2(from, to) < 0) _exit(126);
  }
}

pid_t start_child(const std::vector<std::string>& argv, const std::vector<std::pair<int, int>>& moves,
                  const std::vector<std::string>& environment, const Sandbox& sandbox, bool switch_user,
                  double timeout_seconds) {
  const pid_t child = fork();
  if (child != 0) {
    if (child > 0) setpgid(child, child);  // also from this side, so the group exists before any kill
    return child;
  }
  setpgid(0, 0);  // its own group: a timeout kills it and every thread or child it made
  move_descriptors(moves);
  for (const std::string& entry : environment) putenv(const_cast<char*>(entry.c_str()));
  if (switch_user && sandbox.active()) {
    enter_sandbox(sandbox, timeout_seconds);
  } else if (sandbox.memory_bytes > 0) {
    const rlimit r{sandbox.memory_bytes, sandbox.memory_bytes};
    setrlimit(RLIMIT_AS, &r);
  }
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  execv(args[0], args.data());
  const char* message = "could not execute the program\n";
  (void)!write(STDERR_FILENO, message, strlen(message));
  _exit(127);
}

// Appends what `fd` has to `text` (keeping its last `max` bytes); false at the end of the stream.
bool drain(int fd, std::string& text, size_t max) {
  char buffer[4096];
  const ssize_t n = read(fd, buffer, sizeof buffer);
  if (n < 0 && errno == EINTR) return true;
  if (n <= 0) return false;
  text.append(buffer, static_cast<size_t>(n));
  if (text.size() > 2 * max) text.erase(0, text.size() - max);
  return true;
}

void record_status(ProcessResult& result, int status) {
  if (WIFEXITED(status)) result.exit_status = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) result.signal = WTERMSIG(status);
}

}  // namespace

JudgedResult run_judged(const std::vector<std::string>& student_argv, const std::vector<std::string>& judge_argv,
                        double timeout_seconds, const std::vector<std::string>& environment, size_t max_output,
                        const Sandbox& sandbox) {
  JudgedResult r;
  // What the student's side leaves behind comes back here when its parent ends (setsid() takes a
  // process out of the group the kills below reach, not out of this process's descendants).
  prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
  const std::vector<pid_t> earlier = child_processes();
  // [0] read end, [1] write end; all close-on-exec.
  int out[2], frames[2], verdict[2], errors[2];
  for (int* p : {out, frames, verdict, errors})
    if (pipe2(p, O_CLOEXEC) != 0) {
      r.judge.output.clear();
      r.judge_errors = "could not make a pipe";
      return r;
    }
  const int null_in = open("/dev/null", O_RDONLY | O_CLOEXEC);
  const auto start = std::chrono::steady_clock::now();
  const pid_t student = start_child(student_argv, {{null_in, 0}, {out[1], 1}, {out[1], 2}, {frames[1], 3}}, environment,
                                    sandbox, true, timeout_seconds);
  const pid_t judge = start_child(judge_argv, {{null_in, 0}, {verdict[1], 1}, {errors[1], 2}, {frames[0], 3}},
                                  environment, sandbox, false, timeout_seconds);
  for (const int fd : {out[1], frames[0], frames[1], verdict[1], errors[1], null_in}) close(fd);
  const auto deadline = start + std::chrono::duration<double>(timeout_seconds);
  bool student_done = student < 0, judge_done = judge < 0, timed_out = false;
  bool open_out = true, open_verdict = true, open_errors = true;
  int status = 0;
  while (!judge_done || open_verdict || open_errors) {
    if (!student_done && waitpid(student, &status, WNOHANG) == student)
      student_done = true, record_status(r.student, status);
    if (!judge_done && waitpid(judge, &status, WNOHANG) == judge) judge_done = true, record_status(r.judge, status);
    if (std::chrono::steady_clock::now() >= deadline) {
      timed_out = true;
      break;
    }
    pollfd fds[3] = {{open_out ? out[0] : -1, POLLIN, 0},
                     {open_verdict ? verdict[0] : -1, POLLIN, 0},
                     {open_errors ? errors[0] : -1, POLLIN, 0}};
    if (poll(fds, 3, 20) <= 0) continue;
    if (fds[0].revents) open_out = drain(out[0], r.student.output, max_output);
    if (fds[1].revents) open_verdict = drain(verdict[0], r.judge.output, size_t{4} << 20);
    if (fds[2].revents) open_errors = drain(errors[0], r.judge_errors, max_output);
  }
  if (timed_out) {
    r.student.timed_out = r.judge.timed_out = true;
    if (!judge_done) kill(-judge, SIGKILL), waitpid(judge, nullptr, 0);
  }
  if (!student_done && !timed_out) {
    // The judge is done; the student's side may be ending by itself (a crash, an exit). An exiting
    // process's descriptors are released one by one and it is reaped only after, so the judge can
    // see the end of the frames while the output is still open and waitpid finds nothing yet: under
    // load that window lasted long enough for a crash to be counted as stopped by the grader and
    // its SIGSEGV line lost (1 run in 15 with three busy loops beside it). So it gets up to
    // kEndingGrace to be reaped, its output drained meanwhile; one still running then is stopped.
    // Generous: under AddressSanitizer a crash first writes and symbolizes its report (about 0.3 s
    // on an idle machine here), and a loaded machine stretches that.
    constexpr auto kEndingGrace = std::chrono::seconds(10);
    const auto grace = std::min(deadline, decltype(deadline)(std::chrono::steady_clock::now() + kEndingGrace));
    while (std::chrono::steady_clock::now() < grace) {
      if (waitpid(student, &status, WNOHANG) == student) {
        student_done = true, record_status(r.student, status);
        break;
      }
      pollfd fd{open_out ? out[0] : -1, POLLIN, 0};  // -1: no descriptor, the poll only waits
      if (poll(&fd, 1, 5) > 0) open_out = drain(out[0], r.student.output, max_output);
    }
  }
  if (!student_done) {
    r.student_killed = !timed_out;
    kill(-student, SIGKILL);
    waitpid(student, &status, 0);
    if (timed_out) record_status(r.student, status);
  }
  kill(-student, SIGKILL);  // whatever else is left of its group
  while (open_out) {
    pollfd fd{out[0], POLLIN, 0};
    if (poll(&fd, 1, 50) <= 0) break;
    open_out = drain(out[0], r.student.output, max_output);
  }
  for (const int fd : {out[0], verdict[0], errors[0]}) close(fd);
  r.student.seconds = r.judge.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (sandbox.active()) r.student.lingering = kill_user_processes(sandbox.uid);
  // Without a sandbox, or a process that escaped its user (none should): every descendant left.
  // The members of the two groups killed above are only ending; they are reaped, not counted.
  r.student.lingering += kill_descendants(earlier, {student, judge});
  if (r.student.output.size() > max_output) r.student.output.erase(0, r.student.output.size() - max_output);
  return r;
}

namespace {

struct ProcessEntry {
  pid_t pid = 0, parent = 0, group = 0;
  bool zombie = false;
};

// Every process now, from /proc/PID/stat ("PID (COMM) STATE PPID PGRP ...": COMM may hold spaces
// and parentheses, so the fields are read after its last ')').
std::vector<ProcessEntry> process_table() {
  std::vector<ProcessEntry> table;
  DIR* proc = opendir("/proc");
  if (!proc) return table;
  while (const dirent* entry = readdir(proc)) {
    if (entry->d_name[0] < '0' || entry->d_name[0] > '9') continue;
    std::ifstream in(std::string("/proc/") + entry->d_name + "/stat");
    std::string stat;
    if (!std::getline(in, stat)) continue;
    const size_t close = stat.rfind(')');
    if (close == std::string::npos || close + 2 >= stat.size()) continue;
    ProcessEntry e;
    char state = '?';
    int parent = 0, group = 0;
    if (std::sscanf(stat.c_str() + close + 2, "%c %d %d", &state, &parent, &group) != 3) continue;
    e.pid = std::atoi(entry->d_name);
    e.parent = parent;
    e.group = group;
    e.zombie = state == 'Z' || state == 'X';
    table.push_back(e);
  }
  closedir(proc);
  return table;
}

}  // namespace

std::vector<pid_t> child_processes() {
  std::vector<pid_t> children;
  for (const ProcessEntry& e : process_table())
    if (e.parent == getpid()) children.push_back(e.pid);
  return children;
}

int kill_descendants(const std::vector<pid_t>& keep, const std::vector<pid_t>& killed_groups) {
  const pid_t self = getpid();
  std::set<pid_t> seen;
  int counted = 0;
  for (int round = 0; round < 100; ++round) {
    std::multimap<pid_t, pid_t> children;
    std::map<pid_t, ProcessEntry> by_pid;
    for (const ProcessEntry& e : process_table()) {
      children.emplace(e.parent, e.pid);
      by_pid[e.pid] = e;
    }
    std::vector<pid_t> found, pending;
    for (auto [at, end] = children.equal_range(self); at != end; ++at)
      if (std::find(keep.begin(), keep.end(), at->second) == keep.end()) pending.push_back(at->second);
    while (!pending.empty()) {
      const pid_t pid = pending.back();
      pending.pop_back();
      found.push_back(pid);
      for (auto [at, end] = children.equal_range(pid); at != end; ++at) pending.push_back(at->second);
    }
    if (found.empty()) break;
    for (const pid_t pid : found) {
      const ProcessEntry& e = by_pid[pid];
      if (e.zombie) continue;
      const bool killed_already = std::find(killed_groups.begin(), killed_groups.end(), e.group) != killed_groups.end();
      if (seen.insert(pid).second && !killed_already) ++counted;
      kill(pid, SIGKILL);
    }
    for (const pid_t pid : found)
      if (by_pid[pid].parent == self) waitpid(pid, nullptr, WNOHANG);  // a child of its own: reap it
    usleep(round < 10 ? 2000 : 20000);
  }
  return counted;
}

std::string first_readable(const Sandbox& sandbox, const std::vector<std::string>& paths) {
  if (!sandbox.active() || paths.empty()) return "";
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return "";
  const pid_t child = fork();
  if (child == 0) {
    close(fds[0]);
    if (setgroups(0, nullptr) != 0 || setresgid(sandbox.gid, sandbox.gid, sandbox.gid) != 0 ||
        setresuid(sandbox.uid, sandbox.uid, sandbox.uid) != 0)
      _exit(126);
    for (uint32_t i = 0; i < paths.size(); ++i)
      if (access(paths[i].c_str(), R_OK) == 0) {
        (void)!write(fds[1], &i, sizeof i);
        _exit(0);
      }
    _exit(0);
  }
  close(fds[1]);
  uint32_t index = 0;
  ssize_t n = -1;
  if (child > 0) {
    do n = read(fds[0], &index, sizeof index);
    while (n < 0 && errno == EINTR);
    waitpid(child, nullptr, 0);
  }
  close(fds[0]);
  return n == static_cast<ssize_t>(sizeof index) && index < paths.size() ? paths[index] : "";
}

int count_user_processes(int uid) {
  int count = 0;
  DIR* proc = opendir("/proc");
  if (!proc) return 0;
  while (const dirent* entry = readdir(proc)) {
    if (entry->d_name[0] < '0' || entry->d_name[0] > '9') continue;
    std::ifstream status(std::string("/proc/") + entry->d_name + "/status");
    bool zombie = false, mine = false;
    for (std::string line; std::getline(status, line);) {
      if (line.rfind("State:", 0) == 0) zombie = line.find('Z') != std::string::npos;
      if (line.rfind("Uid:", 0) == 0) mine = std::atoi(line.c_str() + 4) == uid;
    }
    count += mine && !zombie ? 1 : 0;
  }
  closedir(proc);
  return count;
}

int kill_user_processes(int uid) {
  const int found = count_user_processes(uid);
  for (int round = 0; round < 50 && count_user_processes(uid) > 0; ++round) {
    const pid_t killer = fork();
    if (killer == 0) {
      // kill(-1) from this user reaches every process it may signal: exactly its own.
      if (setresuid(uid, uid, uid) == 0) kill(-1, SIGKILL);
      _exit(0);
    }
    if (killer > 0) waitpid(killer, nullptr, 0);
    usleep(20000);
  }
  return found;
}

ProcessResult run_process(const std::vector<std::string>& argv, double timeout_seconds,
                          const std::vector<std::string>& environment, size_t max_output, const Sandbox& sandbox) {
  ProcessResult result;
  int pipe_fds[2];
  if (argv.empty() || pipe2(pipe_fds, O_CLOEXEC) != 0) {
    result.output = "could not start a process";
    return result;
  }
  const auto start = std::chrono::steady_clock::now();
  const pid_t child = start_child(argv, {{pipe_fds[1], STDOUT_FILENO}, {pipe_fds[1], STDERR_FILENO}}, environment,
                                  sandbox, true, timeout_seconds);
  close(pipe_fds[1]);
  if (child < 0) {
    close(pipe_fds[0]);
    result.output = "fork failed";
    return result;
  }
  const auto deadline = start + std::chrono::duration<double>(timeout_seconds);
  pollfd fd{pipe_fds[0], POLLIN, 0};
  bool open = true;
  int status = 0;
  bool reaped = false;
  auto reaped_at = start;
  while (open) {
    const auto now = std::chrono::steady_clock::now();
    if (sandbox.active() && !reaped && !result.timed_out && waitpid(child, &status, WNOHANG) == child) {
      reaped = true;  // it ended; a process it left behind may still hold the output open
      reaped_at = now;
    }
    if (reaped && now - reaped_at > std::chrono::milliseconds(500)) break;
    if (now >= deadline && !result.timed_out) {
      kill(-child, SIGKILL);
      result.timed_out = true;
    }
    const int wait_ms =
        result.timed_out
            ? 200
            : static_cast<int>(std::max<int64_t>(
                  1, std::min<int64_t>(200,
                                       std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count())));
    const int ready = poll(&fd, 1, wait_ms);
    if (ready <= 0) {
      if (result.timed_out) break;  // killed and silent: stop reading
      continue;
    }
    char buffer[4096];
    const ssize_t n = read(pipe_fds[0], buffer, sizeof buffer);
    if (n > 0) {
      result.output.append(buffer, static_cast<size_t>(n));
      if (result.output.size() > 2 * max_output) result.output.erase(0, result.output.size() - max_output);
    } else {
      open = false;
    }
  }
  close(pipe_fds[0]);
  while (!reaped && !result.timed_out && waitpid(child, &status, WNOHANG) == 0) {
    // Output closed but the child still runs (it closed its stdout): wait for it, up to the limit.
    if (std::chrono::steady_clock::now() >= deadline) {
      kill(-child, SIGKILL);
      result.timed_out = true;
      break;
    }
    usleep(10000);
  }
  if (result.timed_out && !reaped) {
    kill(-child, SIGKILL);  // the whole group; its id stays ours until the child is reaped here
    waitpid(child, &status, 0);
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // Whatever it left behind (a child that called setsid() escaped the group kill) goes now, before
  // the caller reads any result.
  if (sandbox.active()) result.lingering = kill_user_processes(sandbox.uid);
  if (WIFEXITED(status)) result.exit_status = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) result.signal = WTERMSIG(status);
  if (result.output.size() > max_output) result.output.erase(0, result.output.size() - max_output);
  return result;
}

}  // namespace ringlab::grader
