#include "sim/pipeline/progress.hpp"

#include <unistd.h>

#include <chrono>
#include <cstdio>

namespace ringlab::cli {

ProgressBar::ProgressBar(const std::atomic<int64_t>& done, int64_t total, bool enabled) : done_(done), total_(total) {
  if (enabled && total > 0 && ::isatty(STDERR_FILENO)) thread_ = std::thread([this] { loop(); });
}

ProgressBar::~ProgressBar() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  stop_signal_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (drawn_) std::fprintf(stderr, "\r%60s\r", "");
}

void ProgressBar::loop() {
  using namespace std::chrono_literals;
  std::unique_lock lock(mutex_);
  if (stop_signal_.wait_for(lock, 1s, [this] { return stopping_; })) return;  // quick runs draw nothing
  while (!stopping_) {
    const int64_t done = done_.load(std::memory_order_relaxed);
    const int width = 40;
    const int filled = static_cast<int>(width * done / total_);
    char bar[width + 1];
    for (int i = 0; i < width; ++i) bar[i] = i < filled ? '#' : '.';
    bar[width] = '\0';
    std::fprintf(stderr, "\r[%s] %3d%% of %lld ops", bar, static_cast<int>(100 * done / total_),
                 static_cast<long long>(total_));
    std::fflush(stderr);
    drawn_ = true;
    stop_signal_.wait_for(lock, 200ms, [this] { return stopping_; });
  }
}

}  // namespace ringlab::cli
