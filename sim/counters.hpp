// Per-rank counters of a simulated run: traffic, time blocked in the communicator, time in
// compute scopes. Every message counts, the collectives' internal ones included.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <span>

namespace ringlab {

struct RankCounters {
  int64_t messages_sent = 0;
  int64_t bytes_sent = 0;
  int64_t messages_received = 0;
  int64_t bytes_received = 0;
  int64_t collectives = 0;       // collective calls (barrier, all_to_all, ..., split)
  double blocked_seconds = 0;    // waiting for a message, a rendezvous match or a collective
  double compute_seconds = 0;    // inside ComputeScope / Communicator::compute
  double flops = 0;              // as declared by the compute scopes
};

// One fixed-width table, a row per rank:
//   rank  msgs sent  MB sent  msgs recv  MB recv  colls  blocked s  compute s  GFLOP
void print_counters(std::ostream& out, std::span<const RankCounters> counters);

}  // namespace ringlab
