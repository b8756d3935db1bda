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
// Window-bounded ring: under a window or document mask no rank may need the block of the farthest
// ring positions. With H = ring_hops(spec) the largest hop any rank needs (the block of position
// g - H still has keys some query of g sees), the loops run H + 1 steps instead of R: K/V make H
// hops, not R - 1, and in the backward each dK/dV accumulator goes home in one message from
// g + H instead of completing the circle. A contiguous causal window of W tokens over blocks of n
// needs H = ceil((W - 1) / n).
//
// The erratum variant reverse-dkv (the book's erratum 1) sends the accumulator to g-1 and receives
// from g+1 instead: rank g then adds block g - t's gradient into block g - t + 2's accumulator,
// which is right only when R <= 2.
#include "sim/plan/plan.hpp"

namespace ringlab {

namespace {

constexpr int kKvExchange = 0;
constexpr int kDkvExchange = 1;

const SlotPair kKvNow{Slot::kv0, Slot::kv1, 0};
const SlotPair kKvNext{Slot::kv0, Slot::kv1, 1};
const SlotPair kDkvNow{Slot::dkv0, Slot::dkv1, 0};
const SlotPair kDkvNext{Slot::dkv0, Slot::dkv1, 1};
const SlotPair kDkvLocal{Slot::dkv_local, Slot::dkv_local, 0};
const Shift kBlockOfStep{0, -1};  // ring position g - t

}  // namespace

int64_t ring_hops(const PlanSpec& spec) {
  const int64_t R = spec.ring_degree();
  if (!spec.mask().general() || R == 1) return R - 1;
  const Plan probe(spec, {});
  for (int64_t hop = R - 1; hop > 0; --hop)
    for (int64_t g = 0; g < R; ++g)
      if (block_mask_pairs(probe, g, ((g - hop) % R + R) % R) > 0) return hop;
  return 0;
}

Phase ring_forward_phase(const PlanSpec& spec) {
  const int64_t steps = ring_hops(spec) + 1;
  Phase phase{"ring forward", Pass::forward, Family::ring, steps, {}};
  phase.body = {
      {LoadKvT{kKvNow}, Steps{0, steps - 1}},
      {ExchangeT{kKvExchange, Payload::kv, true, true, kKvNow, kKvNext, Shift{1, 0}, Shift{-1, 0}}, Steps{0, 1}},
      {ComputeT{Pass::forward, kKvNow, kBlockOfStep, false, {}, false}, Steps{}},
      {WaitT{kKvExchange, 0}, Steps{0, 1}},
  };
  return phase;
}

Phase ring_backward_phase(const PlanSpec& spec) {
  const int64_t R = spec.ring_degree(), H = ring_hops(spec);
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
  std::vector<Phase> phases{ring_forward_phase(spec),
                            Phase{"finalize", Pass::forward, Family::ring, 1, {{FinalizeT{}, Steps{}}}}};
  if (spec.backward) phases.push_back(ring_backward_phase(spec));
  return phases;
}

}  // namespace ringlab
