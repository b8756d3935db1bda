#include "reference/layout.hpp"

#include <algorithm>
#include <cassert>

#include "reference/error.hpp"
#include "reference/names.hpp"

namespace ringlab {

namespace {

constexpr const char* kLayoutNames[] = {"contiguous", "zigzag", "striped"};

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
    }
  }
  const int64_t round_tokens = (kind == LayoutKind::zigzag ? 2 : 1) * ranks * block_;
  if (seq % round_tokens != 0) {
    const std::string what = kind == LayoutKind::zigzag ? "2 P block" : "P block";
    throw UsageError("S=" + S + " is not divisible by " + what + "=" + std::to_string(round_tokens) + " as the " +
                     layout_name(kind) + " layout with --block " + std::to_string(block_) +
                     " needs; pick S a multiple of " + std::to_string(round_tokens) + " or another --block");
  }
}

int64_t Layout::rank_of_unit(int64_t unit) const {
  const int64_t per_rank = rounds();
  switch (kind_) {
    case LayoutKind::contiguous: return unit / per_rank;
    case LayoutKind::striped: return unit % ranks_;
    case LayoutKind::zigzag: {
      const int64_t round = unit / ranks_, offset = unit % ranks_;
      return round % 2 == 0 ? offset : ranks_ - 1 - offset;
    }
  }
  return -1;
}

std::vector<int64_t> Layout::units_of(int64_t rank) const {
  const int64_t per_rank = rounds();
  std::vector<int64_t> units(static_cast<size_t>(per_rank));
  for (int64_t f = 0; f < per_rank; ++f) {
    switch (kind_) {
      case LayoutKind::contiguous: units[f] = rank * per_rank + f; break;
      case LayoutKind::striped: units[f] = f * ranks_ + rank; break;
      case LayoutKind::zigzag: units[f] = f * ranks_ + (f % 2 == 0 ? rank : ranks_ - 1 - rank); break;
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
  switch (kind_) {
    case LayoutKind::contiguous: index_in_rank = unit % rounds(); break;
    case LayoutKind::striped:
    case LayoutKind::zigzag: index_in_rank = unit / ranks_; break;
  }
  return index_in_rank * block_ + position % block_;
}

int64_t Layout::causal_pairs(int64_t q_rank, int64_t kv_rank) const {
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
  }
  const int64_t diagonal = q_rank == kv_rank ? n * block_ * (block_ + 1) / 2 : 0;
  return earlier * block_ * block_ + diagonal;
}

std::string Layout::to_string() const {
  return std::string(layout_name(kind_)) + "(block=" + std::to_string(block_) + ")";
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
