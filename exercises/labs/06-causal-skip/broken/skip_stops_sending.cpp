// Lab 06 — broken on purpose (a negative control of the grader): skipping the send too.
// A rank that skips a block also skips passing it on (`continue` before the exchange), so its
// neighbour waits forever for a block it does need: a missing send. Must fail criterion
// contiguous-p3 with a deadlock report.
#include <limits>

#include "lab.hpp"

namespace ringlab::lab06 {

BlockWork classify_block(std::span<const int64_t> q_pos, std::span<const int64_t> k_pos) {
  if (q_pos.empty() || k_pos.empty() || k_pos.front() > q_pos.back()) return BlockWork::skip;  // every key later
  if (k_pos.back() <= q_pos.front()) return BlockWork::full;  // every key at or before every query
  return BlockWork::masked;
}

AttentionOutput<float> ring_forward_skip(Communicator& comm, const RankInputs& in) {
  const int P = comm.size(), rank = comm.rank();
  const int next = (rank + 1) % P, prev = (rank + P - 1) % P;
  const int64_t B = in.q.dim(0), n = in.q.dim(1), H = in.q.dim(2);
  AttentionOutput<float> acc{Tensor<float>(in.q.shape()),
                             Tensor<float>({B, H, n}, -std::numeric_limits<float>::infinity())};
  Tensor<float> k = in.k, v = in.v;
  for (int step = 0; step < P; ++step) {
    comm.set_step(step);
    const int origin = (rank - step + P) % P;
    if (classify_block(in.positions[rank], in.positions[origin]) == BlockWork::skip) continue;  // BUG: the block must still travel
    Request recv_k, recv_v, send_k, send_v;
    if (step < P - 1) {  // pass the block on whether or not this rank needs it
      recv_k = comm.irecv(prev, 0);
      recv_v = comm.irecv(prev, 1);
      send_k = comm.isend(next, 0, k.span());
      send_v = comm.isend(next, 1, v.span());
    }
    const auto& q_pos = in.positions[rank];
    const auto& k_pos = in.positions[origin];
    const BlockWork work = classify_block(q_pos, k_pos);
    if (work != BlockWork::skip) merge_into(acc, block_attention(in.q, k, v, q_pos, k_pos, work == BlockWork::masked));
    if (step < P - 1) {
      send_k.wait();
      send_v.wait();
      k = Tensor<float>(in.k.shape(), recv_k.wait());
      v = Tensor<float>(in.v.shape(), recv_v.wait());
    }
  }
  return acc;
}

}  // namespace ringlab::lab06
