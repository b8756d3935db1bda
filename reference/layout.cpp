#include "reference/layout.hpp"

#include <algorithm>
#include <cassert>
#include <cstdlib>
#include <functional>
#include <numeric>
#include <queue>
#include <stdexcept>
#include <utility>

#include "reference/error.hpp"
#include "reference/names.hpp"

namespace ringlab {

namespace {

constexpr const char* kLayoutNames[] = {"contiguous", "zigzag", "striped", "balanced"};

}  // namespace

const char* layout_name(LayoutKind kind) { return name_of(kLayoutNames, kind); }

LayoutKind parse_layout(const std::string& name) {
  return parse_named<LayoutKind>(kLayoutNames, name, "layout", "--layout");
}

Layout::Layout(LayoutKind kind, int64_t seq, int64_t ranks, int64_t block)
    : kind_(kind), seq_(seq), ranks_(ranks), block_(block) {
  const std::string S = std::to_string(seq), P = std::to_string(ranks);
  if (ranks <= 0) throw UsageError("the number of ranks P must be positive, got " + P + "; pass --ranks N, N >= 1");
  if (seq <= 0) throw UsageError("sequence length S must be positive, got " + S + "; pass --seq N, N >= 1");
  if (block_ < 0) throw UsageError("--block must be positive, got " + std::to_string(block_));
  if (block_ == 0) {
    switch (kind) {
      case LayoutKind::contiguous:
        if (seq % ranks != 0) {
          throw UsageError("S=" + S + " is not divisible by P=" + P +
                           " as the contiguous layout needs; pick S a multiple of " + P);
        }
        block_ = seq / ranks;
        break;
      case LayoutKind::zigzag:
        if (seq % (2 * ranks) != 0) {
          throw UsageError("S=" + S + " is not divisible by 2P=" + std::to_string(2 * ranks) +
                           " as the zigzag layout needs (two chunks per rank); pick S a multiple of " +
                           std::to_string(2 * ranks));
        }
        block_ = seq / (2 * ranks);
        break;
      case LayoutKind::striped: block_ = 1; break;
      case LayoutKind::balanced:
        if (seq % ranks != 0) {
          throw UsageError("S=" + S + " is not divisible by P=" + P +
                           " as the balanced layout needs (S/P tokens per rank); pick S a multiple of " + P);
        }
        block_ = seq / ranks;  // the finest of 64, 32, ..., 2, 1 units per rank that divides S
        for (int64_t per_rank : {64, 32, 16, 8, 4, 2})
          if (seq % (per_rank * ranks) == 0) {
            block_ = seq / (per_rank * ranks);
            break;
          }
        break;
    }
  }
  const int64_t round_tokens = (kind == LayoutKind::zigzag ? 2 : 1) * ranks * block_;
  if (seq % round_tokens != 0) {
    const std::string what = kind == LayoutKind::zigzag ? "2 P block" : "P block";
    throw UsageError("S=" + S + " is not divisible by " + what + "=" + std::to_string(round_tokens) + " as the " +
                     layout_name(kind) + " layout with --block " + std::to_string(block_) +
                     " needs; pick S a multiple of " + std::to_string(round_tokens) +
                     ", another --block, or no --block (ringlab run then pads S to fit)");
  }
}

Layout::Layout(LayoutKind kind, int64_t seq, int64_t ranks, int64_t block, const std::vector<int64_t>& rank_of_unit)
    : Layout(kind == LayoutKind::zigzag ? LayoutKind::striped : kind, seq, ranks, block) {
  kind_ = kind;
  auto table = std::make_shared<Table>();
  table->rank_of_unit = rank_of_unit;
  table->units_of_rank.resize(static_cast<size_t>(ranks));
  table->index_in_rank.resize(rank_of_unit.size());
  // A table is built from a spec's fields (make_layout): a unit without a rank in [0, P), or a
  // table of the wrong size, is a bug to report, never an index to write through.
  if (static_cast<int64_t>(rank_of_unit.size()) != units()) {
    throw std::logic_error("layout table: " + std::to_string(rank_of_unit.size()) +
                           " units, not S/block=" + std::to_string(units()));
  }
  for (size_t u = 0; u < rank_of_unit.size(); ++u) {
    if (rank_of_unit[u] < 0 || rank_of_unit[u] >= ranks) {
      throw std::logic_error("layout table: unit " + std::to_string(u) + " has rank " +
                             std::to_string(rank_of_unit[u]) + ", not one of 0.." + std::to_string(ranks - 1));
    }
  }
  for (size_t u = 0; u < rank_of_unit.size(); ++u) {
    std::vector<int64_t>& units = table->units_of_rank[static_cast<size_t>(rank_of_unit[u])];
    table->index_in_rank[u] = static_cast<int64_t>(units.size());
    units.push_back(static_cast<int64_t>(u));
  }
  for (const std::vector<int64_t>& units : table->units_of_rank)
    if (static_cast<int64_t>(units.size()) != rounds()) throw std::logic_error("layout table: unequal ranks");
  table_ = std::move(table);
}

int64_t Layout::rank_of_unit(int64_t unit) const {
  if (table_) return table_->rank_of_unit[static_cast<size_t>(unit)];
  const int64_t per_rank = rounds();
  switch (kind_) {
    case LayoutKind::contiguous: return unit / per_rank;
    case LayoutKind::striped: return unit % ranks_;
    case LayoutKind::zigzag: {
      const int64_t round = unit / ranks_, offset = unit % ranks_;
      return round % 2 == 0 ? offset : ranks_ - 1 - offset;
    }
    case LayoutKind::balanced: break;  // always a table
  }
  return -1;
}

std::vector<int64_t> Layout::units_of(int64_t rank) const {
  if (table_) return table_->units_of_rank[static_cast<size_t>(rank)];
  const int64_t per_rank = rounds();
  std::vector<int64_t> units(static_cast<size_t>(per_rank));
  for (int64_t f = 0; f < per_rank; ++f) {
    switch (kind_) {
      case LayoutKind::contiguous: units[f] = rank * per_rank + f; break;
      case LayoutKind::striped: units[f] = f * ranks_ + rank; break;
      case LayoutKind::zigzag: units[f] = f * ranks_ + (f % 2 == 0 ? rank : ranks_ - 1 - rank); break;
      case LayoutKind::balanced: break;  // always a table
    }
  }
  return units;  // ascending in every case
}

std::vector<int64_t> Layout::positions(int64_t rank) const {
  std::vector<int64_t> result;
  result.reserve(static_cast<size_t>(tokens_per_rank()));
  for (int64_t unit : units_of(rank))
    for (int64_t t = 0; t < block_; ++t) result.push_back(unit * block_ + t);
  return result;
}

int64_t Layout::local_row(int64_t position) const {
  const int64_t unit = position / block_;
  int64_t index_in_rank = 0;  // how many of the rank's units come before this one
  if (table_) return table_->index_in_rank[static_cast<size_t>(unit)] * block_ + position % block_;
  switch (kind_) {
    case LayoutKind::contiguous: index_in_rank = unit % rounds(); break;
    case LayoutKind::striped:
    case LayoutKind::zigzag: index_in_rank = unit / ranks_; break;
    case LayoutKind::balanced: break;  // always a table
  }
  return index_in_rank * block_ + position % block_;
}

int64_t Layout::causal_pairs(int64_t q_rank, int64_t kv_rank) const {
  if (table_) return causal_pairs_of_units(units_of(q_rank), units_of(kv_rank), block_);
  // Unit pairs (a from q_rank, b from kv_rank) with b < a, then whole-unit and diagonal terms.
  const int64_t n = rounds();
  int64_t earlier = 0;  // #{(a, b) : b < a}
  switch (kind_) {
    case LayoutKind::contiguous: earlier = kv_rank < q_rank ? n * n : (kv_rank == q_rank ? n * (n - 1) / 2 : 0); break;
    case LayoutKind::striped:
      // a = f P + i, b = g P + j: b < a iff g < f, or g == f and j < i.
      earlier = n * (n - 1) / 2 + (kv_rank < q_rank ? n : 0);
      break;
    case LayoutKind::zigzag: {
      // Same round: even rounds keep rank order, odd rounds reverse it.
      const int64_t even = (n + 1) / 2, odd = n / 2;
      earlier = n * (n - 1) / 2 + (kv_rank < q_rank ? even : 0) + (kv_rank > q_rank ? odd : 0);
      break;
    }
    case LayoutKind::balanced: break;  // always a table
  }
  const int64_t diagonal = q_rank == kv_rank ? n * block_ * (block_ + 1) / 2 : 0;
  return earlier * block_ * block_ + diagonal;
}

std::string Layout::to_string() const {
  const bool per_document = table_ && kind_ != LayoutKind::balanced;
  return std::string(layout_name(kind_)) + (per_document ? " per document" : "") + "(block=" + std::to_string(block_) +
         ")";
}

int64_t layout_padding(LayoutKind kind, int64_t seq, int64_t ranks, int64_t block) {
  if (block != 0 || ranks <= 0 || seq <= 0) return 0;
  const int64_t granule = kind == LayoutKind::zigzag ? 2 * ranks : ranks;
  return (granule - seq % granule) % granule;
}

int64_t document_granule(LayoutKind kind, int64_t ranks, int64_t block) {
  switch (kind) {
    case LayoutKind::zigzag: return 2 * ranks * std::max<int64_t>(1, block);
    case LayoutKind::striped: return ranks * std::max<int64_t>(1, block);
    default: return 1;
  }
}

std::vector<int64_t> layout_documents(const std::string& text, int64_t seq, uint64_t seed, LayoutKind kind,
                                      int64_t ranks, int64_t block) {
  int64_t granule = document_granule(kind, ranks, block);
  if (text.rfind("random:", 0) == 0 && granule > 1) {
    const int64_t count = std::max<int64_t>(1, std::atoll(text.c_str() + 7));
    while (seq % (2 * granule) == 0 && seq / (2 * granule) >= 8 * count) granule *= 2;
  }
  return parse_documents(text, seq, seed, granule);
}

namespace {

// The per-document unit: `block`, or when 0 the largest unit that cuts every document's chunks
// (zig-zag) evenly; striped deals single tokens.
int64_t per_document_block(LayoutKind kind, int64_t ranks, int64_t block, const std::vector<int64_t>& lengths) {
  if (block != 0) return block;
  if (kind == LayoutKind::striped) return 1;
  int64_t b = 0;
  for (int64_t length : lengths) b = std::gcd(b, length / (2 * ranks));
  return std::max<int64_t>(1, b);
}

}  // namespace

std::string check_layout(LayoutKind kind, int64_t seq, int64_t ranks, int64_t block, const Mask& mask) {
  const bool per_document = mask.has_documents() && (kind == LayoutKind::zigzag || kind == LayoutKind::striped);
  if (!per_document || ranks <= 0 || seq <= 0 || block < 0) return Layout(kind, seq, ranks, block).to_string();
  // Per document: the documents (their padding included) fill S exactly, and every one is a
  // whole number of granules, so every unit of S has exactly one owner.
  const std::vector<int64_t> lengths = mask.document_lengths();
  const int64_t span = std::accumulate(lengths.begin(), lengths.end(), int64_t{0});
  if (span != seq) {
    throw UsageError("the documents span " + std::to_string(span) + " positions, not S=" + std::to_string(seq) +
                     ": the per-document " + layout_name(kind) +
                     " layout deals out whole documents, so padding goes at the end of each document, never "
                     "after the last; make the documents (with their padding) add up to S, or use --layout "
                     "contiguous or balanced");
  }
  const int64_t b = per_document_block(kind, ranks, block, lengths);
  const int64_t granule = document_granule(kind, ranks, b);
  for (size_t d = 0; d < lengths.size(); ++d) {
    if (lengths[d] % granule != 0) {
      throw UsageError("document " + std::to_string(d) + " has " + std::to_string(lengths[d]) +
                       " tokens, not a multiple of " + std::to_string(granule) + " as the per-document " +
                       layout_name(kind) + " layout needs (" + (kind == LayoutKind::zigzag ? "2P chunks" : "P units") +
                       " per document); give lengths that are multiples of " + std::to_string(granule) +
                       ", use --docs random:N (drawn in such multiples), or --layout contiguous or balanced");
    }
  }
  // S is then a multiple of P b, which the table's constructor checks (as striped: P units a round).
  (void)Layout(LayoutKind::striped, seq, ranks, b);
  return std::string(layout_name(kind)) + " per document(block=" + std::to_string(b) + ")";
}

Layout make_layout(LayoutKind kind, int64_t seq, int64_t ranks, int64_t block, const Mask& mask) {
  const bool per_document = mask.has_documents() && (kind == LayoutKind::zigzag || kind == LayoutKind::striped);
  if (!per_document && kind != LayoutKind::balanced) return Layout(kind, seq, ranks, block);
  if (kind == LayoutKind::balanced) {
    const Layout plain(kind, seq, ranks, block);  // validates and picks the block
    const int64_t b = plain.block(), units = plain.units(), room = plain.rounds();
    std::vector<std::pair<int64_t, int64_t>> work;  // (pairs, unit)
    for (int64_t u = 0; u < units; ++u) work.emplace_back(mask.range_pairs(u * b, u * b + b - 1, 0, seq - 1), u);
    std::stable_sort(work.begin(), work.end(), [](const auto& x, const auto& y) { return x.first > y.first; });
    // The least-loaded rank with room, the lowest-numbered among equals: the top of a heap of
    // (load, rank) over the ranks with room (a rank leaves it when full). O(units log P).
    std::vector<int64_t> count(static_cast<size_t>(ranks), 0);
    std::vector<int64_t> owner(static_cast<size_t>(units), -1);
    std::priority_queue<std::pair<int64_t, int64_t>, std::vector<std::pair<int64_t, int64_t>>, std::greater<>> open;
    for (int64_t r = 0; r < ranks; ++r) open.emplace(0, r);
    for (const auto& [pairs, unit] : work) {
      const auto [load, best] = open.top();
      open.pop();
      owner[static_cast<size_t>(unit)] = best;
      if (++count[static_cast<size_t>(best)] < room) open.emplace(load + pairs, best);
    }
    return Layout(kind, seq, ranks, b, owner);
  }
  // Per document: check_layout has made sure the documents fill S in whole granules, so every
  // index below lies inside `owner` and every unit gets a rank.
  (void)check_layout(kind, seq, ranks, block, mask);
  const std::vector<int64_t> lengths = mask.document_lengths();
  const int64_t b = per_document_block(kind, ranks, block, lengths);
  std::vector<int64_t> owner(static_cast<size_t>(seq / b), -1);
  int64_t start = 0;
  for (int64_t length : lengths) {
    const int64_t first = start / b, units = length / b;
    if (kind == LayoutKind::zigzag) {
      const int64_t per_chunk = units / (2 * ranks);
      for (int64_t chunk = 0; chunk < 2 * ranks; ++chunk)
        for (int64_t k = 0; k < per_chunk; ++k)
          owner[static_cast<size_t>(first + chunk * per_chunk + k)] = chunk < ranks ? chunk : 2 * ranks - 1 - chunk;
    } else {
      for (int64_t k = 0; k < units; ++k) owner[static_cast<size_t>(first + k)] = k % ranks;
    }
    start += length;
  }
  return Layout(kind, seq, ranks, b, owner);
}

int64_t causal_pairs_of_units(std::span<const int64_t> q_units, std::span<const int64_t> k_units, int64_t block) {
  int64_t earlier = 0, shared = 0;
  size_t j = 0;  // k_units[0..j) < current q unit
  for (int64_t a : q_units) {
    while (j < k_units.size() && k_units[j] < a) ++j;
    earlier += static_cast<int64_t>(j);
    if (j < k_units.size() && k_units[j] == a) ++shared;
  }
  return earlier * block * block + shared * block * (block + 1) / 2;
}

int64_t causal_pairs_of_positions(std::span<const int64_t> q_pos, std::span<const int64_t> k_pos) {
  std::vector<int64_t> q(q_pos.begin(), q_pos.end()), k(k_pos.begin(), k_pos.end());
  std::sort(q.begin(), q.end());
  std::sort(k.begin(), k.end());
  int64_t pairs = 0;
  size_t j = 0;  // k[0..j) <= current query position
  for (int64_t position : q) {
    while (j < k.size() && k[j] <= position) ++j;
    pairs += static_cast<int64_t>(j);
  }
  return pairs;
}

namespace {

// View of a tensor as (outer, rows, inner) around the sequence axis.
struct AxisView {
  int64_t outer = 1, rows = 0, inner = 1;
};

AxisView axis_view(const Shape& shape, int axis) {
  AxisView view;
  for (int i = 0; i < axis; ++i) view.outer *= shape[i];
  view.rows = shape[axis];
  for (size_t i = axis + 1; i < shape.size(); ++i) view.inner *= shape[i];
  return view;
}

}  // namespace

template <class T>
Tensor<T> gather_rows(const Tensor<T>& global, std::span<const int64_t> positions, int axis) {
  Shape shape = global.shape();
  const AxisView g = axis_view(shape, axis);
  shape[axis] = static_cast<int64_t>(positions.size());
  Tensor<T> local(shape);
  const int64_t rows = shape[axis];
  for (int64_t o = 0; o < g.outer; ++o)
    for (int64_t r = 0; r < rows; ++r)
      std::copy_n(global.data() + (o * g.rows + positions[r]) * g.inner, g.inner,
                  local.data() + (o * rows + r) * g.inner);
  return local;
}

template <class T>
void scatter_rows(const Tensor<T>& local, std::span<const int64_t> positions, int axis, Tensor<T>& global) {
  const AxisView g = axis_view(global.shape(), axis);
  const int64_t rows = static_cast<int64_t>(positions.size());
  assert(local.shape()[axis] == rows);
  for (int64_t o = 0; o < g.outer; ++o)
    for (int64_t r = 0; r < rows; ++r)
      std::copy_n(local.data() + (o * rows + r) * g.inner, g.inner,
                  global.data() + (o * g.rows + positions[r]) * g.inner);
}

template Tensor<float> gather_rows(const Tensor<float>&, std::span<const int64_t>, int);
template Tensor<double> gather_rows(const Tensor<double>&, std::span<const int64_t>, int);
template void scatter_rows(const Tensor<float>&, std::span<const int64_t>, int, Tensor<float>&);
template void scatter_rows(const Tensor<double>&, std::span<const int64_t>, int, Tensor<double>&);

}  // namespace ringlab
