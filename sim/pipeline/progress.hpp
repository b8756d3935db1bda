// A progress bar on stderr for runs that take more than a second, shown only when stderr is a
// terminal. Reads an atomic counter that the executor increments; draws from its own thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>

namespace ringlab::cli {

class ProgressBar {
 public:
  ProgressBar(const std::atomic<int64_t>& done, int64_t total, bool enabled);
  ~ProgressBar();  // stops the thread and clears the line
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

 private:
  void loop();

  const std::atomic<int64_t>& done_;
  int64_t total_;
  bool drawn_ = false;
  std::mutex mutex_;
  std::condition_variable stop_signal_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace ringlab::cli
