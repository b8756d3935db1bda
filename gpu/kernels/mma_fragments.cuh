// The tile loop of a tensor-core attention forward, on mma.sync m16n8k16 fragments: what ladder
// rungs 03, 04 and 05 (ladder/forward_mma.cuh) share; the production forward (forward_fa2.cuh) uses the
// quad reductions and keeps its own loop (two row blocks per warp, the softmax in log2 units). Each
// takes the layout of its shared-memory tiles as a function, so padded rows (rung 03) and
// XOR-swizzled rows (rungs 04, 05) run the same code.
//
// A warp holds 16 query rows; lane = 4 g + t owns rows g and g + 8 ("row 0" and "row 1") and, of
// every n-tile of 8 columns, columns 2t and 2t + 1 (primitives.cuh, "Fragment layouts"):
//   s[nt] = {S(g, 2t), S(g, 2t+1), S(g+8, 2t), S(g+8, 2t+1)} of key n-tile nt      (scores)
//   o[nt] = the same four elements of output n-tile nt                              (output)
//   qf[kc] = the A fragment of the rows' dims [16 kc, 16 kc + 16)                    (queries)
// A tile layout is callable as layout(row, col) -> the element offset in the tile.
//
//   scores_qk        S = Q K^T for one key tile (fragments by ldmatrix from the K tile)
//   online_softmax   m' = max(m, rowmax S), P = exp(S - m'), l = l e^{m-m'} + rowsum P, O e^{m-m'}
//   accumulate_pv    O += P V (P re-packed from the S accumulators, V fragments by ldmatrix.trans)
//   quad_sum         a row's sum over the 4 lanes that share it
#pragma once

#include "gpu/kernels/primitives.cuh"

namespace ringlab::gpu::dev {

// A row's sum over the quad of lanes that hold its columns.
RINGLAB_DEVICE float quad_sum(float x) {
  x += shfl_xor(x, 1);
  return x + shfl_xor(x, 2);
}

RINGLAB_DEVICE float quad_max(float x) {
  x = fmaxf(x, shfl_xor(x, 1));
  return fmaxf(x, shfl_xor(x, 2));
}

// s = Q K^T for the warp's 16 rows and kKeys keys of tile `k_tile` (laid out by `layout`).
template <class T, int D, int kKeys, class Layout>
RINGLAB_DEVICE void scores_qk(float (&s)[kKeys / 8][4], const uint32_t (&qf)[D / 16][4], const T* k_tile, Layout layout,
                              int lane) {
  RINGLAB_UNROLL
  for (int nt = 0; nt < kKeys / 8; ++nt) s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.f;
  RINGLAB_UNROLL
  for (int kc = 0; kc < D / 16; ++kc) {
    RINGLAB_UNROLL
    for (int np = 0; np < kKeys / 16; ++np) {
      uint32_t kb[4];  // B fragments of key n-tiles 2np (kb0, kb1) and 2np+1 (kb2, kb3)
      ldmatrix_x4(kb, k_tile + layout(np * 16 + lane % 8 + (lane / 16) * 8, kc * 16 + ((lane / 8) % 2) * 8));
      mma_16816<T>(s[2 * np], qf[kc], kb[0], kb[1]);
      mma_16816<T>(s[2 * np + 1], qf[kc], kb[2], kb[3]);
    }
  }
}

// The online-softmax step of rows 0 and 1 for a tile of scores already scaled and masked (-inf
// where a key is not visible). m: the rows' running maxima; l: this thread's share of their sums
// (the quad adds the shares up at the end, quad_sum); o rescaled by e^{m - m'}; s becomes P.
// A row that has seen no visible key yet keeps m = -inf and contributes nothing.
template <int kScoreTiles, int kOutTiles>
RINGLAB_DEVICE void online_softmax(float (&s)[kScoreTiles][4], float (&o)[kOutTiles][4], float& m0, float& m1,
                                   float& l0, float& l1) {
  float max0 = -INFINITY, max1 = -INFINITY;
  RINGLAB_UNROLL
  for (int nt = 0; nt < kScoreTiles; ++nt) {
    max0 = fmaxf(max0, fmaxf(s[nt][0], s[nt][1]));
    max1 = fmaxf(max1, fmaxf(s[nt][2], s[nt][3]));
  }
  const float new0 = fmaxf(m0, quad_max(max0)), new1 = fmaxf(m1, quad_max(max1));
  const float shift0 = new0 == -INFINITY ? 0.f : new0;  // a row with no visible key stays empty
  const float shift1 = new1 == -INFINITY ? 0.f : new1;
  const float alpha0 = fast_exp(m0 - shift0), alpha1 = fast_exp(m1 - shift1);
  m0 = new0;
  m1 = new1;
  float sum0 = 0.f, sum1 = 0.f;
  RINGLAB_UNROLL
  for (int nt = 0; nt < kScoreTiles; ++nt) {
    s[nt][0] = fast_exp(s[nt][0] - shift0);
    s[nt][1] = fast_exp(s[nt][1] - shift0);
    s[nt][2] = fast_exp(s[nt][2] - shift1);
    s[nt][3] = fast_exp(s[nt][3] - shift1);
    sum0 += s[nt][0] + s[nt][1];
    sum1 += s[nt][2] + s[nt][3];
  }
  l0 = l0 * alpha0 + sum0;
  l1 = l1 * alpha1 + sum1;
  RINGLAB_UNROLL
  for (int nt = 0; nt < kOutTiles; ++nt) {
    o[nt][0] *= alpha0;
    o[nt][1] *= alpha0;
    o[nt][2] *= alpha1;
    o[nt][3] *= alpha1;
  }
}

// o += P V: the S accumulators of key n-tiles 2kc and 2kc+1 are exactly the A fragment of keys
// [16 kc, 16 kc + 16); V (keys x D) is k-major, so its B fragments come from ldmatrix.trans.
template <class T, int D, int kKeys, class Layout>
RINGLAB_DEVICE void accumulate_pv(const float (&p)[kKeys / 8][4], float (&o)[D / 8][4], const T* v_tile, Layout layout,
                                  int lane) {
  RINGLAB_UNROLL
  for (int kc = 0; kc < kKeys / 16; ++kc) {
    uint32_t pa[4];
    a_fragment<T>(p, kc, pa);
    RINGLAB_UNROLL
    for (int dp = 0; dp < D / 16; ++dp) {
      uint32_t vb[4];  // B fragments of output n-tiles 2dp (vb0, vb1) and 2dp+1 (vb2, vb3)
      ldmatrix_x4_trans(vb, v_tile + layout(kc * 16 + lane % 8 + ((lane / 8) % 2) * 8, dp * 16 + (lane / 16) * 8));
      mma_16816<T>(o[2 * dp], pa, vb[0], vb[1]);
      mma_16816<T>(o[2 * dp + 1], pa, vb[2], vb[3]);
    }
  }
}

// The swizzled layout of a (rows x D) tile (swizzle<D>, primitives.cuh), as a tile layout.
template <int D>
struct SwizzledRows {
  RINGLAB_DEVICE int operator()(int row, int col) const { return swizzle<D>(row, col); }
};

}  // namespace ringlab::gpu::dev
