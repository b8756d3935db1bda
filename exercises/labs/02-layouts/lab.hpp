// Lab 02 — the layouts: which global token positions each of P ranks holds. What you implement.
//
// Tokens are grouped in units of `block` consecutive positions (unit u = positions
// [u block, (u+1) block)); the units are dealt to ranks:
//   zig-zag  in rounds of P units: even rounds go to ranks 0, 1, ..., P-1, odd rounds to
//            P-1, ..., 1, 0 (a fold), so every rank pairs an early unit with a late one. With
//            block = S/(2P) that is the 2P-chunk split (rank r: chunks r and 2P-1-r); with block 1
//            it is the token-level fold (S = 16, P = 4: rank 0 holds 0, 7, 8, 15).
//   striped  unit u goes to rank u mod P (round robin).
// A rank's positions are returned in ascending order. S is a multiple of P block (and of
// 2 P block for zig-zag).
// Not yours to call here: the library's Layout and its pair counts do this lab's work. The grader
// refuses a submission that names them (a member, written `.name`, is refused only as a member:
// your own free function may share its name).
// grader-refuses: Layout make_layout causal_pairs_of_positions causal_pairs_of_units

#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "exercises/labs/common/lab_support.hpp"

namespace ringlab::lab02 {

// TODO 1: the positions rank `rank` holds under the zig-zag layout, ascending.
std::vector<int64_t> zigzag_positions(int64_t seq, int64_t ranks, int64_t rank, int64_t block);

// TODO 2: the positions rank `rank` holds under the striped layout, ascending.
std::vector<int64_t> striped_positions(int64_t seq, int64_t ranks, int64_t rank, int64_t block);

// TODO 3: the causal work between a set of queries and a set of keys: the number of pairs
//   (q, k) with k <= q. Positions come in any order; do it without an |q| x |k| loop if you can.
int64_t causal_pairs(std::span<const int64_t> q_positions, std::span<const int64_t> k_positions);

}  // namespace ringlab::lab02
