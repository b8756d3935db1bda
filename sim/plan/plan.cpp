// Plans: names, the plan's geometry, compute resolution, and expansion into concrete ops.
// Sections: [names] [spec and geometry] [compute resolution] [bytes] [expansion] [building]
#include "sim/plan/plan.hpp"

#include <algorithm>
#include <array>
#include <numeric>
#include <stdexcept>
#include <utility>

#include "reference/error.hpp"
#include "reference/formulas.hpp"
#include "reference/names.hpp"
#include "sim/plan/queries.hpp"

namespace ringlab {

// ---- [names] ---------------------------------------------------------------------------------

namespace {

constexpr const char* kAlgorithmNames[] = {"ring", "allgather", "ulysses", "hybrid"};
// The mistakes of the source material a plan can reproduce, after none (not one of them).
constexpr const char* kErratumNames[] = {"none", "reverse-dkv", "kv-offset-mask"};
constexpr const char* kSlotNames[] = {"kv0",       "kv1",         "dkv0",         "dkv1",
                                      "dkv_local", "gathered_kv", "gathered_dkv", "dkv_home"};
constexpr const char* kCollectiveNames[] = {"all-to-all q,k,v",    "all-to-all out,lse", "all-to-all dout",
                                            "all-to-all dq,dk,dv", "all-gather K/V",     "reduce-scatter dK/dV"};
constexpr const char* kBlockShapeNames[] = {"full",   "diag", "q-half",  "kv-half",
                                            "masked", "skip", "erratum", "partial"};

}  // namespace

const char* algorithm_name(Algorithm algo) { return name_of(kAlgorithmNames, algo); }

Algorithm parse_algorithm(const std::string& name) {
  return parse_named<Algorithm>(kAlgorithmNames, name, "algorithm", "--algo");
}

const char* erratum_name(Erratum erratum) { return name_of(kErratumNames, erratum); }

Erratum parse_erratum(const std::string& name) {
  if (name.empty() || name == "none") return Erratum::none;
  return parse_named<Erratum>(kErratumNames, name, "erratum", "--erratum", 1);
}

const char* slot_name(Slot slot) { return name_of(kSlotNames, slot); }
const char* collective_name(Collective collective) { return name_of(kCollectiveNames, collective); }
const char* block_shape_name(BlockShape shape) { return name_of(kBlockShapeNames, shape); }

// ---- [spec and geometry] ---------------------------------------------------------------------

int64_t PlanSpec::padding_tokens() const {
  return padding + std::accumulate(document_padding.begin(), document_padding.end(), int64_t{0});
}

bool PlanSpec::padded_documents() const {
  return std::any_of(document_padding.begin(), document_padding.end(), [](int64_t p) { return p > 0; });
}

std::vector<int64_t> PlanSpec::token_positions() const {
  if (!padded_documents()) return iota_positions(tokens());
  std::vector<int64_t> positions;
  positions.reserve(static_cast<size_t>(tokens()));
  int64_t start = 0;
  for (size_t d = 0; d < documents.size(); ++d) {
    for (int64_t t = 0; t < documents[d]; ++t) positions.push_back(start + t);
    start += documents[d] + (d < document_padding.size() ? document_padding[d] : 0);
  }
  return positions;
}

std::vector<int64_t> PlanSpec::user_positions() const {
  std::vector<int64_t> users(static_cast<size_t>(dims.seq), -1);
  const std::vector<int64_t> positions = token_positions();
  for (size_t t = 0; t < positions.size(); ++t) {
    if (positions[t] < 0 || positions[t] >= dims.seq) {  // a spec build_plan refuses (validate_plan_spec)
      throw std::logic_error("plan spec: token " + std::to_string(t) + " at position " + std::to_string(positions[t]) +
                             ", outside S=" + std::to_string(dims.seq));
    }
    users[static_cast<size_t>(positions[t])] = static_cast<int64_t>(t);
  }
  return users;
}

void pad_to_layout(PlanSpec& spec) {
  spec.document_padding.clear();
  spec.padding = layout_padding(spec.layout, spec.dims.seq, spec.ranks, spec.block);
  const bool per_document = spec.layout == LayoutKind::zigzag || spec.layout == LayoutKind::striped;
  const int64_t sum = std::accumulate(spec.documents.begin(), spec.documents.end(), int64_t{0});
  if (spec.documents.size() > 1 && per_document && sum == spec.dims.seq) {  // else build_plan names the mismatch
    const int64_t granule = document_granule(spec.layout, spec.ranks, spec.block);
    std::vector<int64_t> pads;
    int64_t total = 0;
    for (int64_t length : spec.documents) {
      pads.push_back(length > 0 ? (granule - length % granule) % granule : 0);
      total += length + pads.back();
    }
    if (total != spec.dims.seq) {  // some document does not divide: pad each one, not the tail
      spec.document_padding = std::move(pads);
      spec.padding = 0;
      spec.dims.seq = total;
      return;
    }
  }
  spec.dims.seq += spec.padding;
}

void pad_heads(PlanSpec& spec) {
  const int64_t U = spec.algo == Algorithm::ulysses ? spec.ranks : spec.algo == Algorithm::hybrid ? spec.ulysses : 1;
  if (U > 1 && spec.ranks % U == 0 && spec.dims.kv_heads > 0 && spec.dims.heads % spec.dims.kv_heads == 0 &&
      spec.dims.kv_heads > U && spec.dims.kv_heads % U != 0) {
    const int64_t group = spec.dims.heads / spec.dims.kv_heads;
    const int64_t kv_heads = (spec.dims.kv_heads + U - 1) / U * U;
    spec.padding_heads = (kv_heads - spec.dims.kv_heads) * group;
    spec.dims.kv_heads = kv_heads;
    spec.dims.heads = kv_heads * group;
  }
}

int exchange_tag(int64_t phase, int id, int64_t step) {
  constexpr int64_t kSteps = 1'000'000, kPhases = 255;
  if (phase < 0 || phase > kPhases || id < 0 || id >= 4 || step < 0 || step >= kSteps) {
    throw std::logic_error("exchange_tag: phase " + std::to_string(phase) + ", exchange " + std::to_string(id) +
                           ", step " + std::to_string(step) + " past the tag's bounds");
  }
  return static_cast<int>((phase * 4 + id) * kSteps + step);
}

AttentionDims PlanSpec::real_dims() const {
  AttentionDims real = dims;
  real.seq = tokens();
  if (padding_heads > 0 && dims.kv_heads > 0) {
    const int64_t group = dims.heads / dims.kv_heads;
    real.heads -= padding_heads;
    real.kv_heads -= padding_heads / group;
  }
  return real;
}

PlanSpec repadded(const PlanSpec& spec) {
  PlanSpec out = spec;
  out.dims = spec.real_dims();
  out.padding = 0;
  out.document_padding.clear();
  out.padding_heads = 0;
  pad_to_layout(out);
  pad_heads(out);
  return out;
}

std::string PlanSpec::describe() const {
  std::string text = algorithm_name(algo);
  if (algo == Algorithm::hybrid) text += "(U=" + std::to_string(ulysses) + ", R=" + std::to_string(ring_degree()) + ")";
  // check_layout, not make_layout: the same checks and name without a table of S / block units.
  text += " | " + check_layout(layout, dims.seq, ranks, block, mask());
  text += " | P=" + std::to_string(ranks) + " | " + real_dims().to_string();
  if (padding > 0) {
    text += " | +" + std::to_string(padding) + " padding token" + (padding > 1 ? "s" : "") +
            " (S=" + std::to_string(dims.seq) + " on the ranks)";
  }
  if (padded_documents()) {
    const int64_t pads = padding_tokens() - padding;
    text += " | +" + std::to_string(pads) + " padding token" + (pads > 1 ? "s" : "") +
            " at document ends (S=" + std::to_string(dims.seq) + " on the ranks)";
  }
  if (padding_heads > 0) {
    text += " | +" + std::to_string(padding_heads) + " padding head" + (padding_heads > 1 ? "s" : "") +
            " (H=" + std::to_string(dims.heads) + ", HKV=" + std::to_string(dims.kv_heads) + " on the ranks)";
  }
  const Mask m = mask();
  const bool shown = causal || window > 0 || documents.size() > 1;  // padding is said above
  text += shown ? " | " + m.describe() + (skip ? "" : ", no skip") +
                      (full_ring && algo != Algorithm::allgather && algo != Algorithm::ulysses ? ", full ring" : "")
                : " | full";
  text += backward ? " | fwd+bwd" : " | fwd";
  if (erratum != Erratum::none) text += std::string(" | erratum ") + erratum_name(erratum);
  return text;
}

Plan::Plan(PlanSpec spec, std::vector<Phase> phases)
    : spec_(std::move(spec)), mask_(spec_.mask()),
      layout_(make_layout(spec_.layout, spec_.dims.seq, spec_.ranks, spec_.block, mask_)), phases_(std::move(phases)) {}

int64_t Plan::ring_position_at(int64_t rank, Shift shift, int64_t step) const {
  const int64_t R = ring();
  const int64_t position = ring_position(rank) + shift.offset + shift.per_step * step;
  return ((position % R) + R) % R;
}

int64_t Plan::ring_peer(int64_t rank, Shift shift, int64_t step) const {
  return rank_at(ring_position_at(rank, shift, step), ulysses_index(rank));
}

std::vector<int64_t> Plan::block_units(int64_t ring_position) const {
  if (spec_.ulysses == 1) return layout_.units_of(ring_position);  // ascending already
  std::vector<int64_t> units;
  for (int64_t u = 0; u < spec_.ulysses; ++u) {
    const std::vector<int64_t> member = layout_.units_of(rank_at(ring_position, u));
    units.insert(units.end(), member.begin(), member.end());
  }
  std::sort(units.begin(), units.end());
  return units;
}

std::vector<int64_t> Plan::block_positions(int64_t ring_position) const {
  std::vector<int64_t> positions;
  for (int64_t unit : block_units(ring_position))
    for (int64_t t = 0; t < layout_.block(); ++t) positions.push_back(unit * layout_.block() + t);
  return positions;
}

// ---- [compute resolution] --------------------------------------------------------------------

namespace {

// Causal pairs between two ring positions' blocks: O(U^2) closed forms, so dry runs scale.
int64_t block_causal_pairs(const Plan& plan, int64_t q_block, int64_t kv_block) {
  int64_t pairs = 0;
  for (int64_t a = 0; a < plan.ulysses(); ++a)
    for (int64_t b = 0; b < plan.ulysses(); ++b)
      pairs += plan.layout().causal_pairs(plan.rank_at(q_block, a), plan.rank_at(kv_block, b));
  return pairs;
}

// The zig-zag "half block": when every visible (query unit, key unit) pair is fully visible and
// they form one rectangle of contiguous local rows, that rectangle is all the work. Only tried
// for blocks of a few units (contiguous and 2P-chunk zig-zag); fine-grained layouts (striped,
// token-level zig-zag) go to the kernel with the causal mask, whose tile skipping does the rest.
bool find_rectangle(const Plan& plan, int64_t q_block, int64_t kv_block, RowRange& q_rows, RowRange& kv_rows) {
  constexpr size_t kMaxUnits = 16;
  const std::vector<int64_t> q_units = plan.block_units(q_block), k_units = plan.block_units(kv_block);
  if (q_units.size() > kMaxUnits || k_units.size() > kMaxUnits) return false;
  int64_t q_lo = INT64_MAX, q_hi = -1, k_lo = INT64_MAX, k_hi = -1;
  for (size_t i = 0; i < q_units.size(); ++i)
    for (size_t j = 0; j < k_units.size(); ++j) {
      if (k_units[j] == q_units[i]) return false;  // a diagonal unit: needs the mask
      if (k_units[j] < q_units[i]) {
        q_lo = std::min<int64_t>(q_lo, i), q_hi = std::max<int64_t>(q_hi, i);
        k_lo = std::min<int64_t>(k_lo, j), k_hi = std::max<int64_t>(k_hi, j);
      }
    }
  if (q_hi < 0) return false;
  // Every pair inside the rectangle must be visible for it to be computed without a mask.
  for (int64_t i = q_lo; i <= q_hi; ++i)
    for (int64_t j = k_lo; j <= k_hi; ++j)
      if (k_units[j] >= q_units[i]) return false;
  const int64_t b = plan.layout().block();
  q_rows = {q_lo * b, (q_hi + 1) * b};
  kv_rows = {k_lo * b, (k_hi + 1) * b};
  return true;
}

}  // namespace

namespace {

struct PositionRun {
  int64_t first, last;  // inclusive
};

// Ascending units of `unit` tokens as maximal runs of consecutive positions.
std::vector<PositionRun> position_runs(const std::vector<int64_t>& units, int64_t unit) {
  std::vector<PositionRun> runs;
  for (int64_t u : units) {
    if (!runs.empty() && runs.back().last + 1 == u * unit)
      runs.back().last += unit;
    else
      runs.push_back({u * unit, u * unit + unit - 1});
  }
  return runs;
}

// Visible pairs between query rows [q.first, q.last] and the keys in `runs` (ascending), in one
// pass over both when the query runs come in ascending order, plus one Mask::range_pairs per run
// near the rows' reach. The keys the rows may see lie in [lo, hi] (Mask::keys_reached); within one document's real rows both ends of keys_of grow with the row, so every row
// sees [first of the last row, last of the first row]: those keys are counted, not paired. Only
// the runs in the two margins are paired.
class KeyRuns {
 public:
  KeyRuns(const Mask& mask, std::vector<PositionRun> runs) : mask_(mask), runs_(std::move(runs)) {
    int64_t tokens = 0;
    for (const PositionRun& r : runs_) prefix_.push_back(tokens), tokens += r.last - r.first + 1;
  }

  int64_t pairs(PositionRun q) {
    q.last = std::min(q.last, mask_.valid_tokens() - 1);
    if (q.last < q.first || runs_.empty()) return 0;
    const auto [lo, hi] = mask_.keys_reached(q.first, q.last);
    if (!mask_.documents_padded() && mask_.document_of(q.first) == mask_.document_of(q.last)) {
      const KeyRange all{std::max(lo, mask_.keys_of(q.last).first), std::min(hi, mask_.keys_of(q.first).last)};
      if (!all.empty())
        return (q.last - q.first + 1) * (keys_up_to(all.last, cursors_[0]) - keys_up_to(all.first - 1, cursors_[1])) +
               paired(q, lo, all.first - 1, cursors_[2]) + paired(q, all.last + 1, hi, cursors_[3]);
    }
    return paired(q, lo, hi, cursors_[2]);
  }

 private:
  // The first run starting after x, from a cursor that only moves forward while x grows (it does,
  // query run after query run), found again by binary search should x go back.
  size_t first_after(int64_t x, size_t& cursor) const {
    if (cursor > 0 && runs_[cursor - 1].first > x)
      cursor =
          static_cast<size_t>(std::upper_bound(runs_.begin(), runs_.end(), x,
                                               [](int64_t value, const PositionRun& r) { return value < r.first; }) -
                              runs_.begin());
    while (cursor < runs_.size() && runs_[cursor].first <= x) ++cursor;
    return cursor;
  }

  // Key tokens at positions <= x.
  int64_t keys_up_to(int64_t x, size_t& cursor) const {
    const size_t after = first_after(x, cursor);
    if (after == 0) return 0;
    return prefix_[after - 1] + std::min(runs_[after - 1].last, x) - runs_[after - 1].first + 1;
  }

  int64_t paired(PositionRun q, int64_t from, int64_t to, size_t& cursor) const {
    if (to < from) return 0;
    size_t r = first_after(from, cursor);  // the runs from r - 1 on may reach `from`
    if (r > 0 && runs_[r - 1].last >= from) --r;
    int64_t total = 0;
    for (; r < runs_.size() && runs_[r].first <= to; ++r)
      total += mask_.range_pairs(q.first, q.last, std::max(runs_[r].first, from), std::min(runs_[r].last, to));
    return total;
  }

  const Mask& mask_;
  std::vector<PositionRun> runs_;
  std::vector<int64_t> prefix_;  // key tokens in the runs before each
  std::array<size_t, 4> cursors_{};
};

}  // namespace

int64_t block_mask_pairs(const Plan& plan, int64_t q_block, int64_t kv_block) {
  const int64_t unit = plan.layout().block();
  const std::vector<int64_t> q_units = plan.block_units(q_block), k_units = plan.block_units(kv_block);
  int64_t pairs = 0;
  if (q_units.size() * k_units.size() <= 16) {
    for (int64_t qu : q_units)
      for (int64_t ku : k_units)
        pairs += plan.mask().range_pairs(qu * unit, qu * unit + unit - 1, ku * unit, ku * unit + unit - 1);
    return pairs;
  }
  // Many units (the balanced layout, striped, zig-zag per document): pairs per run of queries, in
  // one pass over both blocks' runs rather than O(units^2) (97 s for a balanced P = 1024 dry run).
  KeyRuns keys(plan.mask(), position_runs(k_units, unit));
  for (const PositionRun& q : position_runs(q_units, unit)) pairs += keys.pairs(q);
  return pairs;
}

ComputeOp resolve_compute(const Plan& plan, int64_t rank, int64_t kv_block, Pass pass) {
  const PlanSpec& spec = plan.spec();
  const int64_t n = plan.block_tokens();
  const RowRange all{0, n};
  ComputeOp op;
  op.pass = pass;
  op.q_block = plan.ring_position(rank);
  op.kv_block = kv_block;
  AttentionDims local = spec.dims;
  local.heads = plan.heads_per_rank();
  auto flops_of = [&](int64_t pairs) {
    return pass == Pass::forward ? forward_flops(pairs, local) : backward_flops(pairs, local);
  };

  if (!spec.masked()) {
    op.shape = BlockShape::full;
    op.kernels = {{all, all, MaskKind::none, true, false}};
    op.pairs = op.computed_pairs = n * n;
  } else if (spec.erratum == Erratum::kv_offset_mask) {
    // The source's ring code, literally: `if kv_offset > 0`, hide key kv_offset + j from the query
    // at index i within its block. The block at offset 0 (ring position 0) is never masked; every
    // other block is masked by key position against the query's local index.
    op.shape = BlockShape::erratum;
    op.computed_pairs = n * n;
    if (kv_block == 0) {
      op.kernels = {{all, all, MaskKind::none, true, false}};
      op.pairs = n * n;
    } else {
      op.kernels = {{all, all, MaskKind::causal, true, true}};
      op.pairs = causal_pairs_of_positions(iota_positions(n), plan.block_positions(kv_block));
    }
  } else if (plan.counted_blocks()) {
    // Window or documents: skipped when nothing is visible, unmasked when everything is, else the
    // kernel masks by position (its tile classification skips the empty tiles inside).
    op.pairs = block_mask_pairs(plan, op.q_block, kv_block);
    if (op.pairs == 0) {
      op.shape = spec.skip ? BlockShape::skipped : BlockShape::masked;
      if (!spec.skip) op.kernels = {{all, all, plan.mask(), false, false}};
    } else if (op.pairs == n * n) {
      op.shape = BlockShape::full;
      op.kernels = {{all, all, MaskKind::none, true, false}};
    } else {
      op.shape = BlockShape::partial;
      op.kernels = {{all, all, plan.mask(), spec.skip, false}};
    }
    op.computed_pairs = op.kernels.empty() ? 0 : n * n;
  } else {
    op.pairs = block_causal_pairs(plan, op.q_block, kv_block);
    RowRange q_rows, kv_rows;
    if (op.pairs == 0) {
      op.shape = spec.skip ? BlockShape::skipped : BlockShape::masked;
      if (!spec.skip) op.kernels = {{all, all, MaskKind::causal, false, false}};
    } else if (op.pairs == n * n) {
      op.shape = BlockShape::full;
      op.kernels = {{all, all, MaskKind::none, true, false}};
    } else if (spec.skip && find_rectangle(plan, op.q_block, kv_block, q_rows, kv_rows)) {
      op.shape = q_rows.size() == n ? BlockShape::kv_half : BlockShape::q_half;
      op.kernels = {{q_rows, kv_rows, MaskKind::none, true, false}};
    } else {
      op.shape = BlockShape::diagonal;
      op.kernels = {{all, all, MaskKind::causal, spec.skip, false}};
    }
    op.computed_pairs = 0;
    for (const KernelBlock& k : op.kernels) op.computed_pairs += k.q_rows.size() * k.kv_rows.size();
  }
  op.flops = flops_of(op.pairs);
  return op;
}

// ---- [bytes] ---------------------------------------------------------------------------------

int64_t payload_bytes(const Plan& plan, Payload payload) {
  const PlanSpec& spec = plan.spec();
  const int64_t element = payload == Payload::dkv ? 4 : spec.element_bytes;  // dK/dV travel in fp32
  return 2 * plan.block_tokens() * plan.kv_heads_per_rank() * spec.dims.dim * spec.dims.batch * element;
}

int64_t collective_bytes(const Plan& plan, Collective collective) {
  const PlanSpec& spec = plan.spec();
  const AttentionDims& d = spec.dims;
  if (is_ulysses_collective(collective)) {
    // Each rank's shard of S/P tokens: it keeps 1/U and sends (U-1)/U of it; it receives as much.
    const int64_t tokens = d.seq / spec.ranks, U = plan.ulysses();
    const int64_t e = spec.element_bytes;
    int64_t shard = 0;
    switch (collective) {
      case Collective::all_to_all_qkv: shard = tokens * (d.heads + 2 * d.kv_heads) * d.dim * d.batch * e; break;
      case Collective::all_to_all_out: shard = tokens * d.heads * (d.dim * e + 4) * d.batch; break;  // out + fp32 lse
      case Collective::all_to_all_dout: shard = tokens * d.heads * d.dim * d.batch * e; break;
      case Collective::all_to_all_grads: shard = tokens * (d.heads + 2 * d.kv_heads) * d.dim * d.batch * 4; break;
      default: break;
    }
    return shard / U * (U - 1);
  }
  const Payload payload = collective == Collective::all_gather_kv ? Payload::kv : Payload::dkv;
  return (plan.ring() - 1) * payload_bytes(plan, payload);
}

namespace {

CollectiveOp collective_op(const Plan& plan, int64_t rank, Collective collective) {
  CollectiveOp op;
  op.collective = collective;
  if (is_ulysses_collective(collective)) {
    op.group = plan.ring_position(rank);
    for (int64_t u = 0; u < plan.ulysses(); ++u) op.members.push_back(plan.rank_at(op.group, u));
  } else {
    op.group = plan.ulysses_index(rank);
    for (int64_t g = 0; g < plan.ring(); ++g) op.members.push_back(plan.rank_at(g, op.group));
  }
  op.send_bytes = op.recv_bytes = collective_bytes(plan, collective);
  return op;
}

}  // namespace

// ---- [trimmed ring] --------------------------------------------------------------------------

namespace {

int64_t travel_of(const std::vector<int64_t>& travel, int64_t position) {
  const auto R = static_cast<int64_t>(travel.size());
  return travel[static_cast<size_t>(((position % R) + R) % R)];
}

}  // namespace

bool Phase::runs(Needs needs, int64_t g, int64_t step) const {
  if (needs == Needs::always || travel.empty()) return needs != Needs::home_first && needs != Needs::home_now;
  switch (needs) {
    case Needs::held: return step <= travel_of(travel, g - step);
    case Needs::home_first: return step == 0 && travel_of(travel, g) == 0;
    case Needs::home_now: return step > 0 && step == travel_of(travel, g);
    case Needs::always: break;
  }
  return true;
}

bool Phase::route_sends(Route route, int64_t g, int64_t step) const {
  switch (route) {
    case Route::fixed: return true;
    case Route::along: return step + 1 <= travel_of(travel, g - step);
    case Route::home: return step > 0 && step == travel_of(travel, g - step);
  }
  return true;
}

bool Phase::route_receives(Route route, int64_t g, int64_t step) const {
  switch (route) {
    case Route::fixed: return true;
    case Route::along: return step + 1 <= travel_of(travel, g - 1 - step);
    case Route::home: return step > 0 && step == travel_of(travel, g);
  }
  return true;
}

// ---- [expansion] -----------------------------------------------------------------------------

std::vector<Op> expand(const Plan& plan, int64_t rank) {
  std::vector<Op> ops;
  for (size_t p = 0; p < plan.phases().size(); ++p) {
    const Phase& phase = plan.phases()[p];
    const int64_t g = plan.ring_position(rank);
    // In a trimmed ring, the exchanges this rank posted in the last steps, by (id, step): a Wait
    // for one it did not post is left out.
    const bool trimmed = !phase.travel.empty();
    std::vector<std::pair<int, int64_t>> posted;
    for (int64_t step = 0; step < phase.steps; ++step) {
      std::erase_if(posted, [&](const auto& x) { return x.second < step - 1; });  // waits lag at most 1 step
      for (const TemplateEntry& entry : phase.body) {
        if (!entry.when.contains(step, phase.steps) || !phase.runs(entry.needs, g, step)) continue;
        if (const auto* x = std::get_if<ExchangeT>(&entry.op); x && trimmed) {
          if (!(x->sends && phase.route_sends(x->route, g, step)) &&
              !(x->receives && phase.route_receives(x->route, g, step)))
            continue;
          posted.emplace_back(x->id, step);
        } else if (const auto* w = std::get_if<WaitT>(&entry.op); w && trimmed) {
          if (w->lag > 1) throw std::logic_error("expand: a trimmed ring's wait lags more than one step");
          if (std::find(posted.begin(), posted.end(), std::pair<int, int64_t>{w->exchange_id, step - w->lag}) ==
              posted.end())
            continue;
        }
        Op op{static_cast<int>(p), step, {}};
        std::visit(
            [&](const auto& t) {
              using T = std::decay_t<decltype(t)>;
              if constexpr (std::is_same_v<T, ExchangeT>) {
                ExchangeOp e;
                e.id = t.id;
                e.payload = t.payload;
                const bool sends = t.sends && phase.route_sends(t.route, g, step);
                const bool receives = t.receives && phase.route_receives(t.route, g, step);
                e.send_to = sends ? plan.ring_peer(rank, t.send_to, step) : -1;
                e.recv_from = receives ? plan.ring_peer(rank, t.recv_from, step) : -1;
                e.send_slot = t.send_slot.at(step);
                e.recv_slot = t.recv_slot.at(step);
                e.bytes = payload_bytes(plan, t.payload);
                // Tags name (phase, exchange, step) so every message matches exactly one receive.
                e.tag = exchange_tag(static_cast<int64_t>(p), t.id, step);
                op.body = e;
              } else if constexpr (std::is_same_v<T, WaitT>) {
                op.body = WaitOp{t.exchange_id, step - t.lag};
              } else if constexpr (std::is_same_v<T, LoadKvT>) {
                op.body = LoadKvOp{t.slot.at(step), plan.ring_position(rank)};
              } else if constexpr (std::is_same_v<T, ComputeT>) {
                ComputeOp c = resolve_compute(plan, rank, plan.ring_position_at(rank, t.origin, step), t.pass);
                c.kv_slot = t.kv_slot.at(step);
                c.kv_row_offset = t.gathered ? c.kv_block * plan.block_tokens() : 0;
                c.grad_slot = t.grad_slot.at(step);
                c.accumulate_grad = t.accumulate_grad;
                op.body = std::move(c);
              } else if constexpr (std::is_same_v<T, AccumulateT>) {
                op.body = AccumulateOp{t.from.at(step), t.to.at(step)};
              } else if constexpr (std::is_same_v<T, CollectiveT>) {
                op.body = collective_op(plan, rank, t.collective);
              } else if constexpr (std::is_same_v<T, FinalizeT>) {
                op.body = FinalizeOp{};
              } else if constexpr (std::is_same_v<T, PrepareBackwardT>) {
                op.body = PrepareBackwardOp{};
              } else if constexpr (std::is_same_v<T, StoreGradsT>) {
                op.body = StoreGradsOp{t.slot.at(step)};
              }
            },
            entry.op);
        ops.push_back(std::move(op));
      }
    }
  }
  return ops;
}

// ---- [building] ------------------------------------------------------------------------------

namespace {

// build_plan's checks, on a copy normalized as build_plan builds it.
PlanSpec checked_spec(const PlanSpec& input) {
  PlanSpec spec = input;
  const std::string P = std::to_string(spec.ranks);
  if (spec.ranks <= 0) throw UsageError("--ranks must be positive, got " + P);
  spec.dims.validate();
  // Padding first: the checks below count real tokens (S less the padding).
  if (!spec.document_padding.empty() && spec.document_padding.size() != spec.documents.size()) {
    throw UsageError("document padding: " + std::to_string(spec.document_padding.size()) + " counts for " +
                     std::to_string(spec.documents.size()) + " documents; give one count per document");
  }
  for (int64_t pad : spec.document_padding)
    if (pad < 0) throw UsageError("document padding: a count is " + std::to_string(pad) + "; counts are 0 or more");
  if (spec.padding < 0 || spec.padding_tokens() >= spec.dims.seq) {
    throw UsageError("padding " + std::to_string(spec.padding_tokens()) + " tokens of S=" +
                     std::to_string(spec.dims.seq) + ": padding is 0 or more and leaves at least one real token");
  }
  const int64_t group = spec.dims.heads / spec.dims.kv_heads;  // dims.validate: HKV divides H
  if (spec.padding_heads < 0 || spec.padding_heads >= spec.dims.heads || spec.padding_heads % group != 0) {
    throw UsageError("padding heads " + std::to_string(spec.padding_heads) + " of H=" +
                     std::to_string(spec.dims.heads) + ": they are whole groups of H/HKV=" + std::to_string(group) +
                     " query heads (with their kv head) and leave at least one real head");
  }
  switch (spec.algo) {
    case Algorithm::ring:
    case Algorithm::allgather: spec.ulysses = 1; break;
    case Algorithm::ulysses: spec.ulysses = spec.ranks; break;
    case Algorithm::hybrid:
      if (spec.ulysses <= 0) {
        throw UsageError("--algo hybrid needs --ulysses U, the Ulysses degree (ring degree P/U); e.g. --ulysses 2");
      }
      if (spec.ranks % spec.ulysses != 0) {
        throw UsageError("--ulysses " + std::to_string(spec.ulysses) + " does not divide P=" + P +
                         "; pick U among the divisors of " + P);
      }
      break;
  }
  if (spec.algo == Algorithm::ulysses || spec.algo == Algorithm::hybrid) {
    const std::string U = std::to_string(spec.ulysses);
    if (spec.dims.heads % spec.ulysses != 0) {
      throw UsageError("H=" + std::to_string(spec.dims.heads) + " is not divisible by the Ulysses degree " + U +
                       " (each rank takes H/U heads); pick --heads a multiple of " + U +
                       (spec.algo == Algorithm::ulysses ? " or fewer --ranks" : " or another --ulysses"));
    }
    if (spec.dims.kv_heads % spec.ulysses != 0) {
      throw UsageError("HKV=" + std::to_string(spec.dims.kv_heads) + " is not divisible by the Ulysses degree " + U +
                       " (each rank takes HKV/U kv heads); pick --kv-heads a multiple of " + U +
                       (spec.algo == Algorithm::ulysses ? " or fewer --ranks" : " or another --ulysses"));
    }
  }
  if (spec.erratum != Erratum::none && spec.algo != Algorithm::ring) {
    throw UsageError(std::string("--erratum ") + erratum_name(spec.erratum) +
                     " is a variant of the ring plan; use it with --algo ring");
  }
  if (spec.erratum == Erratum::reverse_dkv && !spec.backward) {
    throw UsageError("--erratum reverse-dkv changes the backward pass; add --backward to see it");
  }
  if (spec.erratum == Erratum::kv_offset_mask && !spec.causal) {
    throw UsageError("--erratum kv-offset-mask changes the causal mask; add --causal to see it");
  }
  if (spec.documents.size() == 1 && !spec.padded_documents()) {
    spec.documents.clear();  // one document: no document mask
    spec.document_padding.clear();
  }
  validate_window(spec.window);
  if (!spec.documents.empty()) {
    int64_t sum = 0;
    for (int64_t length : spec.documents) {
      if (length < 1) throw UsageError("--docs: a document length must be at least 1, got " + std::to_string(length));
      sum += length;
    }
    if (sum != spec.tokens()) {
      throw UsageError("--docs lengths sum to " + std::to_string(sum) + ", not S=" + std::to_string(spec.tokens()) +
                       "; make them add up to --seq");
    }
  }
  if (spec.erratum == Erratum::kv_offset_mask && (spec.window > 0 || !spec.documents.empty())) {
    throw UsageError("--erratum kv-offset-mask reproduces a causal-mask mistake; drop --window and --docs");
  }
  if (spec.erratum == Erratum::kv_offset_mask && spec.padding_tokens() > 0) {
    throw UsageError("--erratum kv-offset-mask reproduces the source's code, which needs S=" +
                     std::to_string(spec.tokens()) + " to divide evenly; pick S a multiple of " +
                     std::to_string(spec.layout == LayoutKind::zigzag ? 2 * spec.ranks : spec.ranks));
  }
  if (!spec.masked()) spec.skip = true;  // nothing is masked, nothing to skip
  // Divisibility, and documents that fill S for a per-document layout, without building its table.
  (void)check_layout(spec.layout, spec.dims.seq, spec.ranks, spec.block, spec.mask());
  return spec;
}

}  // namespace

void validate_plan_spec(const PlanSpec& spec) { (void)checked_spec(spec); }

Plan build_plan(const PlanSpec& input) {
  PlanSpec spec = checked_spec(input);
  std::vector<Phase> phases;
  switch (spec.algo) {
    case Algorithm::ring: phases = ring_phases(spec); break;
    case Algorithm::allgather: phases = allgather_phases(spec); break;
    case Algorithm::ulysses:
    case Algorithm::hybrid: phases = ulysses_phases(spec); break;
  }
  return Plan(spec, std::move(phases));
}

}  // namespace ringlab
