#include "reference/exact_attention.hpp"

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
  return g;
}

bool visible(MaskKind mask, int64_t q_position, int64_t k_position) {
  return mask == MaskKind::none || k_position <= q_position;
}

// Softmax row of query (b, i, h): probabilities p[j] (0 where masked) and the LSE.
// Returns false when the query sees no key.
template <class T>
bool softmax_row(const Geometry& g, const Tensor<T>& q, const Tensor<T>& k, MaskKind mask, T scale, int64_t b,
                 int64_t i, int64_t h, std::vector<T>& p, T& lse) {
  const int64_t hk = h / (g.H / g.HKV);
  const T* qrow = &q(b, i, h, 0);
  T row_max = -std::numeric_limits<T>::infinity();
  bool any = false;
  for (int64_t j = 0; j < g.Sk; ++j) {
    if (!visible(mask, g.q_pos[i], g.k_pos[j])) {
      p[j] = -std::numeric_limits<T>::infinity();
      continue;
    }
    const T* krow = &k(b, j, hk, 0);
    T dot = 0;
    for (int64_t d = 0; d < g.D; ++d) dot += qrow[d] * krow[d];
    p[j] = dot * scale;
    row_max = std::max(row_max, p[j]);
    any = true;
  }
  if (!any) {
    std::fill(p.begin(), p.end(), T(0));
    lse = -std::numeric_limits<T>::infinity();
    return false;
  }
  T sum = 0;
  for (int64_t j = 0; j < g.Sk; ++j) {
    p[j] = std::exp(p[j] - row_max);  // exp(-inf) = 0 for masked keys
    sum += p[j];
  }
  for (int64_t j = 0; j < g.Sk; ++j) p[j] /= sum;
  lse = row_max + std::log(sum);
  return true;
}

}  // namespace

template <class T>
AttentionOutput<T> exact_attention(const Tensor<T>& q, const Tensor<T>& k, const Tensor<T>& v, MaskKind mask,
                                   std::span<const int64_t> q_pos, std::span<const int64_t> k_pos) {
  const Geometry g = geometry(q, k, v, q_pos, k_pos);
  const T scale = T(1) / std::sqrt(static_cast<T>(g.D));
  AttentionOutput<T> result{Tensor<T>(q.shape()), Tensor<T>({g.B, g.H, g.Sq})};
#pragma omp parallel
  {
    std::vector<T> p(static_cast<size_t>(g.Sk));
#pragma omp for collapse(3) schedule(dynamic, 16)
    for (int64_t b = 0; b < g.B; ++b)
      for (int64_t h = 0; h < g.H; ++h)
        for (int64_t i = 0; i < g.Sq; ++i) {
          T lse;
          const bool sees_keys = softmax_row(g, q, k, mask, scale, b, i, h, p, lse);
          result.lse(b, h, i) = lse;
          if (!sees_keys) continue;  // out stays 0
          const int64_t hk = h / (g.H / g.HKV);
          T* orow = &result.out(b, i, h, 0);
          for (int64_t j = 0; j < g.Sk; ++j) {
            if (p[j] == T(0)) continue;
            const T* vrow = &v(b, j, hk, 0);
            for (int64_t d = 0; d < g.D; ++d) orow[d] += p[j] * vrow[d];
          }
        }
  }
  return result;
}

template <class T>
AttentionGrads<T> exact_attention_backward(const Tensor<T>& q, const Tensor<T>& k, const Tensor<T>& v,
                                           const Tensor<T>& dout, MaskKind mask, std::span<const int64_t> q_pos,
                                           std::span<const int64_t> k_pos) {
  const Geometry g = geometry(q, k, v, q_pos, k_pos);
  if (dout.shape() != q.shape()) {
    throw UsageError("exact_attention_backward: dout " + shape_string(dout.shape()) + " must match q " +
                     shape_string(q.shape()));
  }
  const T scale = T(1) / std::sqrt(static_cast<T>(g.D));
  AttentionGrads<T> grads{Tensor<T>(q.shape()), Tensor<T>(k.shape()), Tensor<T>(v.shape())};
  const int64_t group = g.H / g.HKV;
  // One task per (b, kv head): it owns dk, dv of that head and dq of the query heads it serves,
  // so no two tasks write the same element.
#pragma omp parallel
  {
    std::vector<T> p(static_cast<size_t>(g.Sk)), dp(static_cast<size_t>(g.Sk));
#pragma omp for collapse(2) schedule(dynamic, 1)
    for (int64_t b = 0; b < g.B; ++b)
      for (int64_t hk = 0; hk < g.HKV; ++hk)
        for (int64_t h = hk * group; h < (hk + 1) * group; ++h)
          for (int64_t i = 0; i < g.Sq; ++i) {
            T lse;
            if (!softmax_row(g, q, k, mask, scale, b, i, h, p, lse)) continue;  // no keys: no gradient
            const T* dorow = &dout(b, i, h, 0);
            const T* qrow = &q(b, i, h, 0);
            // dP_ij = dO_i . V_j and the Jacobian's row term sum_j P_ij dP_ij.
            T row_term = 0;
            for (int64_t j = 0; j < g.Sk; ++j) {
              if (p[j] == T(0)) { dp[j] = 0; continue; }
              const T* vrow = &v(b, j, hk, 0);
              T dot = 0;
              for (int64_t d = 0; d < g.D; ++d) dot += dorow[d] * vrow[d];
              dp[j] = dot;
              row_term += p[j] * dot;
            }
            T* dqrow = &grads.dq(b, i, h, 0);
            for (int64_t j = 0; j < g.Sk; ++j) {
              if (p[j] == T(0)) continue;
              const T ds = p[j] * (dp[j] - row_term);
              const T* krow = &k(b, j, hk, 0);
              T* dkrow = &grads.dk(b, j, hk, 0);
              T* dvrow = &grads.dv(b, j, hk, 0);
              for (int64_t d = 0; d < g.D; ++d) {
                dqrow[d] += scale * ds * krow[d];
                dkrow[d] += scale * ds * qrow[d];
                dvrow[d] += p[j] * dorow[d];
              }
            }
          }
  }
  return grads;
}

AttentionGrads<double> exact_block_backward(const Tensor<double>& q, const Tensor<double>& k,
                                            const Tensor<double>& v, const Tensor<double>& dout,
                                            const Tensor<double>& lse, const Tensor<double>& delta, MaskKind mask,
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
                                                MaskKind, std::span<const int64_t>, std::span<const int64_t>);
template AttentionOutput<double> exact_attention(const Tensor<double>&, const Tensor<double>&,
                                                 const Tensor<double>&, MaskKind, std::span<const int64_t>,
                                                 std::span<const int64_t>);
template AttentionGrads<float> exact_attention_backward(const Tensor<float>&, const Tensor<float>&,
                                                        const Tensor<float>&, const Tensor<float>&, MaskKind,
                                                        std::span<const int64_t>, std::span<const int64_t>);
template AttentionGrads<double> exact_attention_backward(const Tensor<double>&, const Tensor<double>&,
                                                         const Tensor<double>&, const Tensor<double>&, MaskKind,
                                                         std::span<const int64_t>, std::span<const int64_t>);

}  // namespace ringlab
