// All-gather K/V (the Llama-3 style): every rank gathers all K/V blocks at once, computes its
// queries against each, and in the backward returns dK/dV with a reduce-scatter.
//
// Forward:   all-gather K/V -> gathered_kv (ring position order)
//            step t = 0..R-1: own queries x block g - t of gathered_kv
//            finalize
// Backward:  all-gather K/V again (the forward's copy is not kept: that is the memory saving)
//            step t: own queries x block g - t -> dq += ..., dK/dV into block g - t of gathered_dkv
//            reduce-scatter gathered_dkv (sum in ring order): each rank keeps its own block's
// Simple, no overlap: compute starts only when the gather is complete, and the gathered K/V
// costs S/P times more memory than the ring's two blocks.
#include "sim/plan/plan.hpp"

namespace ringlab {

std::vector<Phase> allgather_phases(const PlanSpec& spec) {
  const int64_t R = spec.ring_degree();
  const SlotPair gathered{Slot::gathered_kv, Slot::gathered_kv, 0};
  const SlotPair gathered_grads{Slot::gathered_dkv, Slot::gathered_dkv, 0};
  const Shift block_of_step{0, -1};
  std::vector<Phase> phases;
  phases.push_back(
      {"all-gather K/V", Pass::forward, Family::ring, 1, {{CollectiveT{Collective::all_gather_kv}, Steps{}}}});
  phases.push_back({"attention over gathered K/V",
                    Pass::forward,
                    Family::ring,
                    R,
                    {{ComputeT{Pass::forward, gathered, block_of_step, true, {}, false}, Steps{}}}});
  phases.push_back({"finalize", Pass::forward, Family::ring, 1, {{FinalizeT{}, Steps{}}}});
  if (spec.backward) {
    phases.push_back({"all-gather K/V (backward)",
                      Pass::backward,
                      Family::ring,
                      1,
                      {{CollectiveT{Collective::all_gather_kv}, Steps{}}, {PrepareBackwardT{}, Steps{}}}});
    phases.push_back({"attention backward over gathered K/V",
                      Pass::backward,
                      Family::ring,
                      R,
                      {{ComputeT{Pass::backward, gathered, block_of_step, true, gathered_grads, true}, Steps{}}}});
    phases.push_back({"reduce-scatter dK/dV",
                      Pass::backward,
                      Family::ring,
                      1,
                      {{CollectiveT{Collective::reduce_scatter_dkv}, Steps{}},
                       {StoreGradsT{SlotPair{Slot::dkv0, Slot::dkv0, 0}}, Steps{}}}});
  }
  return phases;
}

}  // namespace ringlab
