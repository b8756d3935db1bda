// Lab 04 — the ring backward. Your file: fill in the TODOs, then
//     ringlab grade 04-ring-backward this_file.cpp
// See README.md for the task and lab.hpp for what you may call.
#include "lab.hpp"

namespace ringlab::lab04 {

RankGrads ring_backward(Communicator& comm, const RankInputs& in) {
  const int P = comm.size(), rank = comm.rank();
  const Tensor<float> delta = softmax_delta(in.dout, in.out);
  RankGrads grads{Tensor<float>(in.q.shape()), Tensor<float>(in.k.shape()), Tensor<float>(in.v.shape())};
  Tensor<float> k = in.k, v = in.v;                  // the K/V block held now: the rank's own at step 0
  Tensor<float> dk(in.k.shape()), dv(in.v.shape());  // the dK/dV accumulator of that block
  for (int step = 0; step < P; ++step) {
    comm.set_step(step);
    // TODO 1: rotate K/V as in the forward (whose block is it? its positions mask it).
    // TODO 2: from step 1 on, receive the accumulator of the block you now hold - from the rank
    //         that held that block one step earlier.
    // TODO 3: block_backward(in.q, k, v, in.dout, in.lse, delta, my positions, the block's positions,
    //                        in.causal, grads.dq, dk, dv);
    // TODO 4: pass the accumulator on in the direction its block travels.
    (void)rank, (void)delta, (void)k, (void)v;
  }
  // TODO 5: one extra hop brings each accumulator home: this rank's own block's dK/dV.
  lab::todo("ring_backward");
  return grads;
}

}  // namespace ringlab::lab04
