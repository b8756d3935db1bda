// Lab 07 — a block attention kernel. Your file: fill in the TODOs, then
//     ringlab grade 07-block-kernel this_file.cpp
// See README.md for the task and lab.hpp for the arguments and what the kernel may call. The same
// file runs under the CPU warp emulator and, unchanged, on a GPU.
#include "lab.hpp"

namespace ringlab::lab07 {

namespace {
constexpr int kThreads = 128;
}

// One thread per query row: blocks of kThreads rows along x, one (b, h) pair per block along y.
// Change it if your kernel splits the work differently (e.g. shared-memory tiles: smem_bytes).
LaunchShape block_attention_launch(const BlockArgs& a) {
  LaunchShape shape;
  shape.grid_x = static_cast<unsigned>((a.Sq + kThreads - 1) / kThreads);
  shape.grid_y = static_cast<unsigned>(a.B * a.H);
  shape.threads = kThreads;
  return shape;
}

RINGLAB_KERNEL void block_attention_kernel(BlockArgs a) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);  // this thread's query row
  const int b = static_cast<int>(blockIdx.y) / a.H, h = static_cast<int>(blockIdx.y) % a.H;
  if (i >= a.Sq) return;
  // TODO 1: which K/V head does query head h read? (GQA: H / HKV query heads share one)
  // TODO 2: walk the keys j = 0 .. Sk-1 with the online softmax: the score
  //         s = scale * q_i . k_j (element (b, row, head, d) of a (B, S, X, D) tensor is at
  //         ((b * S + row) * X + head) * D + d); keep a running max m, a sum l and an output
  //         o[D] (D <= 128), and rescale l and o by expf(m - m_new) when the max grows.
  //         Under a.causal, key j is visible only when a.k_pos[j] <= a.q_pos[i].
  // TODO 3: write out[b][i][h][:] = o / l and lse[b][h][i] = m + logf(l); a row that saw no key
  //         gets out 0 and lse -INFINITY (not 0 / 0).
  (void)b, (void)h;
}

}  // namespace ringlab::lab07
