#include "sim/cost/block_work.hpp"

#include <algorithm>
#include <climits>
#include <span>
#include <tuple>
#include <vector>

namespace ringlab {

BlockClassifier::BlockClassifier(const Plan& plan, int64_t q_tile, int64_t kv_tile)
    : kind_(plan.spec().layout), R_(plan.ring()), ulysses_(plan.ulysses()), block_(plan.layout().block()),
      rounds_(plan.layout().rounds()), n_(plan.block_tokens()),
      ring_layout_(plan.spec().layout, plan.spec().dims.seq, plan.ring(), plan.ulysses() * plan.layout().block()),
      q_tile_(std::max<int64_t>(1, q_tile)), kv_tile_(std::max<int64_t>(1, kv_tile)), causal_(plan.spec().masked()),
      skip_(plan.spec().skip), erratum_(plan.spec().erratum == Erratum::kv_offset_mask),
      general_(plan.counted_blocks()), plan_(&plan) {
  if (plan.layout().is_explicit())
    for (int64_t g = 0; g < R_; ++g) explicit_positions_.push_back(plan.block_positions(g));
}

int64_t BlockClassifier::unit(int64_t g, int64_t i) const {
  const int64_t f = i / ulysses_;  // unit of the R-position layout, each U of the plan's units
  int64_t ring_unit = 0;
  switch (kind_) {
    case LayoutKind::contiguous: ring_unit = g * rounds_ + f; break;
    case LayoutKind::striped: ring_unit = f * R_ + g; break;
    case LayoutKind::zigzag: ring_unit = f * R_ + (f % 2 == 0 ? g : R_ - 1 - g); break;
    case LayoutKind::balanced: break;  // a table: positions come from explicit_positions_
  }
  return ring_unit * ulysses_ + i % ulysses_;
}

int64_t BlockClassifier::position(int64_t g, int64_t row) const {
  if (!explicit_positions_.empty()) return explicit_positions_[static_cast<size_t>(g)][static_cast<size_t>(row)];
  return unit(g, row / block_) * block_ + row % block_;
}

// Same decision as find_rectangle in sim/plan/plan.cpp, on units computed in O(1).
bool BlockClassifier::find_rectangle(int64_t q_block, int64_t kv_block, RowRange& q_rows, RowRange& kv_rows) const {
  constexpr int64_t kMaxUnits = 16;
  const int64_t count = units_per_block();
  if (count > kMaxUnits) return false;
  std::array<int64_t, kMaxUnits> q_units{}, k_units{};
  for (int64_t i = 0; i < count; ++i) q_units[i] = unit(q_block, i), k_units[i] = unit(kv_block, i);
  int64_t q_lo = INT64_MAX, q_hi = -1, k_lo = INT64_MAX, k_hi = -1;
  for (int64_t i = 0; i < count; ++i)
    for (int64_t j = 0; j < count; ++j) {
      if (k_units[j] == q_units[i]) return false;
      if (k_units[j] < q_units[i]) {
        q_lo = std::min(q_lo, i), q_hi = std::max(q_hi, i);
        k_lo = std::min(k_lo, j), k_hi = std::max(k_hi, j);
      }
    }
  if (q_hi < 0) return false;
  for (int64_t i = q_lo; i <= q_hi; ++i)
    for (int64_t j = k_lo; j <= k_hi; ++j)
      if (k_units[j] >= q_units[i]) return false;
  q_rows = {q_lo * block_, (q_hi + 1) * block_};
  kv_rows = {k_lo * block_, (k_hi + 1) * block_};
  return true;
}

// The tiles reference/flash_attention.cpp computes for one call under the causal mask: query
// tiles of q_tile rows over q_rows, key tiles of kv_tile rows over kv_rows; a key tile entirely
// after a query tile is skipped (computed masked when !skip_masked), one entirely before it is
// unmasked, the rest are computed under the mask. Positions ascend along rows, so the counts of
// "unmasked" and "not skipped" key tiles grow with the query tile: two pointers.
template <class QueryPosition>
void BlockClassifier::count_tiles(QueryPosition q_position, int64_t kv_block, const RowRange& q_rows,
                                  const RowRange& kv_rows, bool skip_masked, BlockWork& work) const {
  const int64_t k_size = kv_rows.size();
  const int64_t k_tiles = (k_size + kv_tile_ - 1) / kv_tile_;
  auto k_begin = [&](int64_t t) { return kv_rows.begin + t * kv_tile_; };
  auto k_last = [&](int64_t t) { return std::min(kv_rows.end, k_begin(t) + kv_tile_) - 1; };
  auto area_of_first = [&](int64_t tiles) { return std::min(tiles * kv_tile_, k_size); };
  int64_t unmasked = 0, computed = 0;  // key tiles [0, unmasked) unmasked, [0, computed) not skipped
  work.full_area = work.masked_area = 0;
  for (int64_t begin = q_rows.begin; begin < q_rows.end; begin += q_tile_) {
    const int64_t end = std::min(q_rows.end, begin + q_tile_);
    const int64_t q_min = q_position(begin), q_max = q_position(end - 1);
    while (unmasked < k_tiles && position(kv_block, k_last(unmasked)) <= q_min) ++unmasked;
    while (computed < k_tiles && position(kv_block, k_begin(computed)) <= q_max) ++computed;
    const int64_t rows = end - begin;
    const int64_t full = area_of_first(unmasked);
    const int64_t done = skip_masked ? area_of_first(std::max(computed, unmasked)) : k_size;
    work.full_area += rows * full;
    work.masked_area += rows * (done - full);
  }
}

// Under a window or document mask: every (query tile, key tile) asks the mask, as the kernel's
// tile classification does (reference/flash_attention.cpp).
void BlockClassifier::count_tiles_general(int64_t q_block, int64_t kv_block, bool skip_masked, BlockWork& work) const {
  PairRows rows;
  for (auto [block, pos, ends] :
       {std::tuple{q_block, &rows.q_pos, &rows.q_run_end}, std::tuple{kv_block, &rows.k_pos, &rows.k_run_end}}) {
    pos->resize(static_cast<size_t>(n_)), ends->resize(static_cast<size_t>(n_));
    for (int64_t i = 0; i < n_; ++i) (*pos)[static_cast<size_t>(i)] = position(block, i);
    for (int64_t i = n_ - 1; i >= 0; --i) {
      const auto k = static_cast<size_t>(i);
      (*ends)[k] = i + 1 < n_ && (*pos)[k + 1] == (*pos)[k] + 1 ? (*ends)[k + 1] : i;
    }
  }
  rows.ascending =
      std::is_sorted(rows.q_pos.begin(), rows.q_pos.end()) && std::is_sorted(rows.k_pos.begin(), rows.k_pos.end());
  work.full_area = work.masked_area = 0;
  count_region(rows, {0, (n_ + q_tile_ - 1) / q_tile_, 0, (n_ + kv_tile_ - 1) / kv_tile_}, skip_masked, work);
}

// The same sums as classifying every tile, but a region whose queries and keys are runs of
// consecutive positions is settled at once by its visible-pair count (all of it visible, or none);
// only regions the mask cuts are split, down to single tiles. Cost: the length of the mask's
// boundaries through the block, not its area.
void BlockClassifier::count_region(const PairRows& rows, TileRegion t, bool skip_masked, BlockWork& work) const {
  const std::vector<int64_t>&q_pos = rows.q_pos, &k_pos = rows.k_pos;
  const int64_t r0 = t.ti0 * q_tile_, r1 = std::min(n_, t.ti1 * q_tile_);
  const int64_t c0 = t.tj0 * kv_tile_, c1 = std::min(n_, t.tj1 * kv_tile_);
  const int64_t area = (r1 - r0) * (c1 - c0);
  const auto at = [](const std::vector<int64_t>& v, int64_t i) { return v[static_cast<size_t>(i)]; };
  const bool runs = at(rows.q_run_end, r0) >= r1 - 1 && at(rows.k_run_end, c0) >= c1 - 1;
  const bool one_tile = t.ti1 - t.ti0 == 1 && t.tj1 - t.tj0 == 1;
  // Positions ascend along a block's rows, so the region's positions lie in the box
  // [q_pos[r0], q_pos[r1-1]] x [k_pos[c0], k_pos[c1-1]]: when the box has no visible pair the region
  // has none, when every pair of the box is visible so is every pair of the region; for runs the
  // box is the region. (Per-document layouts scatter a block's positions in small units: the box
  // is what keeps their cost to the mask's boundaries too — a region of one document's queries
  // against another document's keys is settled whole.)
  const int64_t q_first = at(q_pos, r0), q_last = at(q_pos, r1 - 1), k_first = at(k_pos, c0),
                k_last = at(k_pos, c1 - 1);
  const int64_t box_pairs = plan_->mask().range_pairs(q_first, q_last, k_first, k_last);
  const auto scattered_cover = [&] {
    return plan_->mask().cover(std::span<const int64_t>(q_pos.data() + r0, static_cast<size_t>(r1 - r0)),
                               *std::min_element(k_pos.begin() + c0, k_pos.begin() + c1),
                               *std::max_element(k_pos.begin() + c0, k_pos.begin() + c1));
  };
  const int64_t box_area = (q_last - q_first + 1) * (k_last - k_first + 1);
  Cover cover = Cover::some;
  if (!rows.ascending && !runs) {
    if (one_tile) cover = scattered_cover();
  } else if (box_pairs == 0) {
    cover = Cover::none;
  } else if (box_pairs == box_area) {
    cover = Cover::all;
  } else if (runs) {
    cover = Cover::some;  // the box is the region
  } else if (one_tile) {  // scattered positions (a layout unit smaller than a tile): query by query
    cover = scattered_cover();
  }
  if (cover == Cover::all) {
    work.full_area += area;
  } else if (cover == Cover::none) {
    if (!skip_masked) work.masked_area += area;
  } else if (one_tile) {
    work.masked_area += area;
  } else if (t.ti1 - t.ti0 >= t.tj1 - t.tj0) {  // split the longer side
    const int64_t mid = (t.ti0 + t.ti1) / 2;
    count_region(rows, {t.ti0, mid, t.tj0, t.tj1}, skip_masked, work);
    count_region(rows, {mid, t.ti1, t.tj0, t.tj1}, skip_masked, work);
  } else {
    const int64_t mid = (t.tj0 + t.tj1) / 2;
    count_region(rows, {t.ti0, t.ti1, t.tj0, mid}, skip_masked, work);
    count_region(rows, {t.ti0, t.ti1, mid, t.tj1}, skip_masked, work);
  }
}

BlockWork BlockClassifier::evaluate(int64_t q_block, int64_t kv_block) const {
  const RowRange all{0, n_};
  BlockWork work;
  auto one_kernel = [&](RowRange q_rows, RowRange kv_rows) {
    work.kernels = 1;
    work.q_rows = q_rows, work.kv_rows = kv_rows;
    work.computed_pairs = q_rows.size() * kv_rows.size();
  };
  if (!causal_) {
    work.shape = BlockShape::full;
    one_kernel(all, all);
    work.pairs = work.full_area = n_ * n_;
    return work;
  }
  if (erratum_) {
    // The book's erratum 2, as resolve_compute has it: the block at offset 0 unmasked, the others
    // keys by position against the query's index within its block.
    work.shape = BlockShape::erratum;
    one_kernel(all, all);
    if (kv_block == 0) {
      work.pairs = work.full_area = n_ * n_;
      return work;
    }
    for (int64_t j = 0; j < n_; ++j) {
      const int64_t key = position(kv_block, j);
      if (key >= n_) break;  // positions ascend: no later key is visible to any index
      work.pairs += n_ - key;
    }
    count_tiles([](int64_t row) { return row; }, kv_block, all, all, true, work);
    return work;
  }
  if (general_) {
    // As resolve_compute: skipped when nothing is visible, unmasked when everything is, else one
    // masked call whose tiles the kernel classifies.
    work.pairs = block_mask_pairs(*plan_, q_block, kv_block);
    if (work.pairs == 0) {
      work.shape = skip_ ? BlockShape::skipped : BlockShape::masked;
      if (!skip_) {
        one_kernel(all, all);
        work.masked_area = n_ * n_;
      }
    } else if (work.pairs == n_ * n_) {
      work.shape = BlockShape::full;
      one_kernel(all, all);
      work.full_area = n_ * n_;
    } else {
      work.shape = BlockShape::partial;
      one_kernel(all, all);
      count_tiles_general(q_block, kv_block, skip_, work);
    }
    return work;
  }
  work.pairs = ring_layout_.causal_pairs(q_block, kv_block);
  auto q_position = [&](int64_t row) { return position(q_block, row); };
  RowRange q_rows, kv_rows;
  if (work.pairs == 0) {
    work.shape = skip_ ? BlockShape::skipped : BlockShape::masked;
    if (!skip_) {
      one_kernel(all, all);
      count_tiles(q_position, kv_block, all, all, false, work);
    }
  } else if (work.pairs == n_ * n_) {
    work.shape = BlockShape::full;
    one_kernel(all, all);
    work.full_area = n_ * n_;
  } else if (skip_ && find_rectangle(q_block, kv_block, q_rows, kv_rows)) {
    work.shape = q_rows.size() == n_ ? BlockShape::kv_half : BlockShape::q_half;
    one_kernel(q_rows, kv_rows);
    work.full_area = work.computed_pairs;
  } else {
    work.shape = BlockShape::diagonal;
    one_kernel(all, all);
    count_tiles(q_position, kv_block, all, all, skip_, work);
  }
  return work;
}

BlockWork BlockClassifier::classify(int64_t q_block, int64_t kv_block) {
  const int memo = memo_class(q_block, kv_block);
  if (memo < 0) return evaluate(q_block, kv_block);
  const size_t key = static_cast<size_t>(memo);
  if (!memo_valid_[key]) {
    memo_[key] = evaluate(q_block, kv_block);
    memo_valid_[key] = true;
  }
  return memo_[key];
}

}  // namespace ringlab
