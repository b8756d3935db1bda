// Lab 03 — reference solution: the ring forward with double buffering.
//
// At step t rank r holds the K/V block of rank r - t (mod P), its own first. Before computing on
// it, the rank posts the transfer of the next block (send its current block to r + 1, receive
// the next one from r - 1), so the transfer overlaps the compute; then it merges the block's
// partial result into the running one in log-sum-exp form.
#include <cmath>
#include <limits>

#include "lab.hpp"

namespace ringlab::lab03 {

namespace {

constexpr float kMinusInf = -std::numeric_limits<float>::infinity();
constexpr int kTagK = 0, kTagV = 1;

}  // namespace

// acc <- acc (+) part, row by row: lse = log(e^lse_a + e^lse_b), out = out_a e^(lse_a-lse) + out_b e^(lse_b-lse).
// out: (B, n, H, D), lse: (B, H, n).
void merge_into(AttentionOutput<float>& acc, const AttentionOutput<float>& part) {
  const int64_t B = acc.out.dim(0), n = acc.out.dim(1), H = acc.out.dim(2), D = acc.out.dim(3);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < n; ++i) {
        const float lse_b = part.lse(b, h, i);
        if (lse_b == kMinusInf) continue;  // the block shows this query no key: nothing to add
        float& lse_a = acc.lse(b, h, i);
        const float m = std::max(lse_a, lse_b);
        const float lse = m + std::log(std::exp(lse_a - m) + std::exp(lse_b - m));
        const float wa = std::exp(lse_a - lse), wb = std::exp(lse_b - lse);
        for (int64_t d = 0; d < D; ++d) acc.out(b, i, h, d) = wa * acc.out(b, i, h, d) + wb * part.out(b, i, h, d);
        lse_a = lse;
      }
}

AttentionOutput<float> ring_forward(Communicator& comm, const RankInputs& in) {
  const int P = comm.size(), rank = comm.rank();
  const int next = (rank + 1) % P, prev = (rank + P - 1) % P;
  const int64_t B = in.q.dim(0), n = in.q.dim(1), H = in.q.dim(2);
  AttentionOutput<float> acc{Tensor<float>(in.q.shape()), Tensor<float>({B, H, n}, kMinusInf)};
  Tensor<float> k = in.k, v = in.v;  // the block held now: the rank's own at step 0
  for (int step = 0; step < P; ++step) {
    comm.set_step(step);
    const int origin = (rank - step + P) % P;  // whose block this is: its positions mask it
    Request recv_k, recv_v, send_k, send_v;
    if (step < P - 1) {  // the last step has nothing left to pass on
      recv_k = comm.irecv(prev, kTagK);
      recv_v = comm.irecv(prev, kTagV);
      send_k = comm.isend(next, kTagK, k.span());
      send_v = comm.isend(next, kTagV, v.span());
    }
    merge_into(acc, block_attention(in.q, k, v, in.positions[rank], in.positions[origin], in.causal));
    if (step < P - 1) {
      send_k.wait();
      send_v.wait();
      k = Tensor<float>(in.k.shape(), recv_k.wait());
      v = Tensor<float>(in.v.shape(), recv_v.wait());
    }
  }
  return acc;
}

}  // namespace ringlab::lab03
