// Lab 08 — the window-bounded ring. Your file: fill in the TODOs, then
//     ringlab grade 08-window-ring this_file.cpp
// See README.md for the task and lab.hpp for what you may call.
#include <algorithm>
#include <limits>

#include "lab.hpp"

namespace ringlab::lab08 {

int64_t window_hops(int64_t ranks, int64_t block, int64_t window) {
  // TODO 1: the hops the window needs. The first query of a block reaches W - 1 tokens back;
  //         how many blocks of `block` tokens is that? Never more than ranks - 1; no window (0)
  //         needs them all.
  (void)ranks, (void)block, (void)window;
  lab::todo("window_hops");
}

bool visible(const WindowMask& mask, int64_t query, int64_t key) {
  // TODO 2: causal, within the window (W keys, the query's own included) and in the same document
  //         (mask.document_starts: a document boundary between key and query hides the key).
  (void)mask, (void)query, (void)key;
  lab::todo("visible");
}

AttentionOutput<float> ring_forward_window(Communicator& comm, const RankInputs& in) {
  const int P = comm.size(), rank = comm.rank();
  const int next = (rank + 1) % P, prev = (rank + P - 1) % P;
  const int64_t B = in.q.dim(0), n = in.q.dim(1), H = in.q.dim(2);
  AttentionOutput<float> acc{Tensor<float>(in.q.shape()),
                             Tensor<float>({B, H, n}, -std::numeric_limits<float>::infinity())};
  Tensor<float> k = in.k, v = in.v;
  // TODO 3: this ring goes all the way round, P - 1 hops. Stop it where the window does: how many
  //         hops (window_hops), and how many steps does that make?
  for (int step = 0; step < P; ++step) {
    comm.set_step(step);
    const int origin = (rank - step + P) % P;  // whose block k, v are
    Request recv_k, recv_v, send_k, send_v;
    if (step < P - 1) {
      recv_k = comm.irecv(prev, 0);
      recv_v = comm.irecv(prev, 1);
      send_k = comm.isend(next, 0, k.span());
      send_v = comm.isend(next, 1, v.span());
    }
    // TODO 4: each block by the general mask - block_mask(in.mask, your queries' positions, the
    //         block's positions) - instead of every pair.
    BlockMask all{in.positions[rank], in.positions[origin], {}};
    all.visible.assign(in.positions[rank].size() * in.positions[origin].size(), 1);
    (void)visible(in.mask, in.positions[rank].front(), in.positions[origin].front());
    merge_into(acc, block_attention(in.q, k, v, all));
    if (step < P - 1) {
      send_k.wait();
      send_v.wait();
      k = Tensor<float>(in.k.shape(), recv_k.wait());
      v = Tensor<float>(in.v.shape(), recv_v.wait());
    }
  }
  (void)window_hops(P, n, in.mask.window);
  return acc;
}

}  // namespace ringlab::lab08
