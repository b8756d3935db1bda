// Per-rank counters of a simulated run (RankCounters, sim/pipeline/rank_counters.hpp: the same counters every
// executor reports): traffic, time blocked in the communicator, time in compute scopes
// (ComputeScope / Communicator::compute). Every message counts, the collectives' internal ones
// included.
#pragma once

#include <iosfwd>
#include <span>

#include "sim/pipeline/rank_counters.hpp"

namespace ringlab {

// One fixed-width table, a row per rank:
//   rank  msgs sent  MB sent  msgs recv  MB recv  colls  blocked s  compute s  GFLOP
void print_counters(std::ostream& out, std::span<const RankCounters> counters);

}  // namespace ringlab
