// Lab 04 — reference solution: the ring backward, dK/dV travelling with their K/V block.
//
// At step t rank r holds the K/V of block r - t (mod P), its own first, and rotates them exactly
// as in the forward (send to r + 1, receive from r - 1). The dK/dV accumulator of block r - t
// arrives from rank r - 1 — which held that block one step earlier — one step behind the block;
// rank r adds its queries' contribution and passes it on to r + 1. After the last step one extra
// hop brings every accumulator home: P dK/dV sends against P - 1 K/V sends.
#include "lab.hpp"

namespace ringlab::lab04 {

namespace {
constexpr int kTagK = 0, kTagV = 1, kTagDk = 2, kTagDv = 3;
}

RankGrads ring_backward(Communicator& comm, const RankInputs& in) {
  const int P = comm.size(), rank = comm.rank();
  const int next = (rank + 1) % P, prev = (rank + P - 1) % P;
  const Tensor<float> delta = softmax_delta(in.dout, in.out);
  RankGrads grads{Tensor<float>(in.q.shape()), Tensor<float>(in.k.shape()), Tensor<float>(in.v.shape())};
  Tensor<float> k = in.k, v = in.v;
  Tensor<float> dk(in.k.shape()), dv(in.v.shape());  // the accumulator of the block held now
  Request send_dk, send_dv;                          // the accumulator passed on last step
  for (int step = 0; step < P; ++step) {
    comm.set_step(step);
    const int origin = (rank - step + P) % P;
    Request recv_k, recv_v, send_k, send_v;
    if (step < P - 1) {
      recv_k = comm.irecv(prev, kTagK);
      recv_v = comm.irecv(prev, kTagV);
      send_k = comm.isend(next, kTagK, k.span());
      send_v = comm.isend(next, kTagV, v.span());
    }
    if (step > 0) {  // block `origin`'s accumulator, from the rank that held the block last step
      dk = Tensor<float>(in.k.shape(), comm.recv(prev, kTagDk));
      dv = Tensor<float>(in.v.shape(), comm.recv(prev, kTagDv));
    }
    block_backward(in.q, k, v, in.dout, in.lse, delta, in.positions[rank], in.positions[origin], in.causal, grads.dq, dk, dv);
    // Pass the accumulator on with its block: to r + 1, which holds block `origin` next step;
    // after the last step that is one extra hop, which brings it home to rank `origin`.
    send_dk.wait();
    send_dv.wait();
    send_dk = comm.isend(next, kTagDk, dk.span());
    send_dv = comm.isend(next, kTagDv, dv.span());
    if (step < P - 1) {
      send_k.wait();
      send_v.wait();
      k = Tensor<float>(in.k.shape(), recv_k.wait());
      v = Tensor<float>(in.v.shape(), recv_v.wait());
    }
  }
  // The extra hop: this rank's own block's accumulator, complete, from rank r - 1.
  grads.dk = Tensor<float>(in.k.shape(), comm.recv(prev, kTagDk));
  grads.dv = Tensor<float>(in.v.shape(), comm.recv(prev, kTagDv));
  send_dk.wait();
  send_dv.wait();
  return grads;
}

}  // namespace ringlab::lab04
