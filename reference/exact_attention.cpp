#define EIGEN_DONT_PARALLELIZE  // parallel over (batch, head, query tile) tasks instead
#include "reference/exact_attention.hpp"

#include <Eigen/Dense>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "reference/error.hpp"

namespace ringlab {
namespace {

struct Geometry {
  int64_t B, Sq, Sk, H, HKV, D;
  std::vector<int64_t> q_pos, k_pos;
  bool keys_sorted = false;  // k_pos ascending: causal tiles can stop at their latest query
};

template <class T>
Geometry geometry(const Tensor<T>& q, const Tensor<T>& k, const Tensor<T>& v, std::span<const int64_t> q_pos,
                  std::span<const int64_t> k_pos) {
  if (q.rank() != 4 || k.rank() != 4 || v.shape() != k.shape() || k.dim(0) != q.dim(0) || k.dim(3) != q.dim(3) ||
      q.dim(2) % k.dim(2) != 0) {
    throw UsageError("exact_attention: q " + shape_string(q.shape()) + ", k " + shape_string(k.shape()) + ", v " +
                     shape_string(v.shape()) + " are not (B,Sq,H,D), (B,Sk,HKV,D), (B,Sk,HKV,D) with HKV | H");
  }
  Geometry g{q.dim(0), q.dim(1), k.dim(1), q.dim(2), k.dim(2), q.dim(3), {}, {}};
  g.q_pos = q_pos.empty() ? iota_positions(g.Sq) : std::vector<int64_t>(q_pos.begin(), q_pos.end());
  g.k_pos = k_pos.empty() ? iota_positions(g.Sk) : std::vector<int64_t>(k_pos.begin(), k_pos.end());
  if (static_cast<int64_t>(g.q_pos.size()) != g.Sq || static_cast<int64_t>(g.k_pos.size()) != g.Sk) {
    throw UsageError("exact_attention: position lists do not match the number of query/key rows");
  }
  g.keys_sorted = std::is_sorted(g.k_pos.begin(), g.k_pos.end());
  return g;
}

bool visible(const Mask& mask, int64_t q_position, int64_t k_position) {
  return mask.none() || mask.visible(q_position, k_position);
}

// The textbook formula, a tile of queries at a time (so the score rows of a tile fit in cache):
//   S = scale Q K^T, masked entries -inf;  P = softmax over each full row;  out = P V.
// Eigen does the matrix products in T; no online softmax, no running max — an independent path
// from the blockwise kernel it checks.
constexpr int64_t kTile = 64;

template <class T>
using Matrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class T>
using Rows = Eigen::Map<const Matrix<T>, 0, Eigen::OuterStride<>>;  // rows of a (B, S, heads, D) tensor
template <class T>
using MutableRows = Eigen::Map<Matrix<T>, 0, Eigen::OuterStride<>>;

// Rows [i0, i0 + n) of head h of batch b: an n x D view with stride heads * D.
template <class T>
Rows<T> rows_of(const Tensor<T>& t, int64_t b, int64_t i0, int64_t n, int64_t h) {
  return Rows<T>(&t(b, i0, h, 0), n, t.dim(3), Eigen::OuterStride<>(t.dim(2) * t.dim(3)));
}
template <class T>
MutableRows<T> rows_of(Tensor<T>& t, int64_t b, int64_t i0, int64_t n, int64_t h) {
  return MutableRows<T>(&t(b, i0, h, 0), n, t.dim(3), Eigen::OuterStride<>(t.dim(2) * t.dim(3)));
}

// How many keys queries [i0, i0 + n) can see at most: all of them, or — with keys in ascending
// position order — the prefix up to the latest key any query of the tile may see.
int64_t visible_keys(const Geometry& g, const Mask& mask, int64_t i0, int64_t n) {
  if (mask.none() || !g.keys_sorted) return g.Sk;
  int64_t latest = std::numeric_limits<int64_t>::min();
  for (int64_t i = i0; i < i0 + n; ++i) latest = std::max(latest, mask.keys_of(g.q_pos[i]).last);
  return std::upper_bound(g.k_pos.begin(), g.k_pos.end(), latest) - g.k_pos.begin();
}

// P (n x keys) and lse (n) of queries [i0, i0 + n) of (b, h) over the first `keys` keys; a query
// that sees no key gets a zero row and lse -inf.
template <class T>
void softmax_rows(const Geometry& g, const Tensor<T>& q, const Tensor<T>& k, const Mask& mask, T scale, int64_t b,
                  int64_t h, int64_t i0, int64_t n, int64_t keys, Matrix<T>& p, std::vector<T>& lse) {
  const T neg_inf = -std::numeric_limits<T>::infinity();
  const int64_t hk = h / (g.H / g.HKV);
  if (keys == 0) {  // the whole tile sees no key
    p.resize(n, 0);
    std::fill(lse.begin(), lse.begin() + n, neg_inf);
    return;
  }
  p.noalias() = scale * rows_of(q, b, i0, n, h) * rows_of(k, b, 0, keys, hk).transpose();
  if (!mask.none())
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < keys; ++j)
        if (!visible(mask, g.q_pos[i0 + i], g.k_pos[j])) p(i, j) = neg_inf;
  Eigen::Matrix<T, Eigen::Dynamic, 1> row_max = p.rowwise().maxCoeff();
  for (int64_t i = 0; i < n; ++i)
    if (row_max[i] == neg_inf) row_max[i] = 0;  // no visible key: exp(-inf - 0) = 0 below
  p = (p.array().colwise() - row_max.array()).exp();
  const Eigen::Matrix<T, Eigen::Dynamic, 1> sum = p.rowwise().sum();
  for (int64_t i = 0; i < n; ++i) {
    if (sum[i] == T(0)) {
      lse[i] = neg_inf;
      continue;
    }
    p.row(i) /= sum[i];
    lse[i] = row_max[i] + std::log(sum[i]);
  }
}

}  // namespace

template <class T>
AttentionOutput<T> exact_attention(const Tensor<T>& q, const Tensor<T>& k, const Tensor<T>& v, const Mask& mask,
                                   std::span<const int64_t> q_pos, std::span<const int64_t> k_pos) {
  const Geometry g = geometry(q, k, v, q_pos, k_pos);
  const T scale = T(1) / std::sqrt(static_cast<T>(g.D));
  AttentionOutput<T> result{Tensor<T>(q.shape()), Tensor<T>({g.B, g.H, g.Sq})};
  if (g.Sk == 0) {
    std::fill(result.lse.storage().begin(), result.lse.storage().end(), -std::numeric_limits<T>::infinity());
    return result;
  }
  const int64_t tiles = (g.Sq + kTile - 1) / kTile;
#pragma omp parallel
  {
    Matrix<T> p;
    std::vector<T> lse(kTile);
#pragma omp for collapse(3) schedule(dynamic, 1)
    for (int64_t b = 0; b < g.B; ++b)
      for (int64_t h = 0; h < g.H; ++h)
        for (int64_t tile = 0; tile < tiles; ++tile) {
          const int64_t i0 = tile * kTile, n = std::min(g.Sq, i0 + kTile) - i0;
          const int64_t keys = visible_keys(g, mask, i0, n);
          softmax_rows(g, q, k, mask, scale, b, h, i0, n, keys, p, lse);
          for (int64_t i = 0; i < n; ++i) result.lse(b, h, i0 + i) = lse[i];
          rows_of(result.out, b, i0, n, h).noalias() = p * rows_of(v, b, 0, keys, h / (g.H / g.HKV));
        }
  }
  return result;
}

template <class T>
AttentionGrads<T> exact_attention_backward(const Tensor<T>& q, const Tensor<T>& k, const Tensor<T>& v,
                                           const Tensor<T>& dout, const Mask& mask, std::span<const int64_t> q_pos,
                                           std::span<const int64_t> k_pos) {
  const Geometry g = geometry(q, k, v, q_pos, k_pos);
  if (dout.shape() != q.shape()) {
    throw UsageError("exact_attention_backward: dout " + shape_string(dout.shape()) + " must match q " +
                     shape_string(q.shape()));
  }
  const T scale = T(1) / std::sqrt(static_cast<T>(g.D));
  AttentionGrads<T> grads{Tensor<T>(q.shape()), Tensor<T>(k.shape()), Tensor<T>(v.shape())};
  if (g.Sk == 0) return grads;
  const int64_t group = g.H / g.HKV;
  const int64_t tiles = (g.Sq + kTile - 1) / kTile;
  // One task per (b, kv head): it owns dk, dv of that head and dq of the query heads it serves,
  // so no two tasks write the same element.
#pragma omp parallel
  {
    Matrix<T> p, dp;
    std::vector<T> lse(kTile);
#pragma omp for collapse(2) schedule(dynamic, 1)
    for (int64_t b = 0; b < g.B; ++b)
      for (int64_t hk = 0; hk < g.HKV; ++hk)
        for (int64_t h = hk * group; h < (hk + 1) * group; ++h)
          for (int64_t tile = 0; tile < tiles; ++tile) {
            const int64_t i0 = tile * kTile, n = std::min(g.Sq, i0 + kTile) - i0;
            const int64_t keys = visible_keys(g, mask, i0, n);
            softmax_rows(g, q, k, mask, scale, b, h, i0, n, keys, p, lse);
            const Rows<T> dO = rows_of(dout, b, i0, n, h);
            // dP = dO V^T; the softmax Jacobian: dS = P o (dP - rowsum(P o dP)).
            dp.noalias() = dO * rows_of(v, b, 0, keys, hk).transpose();
            const Eigen::Matrix<T, Eigen::Dynamic, 1> row_term = p.cwiseProduct(dp).rowwise().sum();
            dp = p.cwiseProduct(dp.colwise() - row_term);
            rows_of(grads.dq, b, i0, n, h).noalias() += scale * dp * rows_of(k, b, 0, keys, hk);
            rows_of(grads.dk, b, 0, keys, hk).noalias() += scale * dp.transpose() * rows_of(q, b, i0, n, h);
            rows_of(grads.dv, b, 0, keys, hk).noalias() += p.transpose() * dO;
          }
  }
  return grads;
}

AttentionGrads<double> exact_block_backward(const Tensor<double>& q, const Tensor<double>& k, const Tensor<double>& v,
                                            const Tensor<double>& dout, const Tensor<double>& lse,
                                            const Tensor<double>& delta, const Mask& mask,
                                            std::span<const int64_t> q_pos, std::span<const int64_t> k_pos) {
  const Geometry g = geometry(q, k, v, q_pos, k_pos);
  const double scale = 1.0 / std::sqrt(static_cast<double>(g.D));
  AttentionGrads<double> grads{Tensor<double>(q.shape()), Tensor<double>(k.shape()), Tensor<double>(v.shape())};
  const int64_t group = g.H / g.HKV;
#pragma omp parallel for collapse(2) schedule(dynamic, 1)
  for (int64_t b = 0; b < g.B; ++b)
    for (int64_t hk = 0; hk < g.HKV; ++hk)
      for (int64_t h = hk * group; h < (hk + 1) * group; ++h)
        for (int64_t i = 0; i < g.Sq; ++i) {
          const double row_lse = lse(b, h, i);
          if (row_lse == -std::numeric_limits<double>::infinity()) continue;  // the query sees no key
          const double* qrow = &q(b, i, h, 0);
          const double* dorow = &dout(b, i, h, 0);
          double* dqrow = &grads.dq(b, i, h, 0);
          for (int64_t j = 0; j < g.Sk; ++j) {
            if (!visible(mask, g.q_pos[i], g.k_pos[j])) continue;
            const double* krow = &k(b, j, hk, 0);
            const double* vrow = &v(b, j, hk, 0);
            double dot = 0, dp = 0;
            for (int64_t d = 0; d < g.D; ++d) dot += qrow[d] * krow[d], dp += dorow[d] * vrow[d];
            const double p = std::exp(dot * scale - row_lse);
            const double ds = p * (dp - delta(b, h, i));
            double* dkrow = &grads.dk(b, j, hk, 0);
            double* dvrow = &grads.dv(b, j, hk, 0);
            for (int64_t d = 0; d < g.D; ++d) {
              dqrow[d] += scale * ds * krow[d];
              dkrow[d] += scale * ds * qrow[d];
              dvrow[d] += p * dorow[d];
            }
          }
        }
  return grads;
}

template AttentionOutput<float> exact_attention(const Tensor<float>&, const Tensor<float>&, const Tensor<float>&,
                                                const Mask&, std::span<const int64_t>, std::span<const int64_t>);
template AttentionOutput<double> exact_attention(const Tensor<double>&, const Tensor<double>&, const Tensor<double>&,
                                                 const Mask&, std::span<const int64_t>, std::span<const int64_t>);
template AttentionGrads<float> exact_attention_backward(const Tensor<float>&, const Tensor<float>&,
                                                        const Tensor<float>&, const Tensor<float>&, const Mask&,
                                                        std::span<const int64_t>, std::span<const int64_t>);
template AttentionGrads<double> exact_attention_backward(const Tensor<double>&, const Tensor<double>&,
                                                         const Tensor<double>&, const Tensor<double>&, const Mask&,
                                                         std::span<const int64_t>, std::span<const int64_t>);

}  // namespace ringlab
