// Token-to-rank layouts: which global token positions each of P ranks holds.
//
// Tokens are grouped in *units* of `block` consecutive positions; units are dealt to ranks:
//   contiguous  rank r holds units [r n, (r+1) n), n = S/(P block)    — default block S/P
//   striped     unit u goes to rank u mod P (round robin)             — default block 1
//   zigzag      units are dealt in rounds of P; even rounds go 0..P-1, odd rounds P-1..0
//               (a fold), so each rank pairs an early unit with a late one — default block
//               S/(2P), the 2P-chunk split of Megatron / TransformerEngine; block 1 is the
//               token-level fold of the source material (S=16, P=4: rank 0 holds 0, 7, 8, 15).
// A rank's local rows are its positions in ascending order. The gather back to global order
// inverts that. For hybrid schedules, Ulysses groups are runs of consecutive ranks, and a group's
// tokens are the union of its members' — which is again this layout over P/U positions.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "reference/mask.hpp"
#include "reference/tensor.hpp"

namespace ringlab {

enum class LayoutKind : uint8_t { contiguous, zigzag, striped, balanced };

const char* layout_name(LayoutKind kind);
// Parses "contiguous" | "zigzag" | "striped" | "balanced"; throws UsageError otherwise.
LayoutKind parse_layout(const std::string& name);

class Layout {
 public:
  // block 0 means the default block of the kind. Throws UsageError naming the divisibility that
  // fails (S by P block, and by 2P block for zigzag) and a fix.
  Layout(LayoutKind kind, int64_t seq, int64_t ranks, int64_t block = 0);
  // An explicit unit -> rank table (units of `block` tokens, the same number on every rank): the
  // per-document and balanced layouts of make_layout.
  Layout(LayoutKind kind, int64_t seq, int64_t ranks, int64_t block, const std::vector<int64_t>& rank_of_unit);
  bool is_explicit() const { return table_ != nullptr; }

  LayoutKind kind() const { return kind_; }
  int64_t seq() const { return seq_; }
  int64_t ranks() const { return ranks_; }
  int64_t block() const { return block_; }
  int64_t units() const { return seq_ / block_; }
  int64_t tokens_per_rank() const { return seq_ / ranks_; }
  int64_t rounds() const { return units() / ranks_; }  // units per rank

  int64_t rank_of_unit(int64_t unit) const;
  int64_t rank_of(int64_t position) const { return rank_of_unit(position / block_); }
  std::vector<int64_t> units_of(int64_t rank) const;   // ascending
  std::vector<int64_t> positions(int64_t rank) const;  // ascending, tokens_per_rank() of them
  // Local row of a global position on its rank.
  int64_t local_row(int64_t position) const;

  // Causal work between two ranks: the number of (query, key) pairs with key position <= query
  // position, queries from q_rank, keys from kv_rank. O(1): closed forms per kind.
  int64_t causal_pairs(int64_t q_rank, int64_t kv_rank) const;

  std::string to_string() const;  // "zigzag(block=128)"

 private:
  struct Table {
    std::vector<int64_t> rank_of_unit, index_in_rank;
    std::vector<std::vector<int64_t>> units_of_rank;
  };
  LayoutKind kind_;
  int64_t seq_, ranks_, block_;
  std::shared_ptr<const Table> table_;
};

// The layout a schedule uses under a mask:
//   * contiguous — as Layout, whatever the mask;
//   * zigzag, striped with packed documents — applied per document: each document is cut into 2P
//     chunks, chunks i and 2P-1-i to rank i (zig-zag), or its units dealt round robin (striped),
//     so every rank holds the same share of every document; each document's length must be a
//     multiple of 2P (zig-zag) or P block (striped);
//   * balanced — units (default S/(64P) tokens) assigned by their work under the mask: greedy,
//     heaviest unit first to the least-loaded rank that still has room (every rank holds S/P
//     tokens). Work of a unit = visible (query, key) pairs of its queries.
// Throws UsageError naming a document that does not divide, or documents that do not fill S
// (a per-document layout has no room for tail padding), with the fix.
Layout make_layout(LayoutKind kind, int64_t seq, int64_t ranks, int64_t block, const Mask& mask);
// make_layout's checks without its tables, in O(documents) whatever S (for specs read from files):
// throws the same UsageError, else returns what make_layout(...).to_string() would.
std::string check_layout(LayoutKind kind, int64_t seq, int64_t ranks, int64_t block, const Mask& mask);
// Uneven shapes: the padding tokens that make S fit the layout's default units (S a multiple of P,
// 2P for zig-zag); 0 when S fits, or when an explicit block was asked for (then S must fit it).
int64_t layout_padding(LayoutKind kind, int64_t seq, int64_t ranks, int64_t block);
// Tokens a packed document's length must be a multiple of for the layout (1 when any will do).
int64_t document_granule(LayoutKind kind, int64_t ranks, int64_t block);
// --docs for a layout: parse_documents with random lengths drawn in multiples of the layout's
// granule, doubled while every document keeps room for 8 of them (coarser units, faster plans).
std::vector<int64_t> layout_documents(const std::string& text, int64_t seq, uint64_t seed, LayoutKind kind,
                                      int64_t ranks, int64_t block);

// Visible (query, key) pairs between two sets of whole units of `block` tokens under the causal
// mask: block^2 per unit pair with key unit < query unit, block(block+1)/2 per shared unit.
// Both lists ascending.
int64_t causal_pairs_of_units(std::span<const int64_t> q_units, std::span<const int64_t> k_units, int64_t block);
// Visible pairs between arbitrary position lists (any order) under the causal mask.
int64_t causal_pairs_of_positions(std::span<const int64_t> q_pos, std::span<const int64_t> k_pos);

// Rows of `global` along `axis` (the sequence axis: 1 for (B,S,H,D), 2 for (B,H,S)) at the given
// positions, in that order -> a tensor with positions.size() rows along axis.
template <class T>
Tensor<T> gather_rows(const Tensor<T>& global, std::span<const int64_t> positions, int axis);
// The inverse: writes `local`'s rows into `global` at the given positions along axis.
template <class T>
void scatter_rows(const Tensor<T>& local, std::span<const int64_t> positions, int axis, Tensor<T>& global);

}  // namespace ringlab
