// Ulysses (Jacobs et al. 2023) and the hybrid Ulysses x ring (USP).
//
// Ulysses: an all-to-all inside a group of U ranks turns sequence-sharded q, k, v (each rank:
// S/P tokens, all heads) into head-sharded ones (each rank: the group's S/R tokens, H/U heads);
// each rank computes attention for its heads; a second all-to-all brings out (and lse) back to
// sequence-sharded. Needs H and HKV divisible by U.
//
// Hybrid: U ranks per Ulysses group (inside a node: fast all-to-all), R = P/U groups on a ring
// (across nodes). After the all-to-all, ranks with the same Ulysses index u form a ring over the
// R groups' token blocks: the ring loops of sim/plan/algorithms/ring.cpp run unchanged on it. The
// layout (zig-zag included) is applied over all P ranks and a group's block is the union of its
// members' tokens — which is the same layout over R positions, so zig-zag stays balanced.
// Pure Ulysses is the hybrid with R = 1: a ring of one, a single local compute.
//
// Forward:   all-to-all q, k, v | ring forward (R steps) | finalize | all-to-all out, lse
// Backward:  all-to-all dout    | ring backward          | all-to-all dq, dk, dv
#include "sim/plan/plan.hpp"

namespace ringlab {

std::vector<Phase> ulysses_phases(const PlanSpec& spec) {
  const std::vector<int64_t> travel = ring_travel(spec);  // the ring inside each head group
  std::vector<Phase> phases;
  phases.push_back(
      {"all-to-all q, k, v", Pass::forward, Family::ulysses, 1, {{CollectiveT{Collective::all_to_all_qkv}, Steps{}}}});
  phases.push_back(ring_forward_phase(spec, travel));
  phases.push_back({"finalize", Pass::forward, Family::ring, 1, {{FinalizeT{}, Steps{}}}});
  phases.push_back(
      {"all-to-all out, lse", Pass::forward, Family::ulysses, 1, {{CollectiveT{Collective::all_to_all_out}, Steps{}}}});
  if (spec.backward) {
    phases.push_back(
        {"all-to-all dout", Pass::backward, Family::ulysses, 1, {{CollectiveT{Collective::all_to_all_dout}, Steps{}}}});
    phases.push_back(ring_backward_phase(spec, travel));
    phases.push_back({"all-to-all dq, dk, dv",
                      Pass::backward,
                      Family::ulysses,
                      1,
                      {{CollectiveT{Collective::all_to_all_grads}, Steps{}}}});
  }
  return phases;
}

}  // namespace ringlab
