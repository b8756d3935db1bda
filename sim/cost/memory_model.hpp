// Memory per rank, by phase: what a plan keeps allocated while each phase runs. Every rank of a
// plan holds the same sizes (blocks are equal), so one table describes them all.
//
// Buffers and their sizes (t = S/P a rank's tokens, n = S/R a ring block's tokens, h = H/U and
// hk = HKV/U the heads a rank computes, e the element bytes; accumulators and gradients fp32):
//   inputs        q, k, v as the rank received them (t tokens, all heads)  t (H + 2 HKV) D B e
//                 + dout for the backward                                   t H D B e
//   working       after the Ulysses all-to-all (U > 1): q, k, v [dout] of the block, h heads
//   kv slots      each K/V slot (kv0, kv1: the double buffer)               2 n hk D B e
//   gathered kv   all R blocks' K/V after the all-gather                    R x a K/V slot
//   accumulators  forward: o, m, l of the online softmax                    n h B (D + 2) 4
//                 backward: dq and delta                                    n h B (D + 1) 4
//   dkv slots     dK/dV accumulators that travel (dkv0, dkv1, dkv_local)    2 n hk D B 4 each
//                 and the gathered dK/dV before the reduce-scatter          R x that
//   staging       an all-to-all's send and receive buffers                  2 x the rank's shard
//   outputs       out and lse (kept for the backward), then dk, dv / dq, dk, dv
// Liveness, read from the plan's templates (op kinds, no algorithm): a slot is live from the first
// phase of a pass that names it to the last; accumulators from the first compute of the pass to
// its finalize (forward) or to the end (backward); working tensors and outputs from the phase that
// makes them to the end; staging only during its all-to-all.
#pragma once

#include <array>
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "sim/plan/plan.hpp"

namespace ringlab {

enum class MemoryCategory : uint8_t {
  inputs,
  working,
  kv_slots,
  gathered_kv,
  accumulators,
  dkv_slots,
  staging,
  outputs,
  count
};
inline constexpr size_t kMemoryCategories = static_cast<size_t>(MemoryCategory::count);
const char* memory_category_name(MemoryCategory category);  // "inputs", "kv slots", ...

struct PhaseMemory {
  std::string phase;
  std::array<int64_t, kMemoryCategories> bytes{};
  int64_t total() const;
};

struct MemoryReport {
  std::vector<PhaseMemory> phases;  // one per plan phase, in order
  int64_t peak_bytes = 0;
  int peak_phase = 0;  // index into phases
};

MemoryReport memory_per_rank(const Plan& plan);
nlohmann::json to_json(const MemoryReport& memory);

}  // namespace ringlab
