// What one compute of a plan costs, decided without allocating: the dry executor's fast path of
// resolve_compute (sim/plan/plan.hpp), plus the tiles the kernel really computes.
//
// resolve_compute is the definition; BlockClassifier gives the same shape, visible pairs, kernel
// rows and computed pairs (tests/cost/test_block_work.cpp checks every (rank, key block) of many
// plans against it) using O(1) closed forms:
//   * a ring position's block is rank g of the same layout over R = P/U positions with units of
//     U x block tokens (sim/plan/algorithms/ulysses.cpp), so its i-th local row sits at
//         position(g, i) = unit_R(g, i / b') b' + i mod b',   b' = U block,
//         unit_R(g, f) = g m + f (contiguous) | f R + g (striped) | f R + (f even ? g : R-1-g) (zigzag)
//     with m the units per rank, and the visible pairs are Layout::causal_pairs over R positions;
//   * a causal kernel's tiles (q_tile x kv_tile rows) are either skipped (every key after every
//     query), computed unmasked (every key before every query) or computed whole under the mask;
//     positions ascend along the rows, so two pointers count them in O(n / tile).
// Memo: for the three layouts every comparison between a query row's and a key row's position
// depends only on the rows and on sign(kv_block - q_block) (different units differ by their round
// f first; within a round by g, reversed in zigzag's odd rounds), so a causal block's whole
// classification is one of three; the classifier keeps those three.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "sim/plan/plan.hpp"

namespace ringlab {

struct BlockWork {
  BlockShape shape = BlockShape::full;
  int64_t pairs = 0;           // visible (query, key) pairs per (batch, head), as ComputeOp::pairs
  int64_t computed_pairs = 0;  // rows x cols of the kernel call, as ComputeOp::computed_pairs
  int kernels = 0;             // kernel calls: 0 when skipped, else 1
  RowRange q_rows, kv_rows;    // the kernel call's rows (kv rows within the block)
  int64_t full_area = 0;       // pairs in tiles computed without a mask, per (batch, head)
  int64_t masked_area = 0;     // pairs in tiles computed whole under the mask
};

class BlockClassifier {
 public:
  // Tiles: the kernel's query rows x key rows per tile (DeviceModel::q_tile, kv_tile).
  BlockClassifier(const Plan& plan, int64_t q_tile, int64_t kv_tile);

  // This rank's queries (ring position q_block) against the keys of ring position kv_block.
  BlockWork classify(int64_t q_block, int64_t kv_block);
  // Which of the three memo classes (q, kv) falls in — 0, 1, 2 — or -1 when blocks of this plan
  // are not classified by class (the erratum mask). Two pairs with the same class have the same
  // BlockWork.
  int memo_class(int64_t q_block, int64_t kv_block) const {
    if (erratum_ || general_) return -1;
    if (!causal_) return 1;
    return kv_block < q_block ? 0 : (kv_block == q_block ? 1 : 2);
  }

  // Global position of local row `row` of ring position g; rows ascend.
  int64_t position(int64_t g, int64_t row) const;
  // Layout unit (of the plan's layout, `block` tokens) number i of ring position g, ascending.
  int64_t unit(int64_t g, int64_t i) const;
  int64_t units_per_block() const { return ulysses_ * rounds_; }

 private:
  BlockWork evaluate(int64_t q_block, int64_t kv_block) const;
  bool find_rectangle(int64_t q_block, int64_t kv_block, RowRange& q_rows, RowRange& kv_rows) const;
  void count_tiles_general(int64_t q_block, int64_t kv_block, bool skip_masked, BlockWork& work) const;
  // Tiles [ti0, ti1) x [tj0, tj1) of one block pair; its rows' positions (ascending) and, per row,
  // the last row of its run of consecutive positions.
  struct TileRegion {
    int64_t ti0, ti1, tj0, tj1;
  };
  struct PairRows {
    std::vector<int64_t> q_pos, k_pos, q_run_end, k_run_end;
    bool ascending = true;  // both blocks' positions ascend along their rows (every layout's do)
  };
  void count_region(const PairRows& rows, TileRegion region, bool skip_masked, BlockWork& work) const;
  template <class QueryPosition>
  void count_tiles(QueryPosition q_position, int64_t kv_block, const RowRange& q_rows, const RowRange& kv_rows,
                   bool skip_masked, BlockWork& work) const;

  LayoutKind kind_;
  int64_t R_, ulysses_, block_, rounds_, n_;  // ring degree, U, layout block, units per rank, block tokens
  Layout ring_layout_;                        // the layout over R positions, units of U block tokens
  int64_t q_tile_, kv_tile_;
  bool causal_, skip_, erratum_;
  bool general_;                                          // blocks counted by the mask (Plan::counted_blocks), no memo
  const Plan* plan_;                                      // for the general mask's pairs
  std::vector<std::vector<int64_t>> explicit_positions_;  // per ring position, for a layout given as a table
  std::array<BlockWork, 3> memo_{};                       // by sign(kv - q) + 1
  std::array<bool, 3> memo_valid_{};
};

}  // namespace ringlab
