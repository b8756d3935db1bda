// Child processes with a wall-clock limit (process.hpp).
#include "exercises/grader/process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>

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

ProcessResult run_process(const std::vector<std::string>& argv, double timeout_seconds,
                          const std::vector<std::string>& environment, size_t max_output) {
  ProcessResult result;
  int pipe_fds[2];
  if (argv.empty() || pipe(pipe_fds) != 0) {
    result.output = "could not start a process";
    return result;
  }
  const auto start = std::chrono::steady_clock::now();
  const pid_t child = fork();
  if (child < 0) {
    close(pipe_fds[0]), close(pipe_fds[1]);
    result.output = "fork failed";
    return result;
  }
  if (child == 0) {
    setpgid(0, 0);  // its own group: a timeout kills it and every thread or child it made
    dup2(pipe_fds[1], STDOUT_FILENO);
    dup2(pipe_fds[1], STDERR_FILENO);
    close(pipe_fds[0]), close(pipe_fds[1]);
    for (const std::string& entry : environment) putenv(const_cast<char*>(entry.c_str()));
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    const char* message = "could not execute the program\n";
    (void)!write(STDERR_FILENO, message, strlen(message));
    _exit(127);
  }
  setpgid(child, child);  // also from this side, so the group exists before any kill below
  close(pipe_fds[1]);
  const auto deadline = start + std::chrono::duration<double>(timeout_seconds);
  pollfd fd{pipe_fds[0], POLLIN, 0};
  bool open = true;
  while (open) {
    const auto now = std::chrono::steady_clock::now();
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
  int status = 0;
  while (!result.timed_out && waitpid(child, &status, WNOHANG) == 0) {
    // Output closed but the child still runs (it closed its stdout): wait for it, up to the limit.
    if (std::chrono::steady_clock::now() >= deadline) {
      kill(-child, SIGKILL);
      result.timed_out = true;
      break;
    }
    usleep(10000);
  }
  if (result.timed_out) {
    kill(-child, SIGKILL);  // the whole group; its id stays ours until the child is reaped here
    waitpid(child, &status, 0);
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (WIFEXITED(status)) result.exit_status = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) result.signal = WTERMSIG(status);
  if (result.output.size() > max_output) result.output.erase(0, result.output.size() - max_output);
  return result;
}

}  // namespace ringlab::grader
