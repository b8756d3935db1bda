// Lab 04 — broken on purpose (a negative control of the grader): one hop short.
// The accumulators are passed on only P - 1 times, and each rank keeps the accumulator it holds
// after the last step - which is the block of rank r + 1, not its own. Must fail criterion p2.
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
    if (step < P - 1) {  // BUG: the last hop, home, is missing
      send_dk = comm.isend(next, kTagDk, dk.span());
      send_dv = comm.isend(next, kTagDv, dv.span());
    }
    if (step < P - 1) {
      send_k.wait();
      send_v.wait();
      k = Tensor<float>(in.k.shape(), recv_k.wait());
      v = Tensor<float>(in.v.shape(), recv_v.wait());
    }
  }
  // The extra hop: this rank's own block's accumulator, complete, from rank r - 1.
  grads.dk = dk;  // BUG: this is block rank + 1's accumulator
  grads.dv = dv;
  send_dk.wait();
  send_dv.wait();
  return grads;
}

}  // namespace ringlab::lab04
