// Lab 07 — broken on purpose (a negative control of the grader): finalises every row as o / l and
// m + log l. A row that sees no key has l = 0 and o = 0: its out becomes 0 / 0 = NaN instead of 0.
// Must fail criterion empty-rows; passes full-s100, causal and batch (every row sees a key).
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
  for (int d = 0; d < a.D; ++d) out[d] = o[d] / l;  // BUG: 0 / 0 for a row that saw no key
  a.lse[(static_cast<int64_t>(b) * a.H + h) * a.Sq + i] = m + logf(l);
}

}  // namespace ringlab::lab07
