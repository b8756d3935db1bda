// Lab 08 — reference solution: the window-bounded ring.
//
// Under a causal window of W keys the first query of rank g's block reaches W - 1 tokens back,
// into ceil((W - 1) / n) blocks before its own; every block further back is masked for every
// rank. So K/V make that many hops (at most P - 1) and the loop runs one step more: the own block
// first, then one received block per hop. Each block is masked pair by pair by the general mask.
#include <algorithm>
#include <limits>

#include "lab.hpp"

namespace ringlab::lab08 {

int64_t window_hops(int64_t ranks, int64_t block, int64_t window) {
  const int64_t full = ranks - 1;
  if (window <= 0) return full;                               // no window: every block may be needed
  return std::min(full, (window - 1 + block - 1) / block);  // ceil((W - 1) / n)
}

bool visible(const WindowMask& mask, int64_t query, int64_t key) {
  if (key > query) return false;                                    // causal
  if (mask.window > 0 && query - key >= mask.window) return false;  // outside the window
  // Same document: no document starts after the key and at or before the query.
  const auto& starts = mask.document_starts;
  const auto after_key = std::upper_bound(starts.begin(), starts.end(), key);
  return after_key == starts.end() || *after_key > query;
}

AttentionOutput<float> ring_forward_window(Communicator& comm, const RankInputs& in) {
  const int P = comm.size(), rank = comm.rank();
  const int next = (rank + 1) % P, prev = (rank + P - 1) % P;
  const int64_t B = in.q.dim(0), n = in.q.dim(1), H = in.q.dim(2);
  AttentionOutput<float> acc{Tensor<float>(in.q.shape()),
                             Tensor<float>({B, H, n}, -std::numeric_limits<float>::infinity())};
  const int64_t hops = window_hops(P, n, in.mask.window);
  Tensor<float> k = in.k, v = in.v;
  for (int step = 0; step <= hops; ++step) {  // the own block, then one per hop
    comm.set_step(step);
    const int origin = (rank - step + P) % P;
    Request recv_k, recv_v, send_k, send_v;
    if (step < hops) {  // nothing is passed on after the last hop
      recv_k = comm.irecv(prev, 0);
      recv_v = comm.irecv(prev, 1);
      send_k = comm.isend(next, 0, k.span());
      send_v = comm.isend(next, 1, v.span());
    }
    merge_into(acc, block_attention(in.q, k, v, block_mask(in.mask, in.positions[rank], in.positions[origin])));
    if (step < hops) {
      send_k.wait();
      send_v.wait();
      k = Tensor<float>(in.k.shape(), recv_k.wait());
      v = Tensor<float>(in.v.shape(), recv_v.wait());
    }
  }
  return acc;
}

}  // namespace ringlab::lab08
