// Lab 02 — reference solution: zig-zag and striped positions, and causal pair counts.
#include <algorithm>

#include "lab.hpp"

namespace ringlab::lab02 {

namespace {

// Appends the positions of unit u.
void append_unit(std::vector<int64_t>& positions, int64_t unit, int64_t block) {
  for (int64_t t = 0; t < block; ++t) positions.push_back(unit * block + t);
}

}  // namespace

std::vector<int64_t> zigzag_positions(int64_t seq, int64_t ranks, int64_t rank, int64_t block) {
  std::vector<int64_t> positions;
  const int64_t rounds = seq / (block * ranks);
  for (int64_t round = 0; round < rounds; ++round) {
    const int64_t slot = round % 2 == 0 ? rank : ranks - 1 - rank;  // odd rounds fold back
    append_unit(positions, round * ranks + slot, block);
  }
  return positions;  // rounds ascend, so the units (and positions) do
}

std::vector<int64_t> striped_positions(int64_t seq, int64_t ranks, int64_t rank, int64_t block) {
  std::vector<int64_t> positions;
  for (int64_t unit = rank; unit < seq / block; unit += ranks) append_unit(positions, unit, block);
  return positions;
}

int64_t causal_pairs(std::span<const int64_t> q_positions, std::span<const int64_t> k_positions) {
  std::vector<int64_t> keys(k_positions.begin(), k_positions.end());
  std::sort(keys.begin(), keys.end());
  int64_t pairs = 0;
  for (int64_t q : q_positions) pairs += std::upper_bound(keys.begin(), keys.end(), q) - keys.begin();  // keys <= q
  return pairs;
}

}  // namespace ringlab::lab02
