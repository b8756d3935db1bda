#include "sim/ranks/counters.hpp"

#include <cstdio>
#include <ostream>

namespace ringlab {

void print_counters(std::ostream& out, std::span<const RankCounters> counters) {
  char line[200];
  std::snprintf(line, sizeof line, "%5s %10s %10s %10s %10s %6s %10s %10s %10s\n", "rank", "msgs sent", "MB sent",
                "msgs recv", "MB recv", "colls", "blocked s", "compute s", "GFLOP");
  out << line;
  for (size_t rank = 0; rank < counters.size(); ++rank) {
    const RankCounters& c = counters[rank];
    std::snprintf(line, sizeof line, "%5zu %10lld %10.3f %10lld %10.3f %6lld %10.4f %10.4f %10.3f\n", rank,
                  static_cast<long long>(c.messages_sent), static_cast<double>(c.bytes_sent) / 1e6,
                  static_cast<long long>(c.messages_received), static_cast<double>(c.bytes_received) / 1e6,
                  static_cast<long long>(c.collectives), c.blocked_seconds, c.compute_seconds, c.flops / 1e9);
    out << line;
  }
}

}  // namespace ringlab
