// The counters every executor keeps per rank (part of RankSummary, sim/pipeline/result.hpp). A header
// of its own because the virtual-rank runtime (sim/ranks), which the code labs compile against,
// fills them and must not bring plans and kernels into a student's namespace.
#pragma once

#include <cstdint>

namespace ringlab {

// Traffic and time of one rank. Every message counts, the collectives' internal ones included.
struct RankCounters {
  int64_t messages_sent = 0;
  int64_t bytes_sent = 0;
  int64_t messages_received = 0;
  int64_t bytes_received = 0;
  int64_t collectives = 0;     // collective calls (barrier, all_to_all, ..., split)
  double blocked_seconds = 0;  // waiting for a message, a rendezvous match or a collective
  double compute_seconds = 0;  // inside compute scopes (attention kernels)
  double flops = 0;            // as declared by the compute scopes
};

}  // namespace ringlab
