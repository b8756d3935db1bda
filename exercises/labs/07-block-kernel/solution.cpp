// Lab 07 — a block attention kernel: the reference solution.
// One thread per query row (b, h, i), as ladder 01: it walks the block's keys in global memory
// with the online softmax — running max m, sum l, output o, rescaled by e^(m - m_new) whenever the
// max grows — skipping the keys its row may not see, then writes out = o / l and lse = m + log l
// (0 and -inf for a row that saw no key). Clear, not fast: README.md's stretch goal tiles K/V
// through shared memory.
#include "lab.hpp"

namespace ringlab::lab07 {

namespace {
constexpr int kThreads = 128;
}

LaunchShape block_attention_launch(const BlockArgs& a) {
  LaunchShape shape;
  shape.grid_x = static_cast<unsigned>((a.Sq + kThreads - 1) / kThreads);  // query rows
  shape.grid_y = static_cast<unsigned>(a.B * a.H);                         // (b, h) pairs
  shape.threads = kThreads;
  return shape;
}

RINGLAB_KERNEL void block_attention_kernel(BlockArgs a) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  const int b = static_cast<int>(blockIdx.y) / a.H, h = static_cast<int>(blockIdx.y) % a.H;
  if (i >= a.Sq) return;
  const int kv_head = h / (a.H / a.HKV);  // GQA: H / HKV query heads share one K/V head
  const float* q = a.q + ((static_cast<int64_t>(b) * a.Sq + i) * a.H + h) * a.D;
  const int32_t query_position = a.q_pos[i];
  float o[128];  // D <= 128
  for (int d = 0; d < a.D; ++d) o[d] = 0.f;
  float m = -INFINITY, l = 0.f;
  for (int j = 0; j < a.Sk; ++j) {
    if (a.causal && a.k_pos[j] > query_position) continue;  // the mask compares global positions
    const int64_t at = ((static_cast<int64_t>(b) * a.Sk + j) * a.HKV + kv_head) * a.D;
    const float* k = a.k + at;
    const float* v = a.v + at;
    float s = 0.f;
    for (int d = 0; d < a.D; ++d) s += q[d] * k[d];
    s *= a.scale;
    const float m_new = fmaxf(m, s);
    const float alpha = expf(m - m_new);  // e^(-inf) = 0 for the first visible key
    const float p = expf(s - m_new);
    l = l * alpha + p;
    for (int d = 0; d < a.D; ++d) o[d] = o[d] * alpha + p * v[d];
    m = m_new;
  }
  float* out = a.out + ((static_cast<int64_t>(b) * a.Sq + i) * a.H + h) * a.D;
  const float inverse = l > 0.f ? 1.f / l : 0.f;  // a row that saw no key: out 0, not 0/0
  for (int d = 0; d < a.D; ++d) out[d] = o[d] * inverse;
  a.lse[(static_cast<int64_t>(b) * a.H + h) * a.Sq + i] = l > 0.f ? m + logf(l) : -INFINITY;
}

}  // namespace ringlab::lab07
