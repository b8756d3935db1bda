// Questions about a plan that its users all ask — the executors, the checker, the cost model's
// memory model and the viewer — answered once here instead of in each of them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/plan/plan.hpp"

namespace ringlab {

// The family a collective runs in: the Ulysses all-to-alls within a Ulysses group, the all-gather
// and reduce-scatter of K/V and dK/dV along a ring group.
Family collective_family(Collective collective);
inline bool is_ulysses_collective(Collective collective) { return collective_family(collective) == Family::ulysses; }

// Whether any phase of the plan has this collective, or any collective of this family.
bool plan_uses(const Plan& plan, Collective collective);
bool plan_uses(const Plan& plan, Family family);

// Whether a compute op of the kv-offset-mask erratum gets the mask wrong for its queries (the
// source's code: the block at offset 0 unmasked, every other block masked by the query's index
// within its block): an unmasked block 0 that holds keys after some query, or a local-index mask
// on queries that are not the positions 0..n-1. False for every op of a plan without the erratum.
bool erratum_mask_is_wrong(const Plan& plan, const ComputeOp& op);
// What is wrong with it, in one phrase ("" when nothing is).
std::string erratum_mask_problem(const Plan& plan, const ComputeOp& op);

// Every ring position's tokens, ring position by ring position (each ascending): the rows of a
// gathered slot (gathered_kv, gathered_dkv).
std::vector<int64_t> gathered_positions(const Plan& plan);

// The rows of `rank`'s own layout tokens within its ring position's block (Plan::block_positions):
// where the Ulysses all-to-all puts that member's rows. One entry per token of the rank, in the
// order of Layout::positions(rank).
std::vector<int64_t> member_rows(const Plan& plan, int64_t rank);

// One rank's work and K/V traffic under a plan, from its expanded ops.
struct RankWork {
  int64_t computed = 0, skipped = 0;  // compute ops with and without a kernel call
  int64_t partial = 0;                // computed under a mask (diagonal, partial, masked, erratum)
  int64_t pairs = 0;                  // visible (query, key) pairs per (batch, head), both passes
  double flops = 0;
  int64_t kv_bytes_received = 0;  // K/V received by ring exchanges and all-gathers
  int64_t kv_bytes_unused = 0;    // of those, blocks none of whose keys this rank's queries see
};
RankWork rank_work(const Plan& plan, int64_t rank, const std::vector<Op>& ops);

// The load balance over ranks: max/mean FLOPs (1 when nothing is computed) and the busiest rank.
struct FlopsBalance {
  double ratio = 1.0;
  int64_t busiest = 0;
};
FlopsBalance flops_balance(const std::vector<RankWork>& work);

// Ops over all ranks (for a progress bar): the sum over ranks of expand(plan, rank).size(),
// computed from the templates without expanding.
int64_t total_ops(const Plan& plan);

}  // namespace ringlab
