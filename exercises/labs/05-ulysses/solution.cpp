// Lab 05 — reference solution: Ulysses with two all-to-alls (three for q, k, v in; two back).
#include <algorithm>

#include "lab.hpp"

namespace ringlab::lab05 {

namespace {

// (B, n, X, D) -> the all-to-all's input: chunk j = heads [j per, (j+1) per) of every local token.
Buffer head_chunks(const Tensor<float>& x, int64_t ranks, int64_t per) {
  const int64_t B = x.dim(0), n = x.dim(1), D = x.dim(3);
  Buffer send;
  send.reserve(static_cast<size_t>(x.size()));
  for (int64_t j = 0; j < ranks; ++j)
    for (int64_t b = 0; b < B; ++b)
      for (int64_t i = 0; i < n; ++i) send.insert(send.end(), &x(b, i, j * per, 0), &x(b, i, j * per, 0) + per * D);
  return send;
}

// Sequence-sharded (B, n, X, D) -> head-sharded (B, P n, per, D): chunk i came from rank i and holds
// its tokens [i n, (i+1) n) for this rank's heads.
Tensor<float> to_heads(Communicator& comm, const Tensor<float>& x, int64_t per) {
  const int64_t P = comm.size(), B = x.dim(0), n = x.dim(1), D = x.dim(3);
  const Buffer received = comm.all_to_all(head_chunks(x, P, per));
  Tensor<float> y({B, P * n, per, D});
  size_t at = 0;
  for (int64_t i = 0; i < P; ++i)
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < n; ++t, at += static_cast<size_t>(per * D))
        std::copy_n(received.begin() + static_cast<std::ptrdiff_t>(at), per * D, &y(b, i * n + t, 0, 0));
  return y;
}

}  // namespace

AttentionOutput<float> ulysses_attention(Communicator& comm, const RankInputs& in) {
  const int64_t P = comm.size();
  const int64_t B = in.q.dim(0), n = in.q.dim(1), H = in.q.dim(2), D = in.q.dim(3);
  const int64_t heads = H / P, kv_heads = in.k.dim(2) / P;
  const AttentionOutput<float> mine = local_attention(to_heads(comm, in.q, heads), to_heads(comm, in.k, kv_heads),
                                                      to_heads(comm, in.v, kv_heads), in.causal);
  // Back: chunk i = tokens [i n, (i+1) n) of my heads, for rank i.
  Buffer out_send, lse_send;
  for (int64_t i = 0; i < P; ++i)
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t t = 0; t < n; ++t) out_send.insert(out_send.end(), &mine.out(b, i * n + t, 0, 0), &mine.out(b, i * n + t, 0, 0) + heads * D);
      for (int64_t h = 0; h < heads; ++h) lse_send.insert(lse_send.end(), &mine.lse(b, h, i * n), &mine.lse(b, h, i * n) + n);
    }
  const Buffer out_back = comm.all_to_all(out_send), lse_back = comm.all_to_all(lse_send);
  // Chunk j came from rank j: my tokens for heads [j heads, (j+1) heads).
  AttentionOutput<float> result{Tensor<float>({B, n, H, D}), Tensor<float>({B, H, n})};
  size_t at_out = 0, at_lse = 0;
  for (int64_t j = 0; j < P; ++j)
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t t = 0; t < n; ++t, at_out += static_cast<size_t>(heads * D))
        std::copy_n(out_back.begin() + static_cast<std::ptrdiff_t>(at_out), heads * D, &result.out(b, t, j * heads, 0));
      for (int64_t h = 0; h < heads; ++h, at_lse += static_cast<size_t>(n))
        std::copy_n(lse_back.begin() + static_cast<std::ptrdiff_t>(at_lse), n, &result.lse(b, j * heads + h, 0));
    }
  return result;
}

}  // namespace ringlab::lab05
