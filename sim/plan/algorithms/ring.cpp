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
#include <utility>

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

// Which ring positions may see a key block, from the units alone: for each block, the query units
// that may see one of its keys (Mask::queries_reaching, merged into ascending runs); a ring position
// may see the block iff it holds a unit inside a run. A superset of the positions that do, so the
// farthest hop it allows bounds the block's travel, and block_mask_pairs confirms it.
class TravelBound {
 public:
  explicit TravelBound(const Plan& plan) : plan_(plan), R_(plan.spec().ring_degree()) {
    for (int64_t x = 0; x < R_; ++x) units_.push_back(plan.block_units(x));
  }

  // The farthest hop h <= below at which ring position b + h may see block b (0 if none), by the
  // cheaper of two searches: the runs' units one by one (a short window or short documents: the
  // common trimmed ring), or the positions from `below` down, each a merge of its units with the
  // runs (a long reach, whose farthest position is near).
  int64_t farthest(int64_t b, int64_t below) {
    runs_of(b);
    int64_t length = 0;
    for (const auto& [lo, hi] : runs_) length += hi - lo + 1;
    const auto per_position = static_cast<int64_t>(units_.front().size() + runs_.size());
    if (length <= below * per_position) {
      int64_t farthest = 0;
      for (const auto& [lo, hi] : runs_)
        for (int64_t u = lo; u <= hi; ++u) {
          const int64_t hop = hop_of(plan_.ring_position(plan_.layout().rank_of_unit(u)), b);
          if (hop <= below) farthest = std::max(farthest, hop);
          if (farthest == below) return farthest;
        }
      return farthest;
    }
    for (int64_t hop = below; hop > 0; --hop)
      if (holds_a_run_unit(units_[static_cast<size_t>((b + hop) % R_)])) return hop;
    return 0;
  }

 private:
  int64_t hop_of(int64_t position, int64_t b) const { return (position - b + R_) % R_; }

  void runs_of(int64_t b) {
    const int64_t unit = plan_.layout().block(), seq = plan_.layout().seq();
    runs_.clear();
    for (int64_t ku : units_[static_cast<size_t>(b)]) {
      const KeyRange queries = plan_.mask().queries_reaching(ku * unit, ku * unit + unit - 1);
      const int64_t lo = std::max<int64_t>(0, queries.first), hi = std::min(seq - 1, queries.last);
      if (lo <= hi) runs_.emplace_back(lo / unit, hi / unit);
    }
    std::sort(runs_.begin(), runs_.end());
    size_t kept = 0;
    for (const auto& run : runs_) {
      if (kept > 0 && run.first <= runs_[kept - 1].second + 1)
        runs_[kept - 1].second = std::max(runs_[kept - 1].second, run.second);
      else
        runs_[kept++] = run;
    }
    runs_.resize(kept);
  }

  bool holds_a_run_unit(const std::vector<int64_t>& units) const {  // both ascending
    size_t r = 0;
    for (int64_t u : units) {
      while (r < runs_.size() && runs_[r].second < u) ++r;
      if (r == runs_.size()) return false;
      if (runs_[r].first <= u) return true;
    }
    return false;
  }

  const Plan& plan_;
  int64_t R_;
  std::vector<std::vector<int64_t>> units_;  // per ring position, ascending
  std::vector<std::pair<int64_t, int64_t>> runs_;
};

}  // namespace

std::vector<int64_t> ring_travel(const PlanSpec& spec) {
  const int64_t R = spec.ring_degree();
  std::vector<int64_t> travel(static_cast<size_t>(R), R - 1);
  if (!spec.mask().general() || R == 1 || spec.full_ring) return travel;
  // A trimmed ring (below) finds each block's own travel in O(R) small steps per block at most
  // (TravelBound), each step over the units of a ring position: a contiguous causal ring of 16384
  // with a window in 0.8 s and one of 65536 in 3.4 s, whole dry runs included (probing every hop
  // took 25 s at 16384). Where a position holds one or two units of the default size (contiguous,
  // zig-zag, one document) up to 65536 positions are planned, else (striped, balanced, a layout per
  // document, a --block: many units each) up to 16384; past that it is refused at once.
  const bool few_units = spec.block == 0 && spec.documents.size() <= 1 &&
                         (spec.layout == LayoutKind::contiguous || spec.layout == LayoutKind::zigzag);
  const int64_t longest = few_units ? 65536 : 16384;
  if (trimmed(spec) && R > longest) {
    throw UsageError("a ring of " + std::to_string(R) +
                     " positions under a window or documents is trimmed block by block, more than ringlab plans "
                     "in seconds (at most " +
                     std::to_string(longest) + " positions" +
                     (few_units ? std::string() : " with this layout; 65536 for contiguous or zig-zag, one document") +
                     "); use fewer --ranks, or --algo hybrid with a Ulysses degree U, which shortens the ring");
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
  // Each block's travel is the farthest hop whose ring position sees some of its keys. Probing
  // every hop from R - 1 down with block_mask_pairs cost one probe per hop not made: R^2 probes
  // for a short window (25 s at R = 16384). The probes go only where TravelBound allows a position
  // to see the block, which is almost always the travel itself: one probe confirms it.
  TravelBound bound(probe);
  for (int64_t b = 0; b < R; ++b) {
    int64_t& hops = travel[static_cast<size_t>(b)];
    hops = bound.farthest(b, R - 1);
    while (hops > 0 && block_mask_pairs(probe, (b + hops) % R, b) == 0) hops = bound.farthest(b, hops - 1);
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
