// Lab 02 — the layouts. Your file: fill in the TODOs, then
//     ringlab grade 02-layouts this_file.cpp
// See README.md and lab.hpp.
#include <algorithm>

#include "lab.hpp"

namespace ringlab::lab02 {

std::vector<int64_t> zigzag_positions(int64_t seq, int64_t ranks, int64_t rank, int64_t block) {
  // TODO 1: deal units of `block` tokens in rounds of `ranks`; odd rounds go backwards.
  (void)seq, (void)ranks, (void)rank, (void)block;
  lab::todo("zigzag_positions");
  return {};
}

std::vector<int64_t> striped_positions(int64_t seq, int64_t ranks, int64_t rank, int64_t block) {
  // TODO 2: unit u goes to rank u mod ranks.
  (void)seq, (void)ranks, (void)rank, (void)block;
  lab::todo("striped_positions");
  return {};
}

int64_t causal_pairs(std::span<const int64_t> q_positions, std::span<const int64_t> k_positions) {
  // TODO 3: count the pairs (q, k) with k <= q.
  (void)q_positions, (void)k_positions;
  lab::todo("causal_pairs");
  return 0;
}

}  // namespace ringlab::lab02
