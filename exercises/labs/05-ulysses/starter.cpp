// Lab 05 — Ulysses. Your file: fill in the TODOs, then
//     ringlab grade 05-ulysses this_file.cpp
// See README.md for the task and lab.hpp for what you may call.
#include "lab.hpp"

namespace ringlab::lab05 {

AttentionOutput<float> ulysses_attention(Communicator& comm, const RankInputs& in) {
  const int64_t P = comm.size();
  const int64_t B = in.q.dim(0), n = in.q.dim(1), H = in.q.dim(2), D = in.q.dim(3);
  const int64_t heads = H / P, kv_heads = in.k.dim(2) / P;
  // TODO 1: all-to-all q, k and v: chunk j of your input = heads [j heads, (j+1) heads) of your n
  //         tokens; chunk i of the result = rank i's tokens for your heads. Assemble (B, S, heads, D)
  //         in global token order.
  // TODO 2: const AttentionOutput<float> mine = local_attention(q_heads, k_heads, v_heads, in.causal);
  // TODO 3: all-to-all out and lse back: chunk i = tokens [i n, (i+1) n) of your heads.
  // TODO 4: assemble out (B, n, H, D) and lse (B, H, n): chunk j holds heads [j heads, (j+1) heads).
  (void)B, (void)n, (void)D, (void)heads, (void)kv_heads;
  lab::todo("ulysses_attention");
  return {};
}

}  // namespace ringlab::lab05
