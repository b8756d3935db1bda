// report_row.hpp — the one line each benchmark adds per headline figure, for scripts/bench, and the
// timing helper the CPU benchmarks share.
//
// A benchmark prints its own tables for people; next to them it prints, per headline figure,
//
//   @row|<group>|<what was measured>|<measured figure>|<target>|<verdict>
//
// and scripts/bench gathers those lines from every benchmark into one table (and the dated
// report). The figures in a row are the ones the benchmark measured side by side in its own run;
// the row only carries them. Verdict: "met", "MISSED", or "-" where there is no target.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace ringlab::bench {

// printf-style formatting into a std::string (benchmarks format figures with units in place).
inline std::string format(const char* pattern, ...) {
  char buffer[256];
  va_list args;
  va_start(args, pattern);
  std::vsnprintf(buffer, sizeof buffer, pattern, args);
  va_end(args);
  return buffer;
}

inline void report_row(const std::string& group, const std::string& what, const std::string& measured,
                       const std::string& target, const char* verdict) {
  std::printf("@row|%s|%s|%s|%s|%s\n", group.c_str(), what.c_str(), measured.c_str(), target.c_str(), verdict);
  std::fflush(stdout);
}

inline const char* verdict(bool met) { return met ? "met" : "MISSED"; }

// The arguments of a benchmark that takes only --quick (small sizes, for the smoke test of its
// table): true with --quick, false with none; anything else prints the usage and exits 2.
inline bool quick_flag(int argc, char** argv, const char* program) {
  bool quick = false;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--quick") {
      quick = true;
    } else {
      std::fprintf(stderr, "usage: %s [--quick]\n", program);
      std::exit(2);
    }
  }
  return quick;
}

// The best of `repeat` timings of run(), seconds (the least disturbed by the rest of the machine).
template <class F>
double best_seconds(int repeat, F&& run) {
  double best = 1e30;
  for (int i = 0; i < repeat; ++i) {
    const auto start = std::chrono::steady_clock::now();
    run();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return best;
}

}  // namespace ringlab::bench
