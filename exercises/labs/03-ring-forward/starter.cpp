// Lab 03 — the ring forward. Your file: fill in the TODOs, then
//     ringlab grade 03-ring-forward this_file.cpp
// See README.md for the task and lab.hpp for what you may call.
#include <cmath>
#include <limits>

#include "lab.hpp"

namespace ringlab::lab03 {

namespace {

constexpr float kMinusInf = -std::numeric_limits<float>::infinity();

}  // namespace

// acc <- acc (+) part for every query row (b, h, i):
//   lse = log(e^lse_a + e^lse_b),  out = out_a e^(lse_a - lse) + out_b e^(lse_b - lse),
// where a -inf lse means "no key seen yet" (or a block that shows the row no key) and must not
// produce NaN: two empty sides give an empty row.
// out: (B, n, H, D), lse: (B, H, n).
void merge_into(AttentionOutput<float>& acc, const AttentionOutput<float>& part) {
  (void)acc;
  (void)part;
  lab::todo("merge_into: the log-sum-exp merge of two partial results");  // TODO: replace with the merge
}

AttentionOutput<float> ring_forward(Communicator& comm, const RankInputs& in) {
  const int P = comm.size(), rank = comm.rank();
  const int64_t B = in.q.dim(0), n = in.q.dim(1), H = in.q.dim(2);
  // The running result: no key seen yet.
  AttentionOutput<float> acc{Tensor<float>(in.q.shape()), Tensor<float>({B, H, n}, kMinusInf)};
  Tensor<float> k = in.k, v = in.v;  // the K/V block this rank holds now: its own at step 0
  for (int step = 0; step < P; ++step) {
    comm.set_step(step);  // labels this rank's step in deadlock reports
    // TODO 1: whose block is k, v at this step? Its positions (in.positions[...]) decide the mask.
    // TODO 2: post the transfer of the next block (send to one neighbour, receive from the other)
    //         before computing, so it overlaps the compute.
    // TODO 3: merge_into(acc, block_attention(in.q, k, v, my positions, the block's positions, in.causal));
    // TODO 4: complete the transfer; the received block becomes k, v for the next step.
    (void)rank;
    merge_into(acc, block_attention(in.q, k, v, in.positions[rank], in.positions[rank], in.causal));
  }
  return acc;
}

}  // namespace ringlab::lab03
