// Ring attention (Liu et al. 2023): queries stay, K/V blocks travel one hop per step.
//
// Forward, on each rank of a ring of R, at step t = 0..R-1 it holds the block of ring position
// g - t (its own first) in kv[t % 2]:
//     step t:  [t < R-1] exchange: send kv[t] to g+1, receive kv[t+1] from g-1   (double buffer)
//              compute:  own queries x kv[t], merged into the online-softmax accumulator
//              [t < R-1] wait for the exchange
//   The transfer for step t+1 overlaps the compute of step t.
//
// Backward: K/V travel exactly as in the forward; dq accumulates locally; the dK/dV accumulator
// of a block travels WITH the block, one step behind, and takes one extra hop home (R sends of
// dK/dV vs R-1 of K/V), as in zhuzilin/ring-flash-attention and PyTorch context parallel:
//     step t:  [t < R-1] exchange K/V as in the forward
//              compute:  own queries x kv[t] -> dq += ..., this step's dK/dV -> dkv_local
//              [t > 0]   wait for the accumulator of block g - t sent by g-1 last step (dkv[t])
//              dkv[t] += dkv_local
//              [t < R-1] wait for K/V
//              exchange: send dkv[t] to g+1, receive dkv[t+1] from g-1
//              [t = R-1] wait: dkv[R] is now the full gradient of this rank's own block
//
// Trimmed ring, under a window or documents (with skipping): no rank forwards K/V that no later
// rank needs. Block b's travel T(b) is the farthest hop at which the rank b + h still sees some of
// its keys; the block goes b -> b+1 -> ... -> b + T(b) and no farther (the ranks on the way that
// see none of it pass it on). The loops run H + 1 steps, H = max T(b) = ring_hops(spec): a
// contiguous causal window of W tokens over blocks of n needs H = ceil((W - 1) / n), and no block
// wraps past rank R - 1 to ranks whose queries all precede it. In the backward each dK/dV
// accumulator follows its block one step behind and goes home in one message from b + T(b)
// (Phase::travel, Route::along / home). With --no-skip the loops still stop after H hops, but every
// block makes all of them.
//
// The erratum variant reverse-dkv (the book's erratum 1) sends the accumulator to g-1 and receives
// from g+1 instead: rank g then adds block g - t's gradient into block g - t + 2's accumulator,
// which is right only when R <= 2.
#include <algorithm>

#include "reference/error.hpp"
#include "sim/plan/plan.hpp"

namespace ringlab {

namespace {

constexpr int kKvExchange = 0;
constexpr int kDkvExchange = 1;
constexpr int kDkvHome = 2;

const SlotPair kKvNow{Slot::kv0, Slot::kv1, 0};
const SlotPair kKvNext{Slot::kv0, Slot::kv1, 1};
const SlotPair kDkvNow{Slot::dkv0, Slot::dkv1, 0};
const SlotPair kDkvNext{Slot::dkv0, Slot::dkv1, 1};
const SlotPair kDkvLocal{Slot::dkv_local, Slot::dkv_local, 0};
const Shift kBlockOfStep{0, -1};  // ring position g - t

}  // namespace

namespace {

// Whether the ring follows each block's own travel (a window or documents, skipping on, no erratum).
bool trimmed(const PlanSpec& spec) {
  return spec.ring_degree() > 1 && spec.skip && !spec.full_ring && spec.erratum == Erratum::none &&
         (spec.window > 0 || spec.documents.size() > 1);
}

}  // namespace

std::vector<int64_t> ring_travel(const PlanSpec& spec) {
  const int64_t R = spec.ring_degree();
  std::vector<int64_t> travel(static_cast<size_t>(R), R - 1);
  if (!spec.mask().general() || R == 1 || spec.full_ring) return travel;
  // A trimmed ring (below) probes each block's own travel from the farthest hop down: up to R^2
  // probes when the window or the documents are short (R = 16384: 2.7 x 10^8, tens of seconds).
  // Past that it is refused at once rather than planned for minutes.
  constexpr int64_t kMostTrimmedRing = 16384;
  if (trimmed(spec) && R > kMostTrimmedRing) {
    throw UsageError(
        "a ring of " + std::to_string(R) +
        " positions under a window or documents is trimmed block by block, more than ringlab plans in "
        "seconds (at most " +
        std::to_string(kMostTrimmedRing) +
        " positions); use fewer --ranks, or --algo hybrid with a Ulysses degree U, which shortens the ring");
  }
  const Plan probe(spec, {});
  if (!trimmed(spec)) {
    // Untrimmed (padding alone, --no-skip, an erratum): the loops run max T(b) + 1 steps and no
    // block's own travel is used, so only the largest counts: each block is probed only above the
    // largest so far, and the search ends at R - 1. O(R) probes, where finding every T(b) takes
    // one per hop a block does not make (a causal zig-zag ring padded to twice its S, whose block
    // b reaches only R - 1 - b hops: R^2 / 2 probes, minutes at R = 65536).
    int64_t most = 0;
    for (int64_t b = 0; b < R && most < R - 1; ++b)
      for (int64_t hops = R - 1; hops > most; --hops)
        if (block_mask_pairs(probe, (b + hops) % R, b) > 0) {
          most = hops;
          break;
        }
    std::fill(travel.begin(), travel.end(), most);
    return travel;
  }
  for (int64_t b = 0; b < R; ++b) {
    int64_t& hops = travel[static_cast<size_t>(b)];
    while (hops > 0 && block_mask_pairs(probe, (b + hops) % R, b) == 0) --hops;
  }
  return travel;
}

int64_t ring_hops(const PlanSpec& spec) {
  const std::vector<int64_t> travel = ring_travel(spec);
  return *std::max_element(travel.begin(), travel.end());
}

Phase ring_forward_phase(const PlanSpec& spec, const std::vector<int64_t>& travel) {
  const int64_t steps = *std::max_element(travel.begin(), travel.end()) + 1;
  const Route route = trimmed(spec) ? Route::along : Route::fixed;
  Phase phase{"ring forward", Pass::forward, Family::ring, steps, {}};
  phase.body = {
      {LoadKvT{kKvNow}, Steps{0, steps - 1}},
      {ExchangeT{kKvExchange, Payload::kv, true, true, kKvNow, kKvNext, Shift{1, 0}, Shift{-1, 0}, route}, Steps{0, 1}},
      {ComputeT{Pass::forward, kKvNow, kBlockOfStep, false, {}, false}, Steps{},
       route == Route::along ? Needs::held : Needs::always},
      {WaitT{kKvExchange, 0}, Steps{0, 1}},
  };
  if (route == Route::along) phase.travel = travel;
  return phase;
}

namespace {

// The backward of a trimmed ring: K/V go exactly where they went in the forward; a block's dK/dV
// accumulator follows it one step behind and, where the block's travel ends (t = travel[b] at rank
// b + t), goes home to b in one message, into dkv_home. A block that never left is home at once.
Phase trimmed_backward_phase(const std::vector<int64_t>& travel) {
  const int64_t H = *std::max_element(travel.begin(), travel.end());
  Phase phase{"ring backward", Pass::backward, Family::ring, H + 1, {}};
  const SlotPair home{Slot::dkv_home, Slot::dkv_home, 0};
  phase.body = {
      {PrepareBackwardT{}, Steps{0, H}},
      {LoadKvT{kKvNow}, Steps{0, H}},
      {ExchangeT{kKvExchange, Payload::kv, true, true, kKvNow, kKvNext, Shift{1, 0}, Shift{-1, 0}, Route::along},
       Steps{0, 1}},
      {ComputeT{Pass::backward, kKvNow, kBlockOfStep, false, kDkvLocal, false}, Steps{}, Needs::held},
      {WaitT{kDkvExchange, 1}, Steps{1, 0}},
      {AccumulateT{kDkvLocal, kDkvNow}, Steps{}, Needs::held},
      {StoreGradsT{kDkvNow}, Steps{0, H}, Needs::home_first},
      {WaitT{kKvExchange, 0}, Steps{0, 1}},
      {ExchangeT{kDkvExchange, Payload::dkv, true, true, kDkvNow, kDkvNext, Shift{1, 0}, Shift{-1, 0}, Route::along},
       Steps{0, 1}},
      {ExchangeT{kDkvHome, Payload::dkv, true, true, kDkvNow, home, Shift{0, -1}, Shift{0, 1}, Route::home},
       Steps{1, 0}},
      {WaitT{kDkvHome, 0}, Steps{1, 0}},
      {StoreGradsT{home}, Steps{1, 0}, Needs::home_now},
  };
  phase.travel = travel;
  return phase;
}

}  // namespace

Phase ring_backward_phase(const PlanSpec& spec, const std::vector<int64_t>& travel) {
  if (trimmed(spec)) return trimmed_backward_phase(travel);
  const int64_t R = spec.ring_degree(), H = *std::max_element(travel.begin(), travel.end());
  const bool reverse = spec.erratum == Erratum::reverse_dkv;
  const Shift dkv_to = reverse ? Shift{-1, 0} : Shift{1, 0};
  const Shift dkv_from = reverse ? Shift{1, 0} : Shift{-1, 0};
  Phase phase{reverse ? "ring backward (erratum: dK/dV against K/V)" : "ring backward",
              Pass::backward,
              Family::ring,
              H + 1,
              {}};
  phase.body = {
      {PrepareBackwardT{}, Steps{0, H}},
      {LoadKvT{kKvNow}, Steps{0, H}},
      {ExchangeT{kKvExchange, Payload::kv, true, true, kKvNow, kKvNext, Shift{1, 0}, Shift{-1, 0}}, Steps{0, 1}},
      {ComputeT{Pass::backward, kKvNow, kBlockOfStep, false, kDkvLocal, false}, Steps{}},
      {WaitT{kDkvExchange, 1}, Steps{1, 0}},
      {AccumulateT{kDkvLocal, kDkvNow}, Steps{}},
      {WaitT{kKvExchange, 0}, Steps{0, 1}},
  };
  if (H == 0) {  // no ring, or nothing to fetch: the rank's own accumulator is already home
    phase.body.push_back({StoreGradsT{kDkvNow}, Steps{}});
    return phase;
  }
  if (H < R - 1) {  // window-bounded: one hop along the ring per step, then home from g + H
    phase.body.push_back(
        {ExchangeT{kDkvExchange, Payload::dkv, true, true, kDkvNow, kDkvNext, Shift{1, 0}, Shift{-1, 0}}, Steps{0, 1}});
    phase.body.push_back(
        {ExchangeT{kDkvExchange, Payload::dkv, true, true, kDkvNow, kDkvNext, Shift{-H, 0}, Shift{H, 0}}, Steps{H, 0}});
    phase.body.push_back({WaitT{kDkvExchange, 0}, Steps{H, 0}});
    phase.body.push_back({StoreGradsT{kDkvNext}, Steps{H, 0}});
    return phase;
  }
  phase.body.push_back(
      {ExchangeT{kDkvExchange, Payload::dkv, true, true, kDkvNow, kDkvNext, dkv_to, dkv_from}, Steps{}});
  phase.body.push_back({WaitT{kDkvExchange, 0}, Steps{R - 1, 0}});
  phase.body.push_back({StoreGradsT{kDkvNext}, Steps{R - 1, 0}});
  return phase;
}

std::vector<Phase> ring_phases(const PlanSpec& spec) {
  const std::vector<int64_t> travel = ring_travel(spec);
  std::vector<Phase> phases{ring_forward_phase(spec, travel),
                            Phase{"finalize", Pass::forward, Family::ring, 1, {{FinalizeT{}, Steps{}}}}};
  if (spec.backward) phases.push_back(ring_backward_phase(spec, travel));
  return phases;
}

}  // namespace ringlab
