// Blockwise attention kernels. Sections:
//   [tiles]     row tiles with their position range, and the mask class of a tile pair
//   [forward]   flash_forward_accumulate: online softmax over key tiles, merged into the accumulator
//   [backward]  flash_backward_accumulate: recompute P from the saved LSE, dS, and the five GEMMs
//   [one-shot]  flash_attention / flash_attention_backward and the small helpers
#define EIGEN_DONT_PARALLELIZE  // parallelism comes from our OpenMP tasks, never from inside Eigen
#include "reference/flash_attention.hpp"

#include <omp.h>

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

namespace ringlab {
namespace {

using Matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Vector = Eigen::VectorXf;
using StridedConst = Eigen::Map<const Matrix, 0, Eigen::OuterStride<>>;
using Strided = Eigen::Map<Matrix, 0, Eigen::OuterStride<>>;

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr float kPosInf = std::numeric_limits<float>::infinity();
constexpr int64_t kQueryTile = 128;
constexpr int64_t kKeyTile = 256;

// ---- [tiles] ---------------------------------------------------------------------------------

struct Tile {
  int64_t begin, end;        // local rows
  int64_t min_pos, max_pos;  // range of their global positions
  int64_t size() const { return end - begin; }
};

std::vector<Tile> tiles_of(RowRange range, int64_t tile, std::span<const int64_t> positions) {
  std::vector<Tile> tiles;
  for (int64_t begin = range.begin; begin < range.end; begin += tile) {
    const int64_t end = std::min(range.end, begin + tile);
    const auto [lo, hi] = std::minmax_element(positions.begin() + begin, positions.begin() + end);
    tiles.push_back({begin, end, *lo, *hi});
  }
  return tiles;
}

enum class TileMask { skip, full, partial };

// Causal only: from the tiles' position bounds. A general mask (window, documents) asks the mask
// about each query row of the tile against the key tile's position range.
TileMask classify(const Mask& mask, const Tile& q, const Tile& k, std::span<const int64_t> q_pos, bool skip_masked) {
  if (mask.none()) return TileMask::full;
  if (!mask.general()) {
    if (k.min_pos > q.max_pos) return skip_masked ? TileMask::skip : TileMask::partial;  // all in the future
    if (k.max_pos <= q.min_pos) return TileMask::full;  // every key is in every query's past
    return TileMask::partial;
  }
  switch (mask.cover(q_pos.subspan(q.begin, q.size()), k.min_pos, k.max_pos)) {
    case Cover::none: return skip_masked ? TileMask::skip : TileMask::partial;
    case Cover::all: return TileMask::full;
    case Cover::some: break;
  }
  return TileMask::partial;
}

// Sets the entries of s whose key the query may not see to `masked`: -inf for scores, 0 for
// probabilities.
void apply_mask(Matrix& s, const Mask& mask, const Tile& q, const Tile& k, std::span<const int64_t> q_pos,
                std::span<const int64_t> k_pos, float masked = kNegInf) {
  for (int64_t i = 0; i < q.size(); ++i) {
    const KeyRange keys = mask.general() ? mask.keys_of(q_pos[q.begin + i])
                                         : KeyRange{std::numeric_limits<int64_t>::min(), q_pos[q.begin + i]};
    float* row = s.data() + i * s.cols();
    for (int64_t j = 0; j < k.size(); ++j)
      if (!keys.contains(k_pos[k.begin + j])) row[j] = masked;
  }
}

int thread_count(const KernelOptions& options) { return options.threads > 0 ? options.threads : omp_get_max_threads(); }

// The shapes of one accumulate call, and its softmax scale 1/sqrt(D).
struct Geometry {
  int64_t B, Sq, Sk, H, HKV, D, group;
  float scale;
};

Geometry check(const Tensor<float>& q, const Tensor<float>& k, const Tensor<float>& v, std::span<const int64_t> q_pos,
               std::span<const int64_t> k_pos, RowRange q_rows, RowRange kv_rows) {
  if (q.rank() != 4 || k.rank() != 4 || v.shape() != k.shape() || k.dim(0) != q.dim(0) || k.dim(3) != q.dim(3) ||
      q.dim(2) % k.dim(2) != 0 || static_cast<int64_t>(q_pos.size()) != q.dim(1) ||
      static_cast<int64_t>(k_pos.size()) != k.dim(1) || q_rows.begin < 0 || q_rows.end > q.dim(1) ||
      kv_rows.begin < 0 || kv_rows.end > k.dim(1)) {
    throw std::invalid_argument("flash attention: q " + shape_string(q.shape()) + " / k " + shape_string(k.shape()) +
                                " / v " + shape_string(v.shape()) + " / positions / row ranges are inconsistent");
  }
  const float scale = 1.0f / std::sqrt(static_cast<float>(q.dim(3)));
  return {q.dim(0), q.dim(1), k.dim(1), q.dim(2), k.dim(2), q.dim(3), q.dim(2) / k.dim(2), scale};
}

// The query and key tiles of one accumulate call's row ranges.
struct Tiles {
  std::vector<Tile> q, k;
};

Tiles tiles_of(RowRange q_rows, RowRange kv_rows, std::span<const int64_t> q_pos, std::span<const int64_t> k_pos) {
  return {tiles_of(q_rows, kQueryTile, q_pos), tiles_of(kv_rows, kKeyTile, k_pos)};
}

}  // namespace

// ---- [forward] -------------------------------------------------------------------------------

SoftmaxState<float> make_accumulator(int64_t batch, int64_t heads, int64_t q_rows, int64_t dim) {
  return SoftmaxState<float>::empty(batch * heads * q_rows, dim);
}

void flash_forward_accumulate(const Tensor<float>& q, const Tensor<float>& k, const Tensor<float>& v,
                              std::span<const int64_t> q_pos, std::span<const int64_t> k_pos, RowRange q_rows,
                              RowRange kv_rows, const Mask& mask, SoftmaxState<float>& acc,
                              const KernelOptions& options) {
  const Geometry g = check(q, k, v, q_pos, k_pos, q_rows, kv_rows);
  if (acc.rows != g.B * g.H * g.Sq || acc.width != g.D) {
    throw std::invalid_argument("flash_forward_accumulate: accumulator is not (B*H*Sq) x D");
  }
  if (q_rows.empty() || kv_rows.empty()) return;
  const Tiles tiles = tiles_of(q_rows, kv_rows, q_pos, k_pos);
  const int64_t n_q_tiles = static_cast<int64_t>(tiles.q.size());
  const int64_t tasks = g.B * g.H * n_q_tiles;

#pragma omp parallel num_threads(thread_count(options))
  {
    Matrix qs, s;
    Vector alpha, shift, row_max;
#pragma omp for schedule(dynamic, 1)
    for (int64_t task = 0; task < tasks; ++task) {
      const Tile& qt = tiles.q[task % n_q_tiles];
      const int64_t b = task / n_q_tiles / g.H;
      const int64_t h = task / n_q_tiles % g.H;
      const int64_t hk = h / g.group;
      const int64_t n = qt.size();
      qs = g.scale * StridedConst(&q(b, qt.begin, h, 0), n, g.D, Eigen::OuterStride<>(g.H * g.D));
      const int64_t row0 = (b * g.H + h) * g.Sq + qt.begin;
      Eigen::Map<Vector> m(acc.max.data() + row0, n);
      Eigen::Map<Vector> l(acc.sum.data() + row0, n);
      Eigen::Map<Matrix> o(acc.out.data() + row0 * g.D, n, g.D);
      alpha.resize(n);
      shift.resize(n);
      for (const Tile& kt : tiles.k) {
        const TileMask tile_mask = classify(mask, qt, kt, q_pos, options.skip_masked_tiles);
        if (tile_mask == TileMask::skip) continue;
        const StridedConst kmat(&k(b, kt.begin, hk, 0), kt.size(), g.D, Eigen::OuterStride<>(g.HKV * g.D));
        const StridedConst vmat(&v(b, kt.begin, hk, 0), kt.size(), g.D, Eigen::OuterStride<>(g.HKV * g.D));
        s.noalias() = qs * kmat.transpose();
        if (tile_mask == TileMask::partial) apply_mask(s, mask, qt, kt, q_pos, k_pos);
        row_max = s.rowwise().maxCoeff();
        for (int64_t i = 0; i < n; ++i) {
          const float m_new = std::max(m[i], row_max[i]);
          shift[i] = m_new == kNegInf ? 0.0f : m_new;  // a row with no visible key yet stays empty
          alpha[i] = std::exp(m[i] - shift[i]);
          m[i] = m_new;
        }
        s.array().colwise() -= shift.array();
        s = s.array().exp();
        l = l.cwiseProduct(alpha) + s.rowwise().sum();
        o.array().colwise() *= alpha.array();
        // A tensor-core kernel's P V takes P in the operand precision (after l has summed it).
        if (options.operands != Precision::fp32) round_floats(s.data(), s.size(), options.operands);
        o.noalias() += s * vmat;
      }
    }
  }
}

AttentionOutput<float> finalize_accumulator(const SoftmaxState<float>& acc, int64_t batch, int64_t heads,
                                            int64_t q_rows, int64_t dim, int threads) {
  AttentionOutput<float> result{Tensor<float>({batch, q_rows, heads, dim}), Tensor<float>({batch, heads, q_rows})};
  const int64_t rows = batch * heads * q_rows;
#pragma omp parallel for schedule(static) num_threads(thread_count({threads}))
  for (int64_t row = 0; row < rows; ++row) {
    const int64_t i = row % q_rows, h = row / q_rows % heads, b = row / q_rows / heads;
    if (acc.max[row] == kNegInf || acc.sum[row] == 0.0f) {
      result.lse(b, h, i) = kNegInf;  // out stays 0
      continue;
    }
    const float inv = 1.0f / acc.sum[row];
    const float* o = &acc.out[row * dim];
    float* out = &result.out(b, i, h, 0);
    for (int64_t d = 0; d < dim; ++d) out[d] = o[d] * inv;
    result.lse(b, h, i) = acc.max[row] + std::log(acc.sum[row]);
  }
  return result;
}

// ---- [backward] ------------------------------------------------------------------------------

Tensor<float> softmax_delta(const Tensor<float>& dout, const Tensor<float>& out, int threads) {
  if (dout.shape() != out.shape() || out.rank() != 4) {
    throw std::invalid_argument("softmax_delta: dout and out must both be (B, S, H, D)");
  }
  const int64_t B = out.dim(0), S = out.dim(1), H = out.dim(2), D = out.dim(3);
  Tensor<float> delta({B, H, S});
#pragma omp parallel for collapse(2) schedule(static) num_threads(thread_count({threads}))
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < S; ++i)
      for (int64_t h = 0; h < H; ++h) {
        double sum = 0;
        for (int64_t d = 0; d < D; ++d) sum += double(dout(b, i, h, d)) * double(out(b, i, h, d));
        delta(b, h, i) = static_cast<float>(sum);
      }
  return delta;
}

void flash_backward_accumulate(const Tensor<float>& q, const Tensor<float>& k, const Tensor<float>& v,
                               const Tensor<float>& dout, const Tensor<float>& lse, const Tensor<float>& delta,
                               std::span<const int64_t> q_pos, std::span<const int64_t> k_pos, RowRange q_rows,
                               RowRange kv_rows, const Mask& mask, Tensor<float>& dq, Tensor<float>& dk,
                               Tensor<float>& dv, const KernelOptions& options) {
  const Geometry g = check(q, k, v, q_pos, k_pos, q_rows, kv_rows);
  const Shape lse_shape{g.B, g.H, g.Sq};
  if (dout.shape() != q.shape() || dq.shape() != q.shape() || dk.shape() != k.shape() || dv.shape() != k.shape() ||
      lse.shape() != lse_shape || delta.shape() != lse_shape) {
    throw std::invalid_argument("flash_backward_accumulate: dout/dq must be q's shape, dk/dv k's, lse/delta (B,H,Sq)");
  }
  if (q_rows.empty() || kv_rows.empty()) return;
  const Tiles tiles = tiles_of(q_rows, kv_rows, q_pos, k_pos);
  const int64_t n_k_tiles = static_cast<int64_t>(tiles.k.size());

  // Tasks are (b, kv head, chunk of key tiles): a task owns dk, dv of its key tiles. When there are
  // fewer than 8 (b, kv head) pairs the key tiles are split into chunks, each writing dq into its
  // own partial buffer, summed afterwards in chunk order. The chunk count depends only on the
  // shapes, so the summation order — and the result — never depends on the thread count.
  const int64_t chunks = std::clamp<int64_t>((8 + g.B * g.HKV - 1) / (g.B * g.HKV), 1, n_k_tiles);
  const int64_t nq = q_rows.size();
  // The partial buffers live on in the calling thread between calls: a fresh multi-megabyte
  // buffer per call would cost a page fault per 4 KiB on first touch, about a tenth of a backward
  // call's time on a virtual machine (the simulator calls this from each rank's thread, step after
  // step). The OpenMP team reaches it through the pointer: inside the parallel region the
  // thread_local's name would mean each worker thread's own (empty) buffer.
  thread_local std::vector<float> dq_partial_storage;
  dq_partial_storage.assign(chunks > 1 ? static_cast<size_t>(chunks * g.B * g.H * nq * g.D) : 0, 0.0f);
  float* const dq_partial = dq_partial_storage.data();
  const int64_t tasks = g.B * g.HKV * chunks;

#pragma omp parallel num_threads(thread_count(options))
  {
    Matrix qs, s, ds, dq_tile, dk_acc, dv_acc;
    Vector lse_shift, delta_rows;
#pragma omp for schedule(dynamic, 1)
    for (int64_t task = 0; task < tasks; ++task) {
      const int64_t c = task % chunks;
      const int64_t b = task / chunks / g.HKV;
      const int64_t hk = task / chunks % g.HKV;
      for (int64_t kti = c * n_k_tiles / chunks; kti < (c + 1) * n_k_tiles / chunks; ++kti) {
        const Tile& kt = tiles.k[kti];
        const StridedConst kmat(&k(b, kt.begin, hk, 0), kt.size(), g.D, Eigen::OuterStride<>(g.HKV * g.D));
        const StridedConst vmat(&v(b, kt.begin, hk, 0), kt.size(), g.D, Eigen::OuterStride<>(g.HKV * g.D));
        dk_acc.setZero(kt.size(), g.D);
        dv_acc.setZero(kt.size(), g.D);
        for (int64_t h = hk * g.group; h < (hk + 1) * g.group; ++h) {
          for (const Tile& qt : tiles.q) {
            const TileMask tile_mask = classify(mask, qt, kt, q_pos, options.skip_masked_tiles);
            if (tile_mask == TileMask::skip) continue;
            const int64_t n = qt.size();
            qs = g.scale * StridedConst(&q(b, qt.begin, h, 0), n, g.D, Eigen::OuterStride<>(g.H * g.D));
            const StridedConst dmat(&dout(b, qt.begin, h, 0), n, g.D, Eigen::OuterStride<>(g.H * g.D));
            lse_shift.resize(n);
            delta_rows.resize(n);
            for (int64_t i = 0; i < n; ++i) {
              const float row_lse = lse(b, h, qt.begin + i);
              lse_shift[i] = row_lse == kNegInf ? kPosInf : row_lse;  // a query with no keys has P = 0
              delta_rows[i] = delta(b, h, qt.begin + i);
            }
            // P = exp(scale q.k - lse), the final softmax restricted to this block. The mask is
            // applied to P, as exact zeros: Eigen's vectorised exp clamps its argument, so
            // exp(-inf) would come out as about 1e-38, not 0, and a query that sees no key
            // would get a (tiny) gradient.
            s.noalias() = qs * kmat.transpose();
            s.array().colwise() -= lse_shift.array();
            s = s.array().exp();
            if (tile_mask == TileMask::partial) apply_mask(s, mask, qt, kt, q_pos, k_pos, 0.0f);
            // dS = P o (dO V^T - delta)
            ds.noalias() = dmat * vmat.transpose();
            ds.array().colwise() -= delta_rows.array();
            ds = s.cwiseProduct(ds);
            // A tensor-core kernel's gradient GEMMs take P and dS in the operand precision; dS was
            // formed from the unrounded P, as on the GPU.
            if (options.operands != Precision::fp32) {
              round_floats(s.data(), s.size(), options.operands);
              round_floats(ds.data(), ds.size(), options.operands);
            }
            dv_acc.noalias() += s.transpose() * dmat;
            dk_acc.noalias() += ds.transpose() * qs;  // qs already carries the scale
            dq_tile.noalias() = ds * kmat;
            if (chunks == 1) {
              Strided(&dq(b, qt.begin, h, 0), n, g.D, Eigen::OuterStride<>(g.H * g.D)) += g.scale * dq_tile;
            } else {
              float* base = dq_partial + (((c * g.B + b) * g.H + h) * nq + (qt.begin - q_rows.begin)) * g.D;
              Eigen::Map<Matrix>(base, n, g.D) += g.scale * dq_tile;
            }
          }
        }
        Strided(&dk(b, kt.begin, hk, 0), kt.size(), g.D, Eigen::OuterStride<>(g.HKV * g.D)) += dk_acc;
        Strided(&dv(b, kt.begin, hk, 0), kt.size(), g.D, Eigen::OuterStride<>(g.HKV * g.D)) += dv_acc;
      }
    }
  }
  if (chunks > 1) {
#pragma omp parallel for collapse(3) schedule(static) num_threads(thread_count(options))
    for (int64_t b = 0; b < g.B; ++b)
      for (int64_t h = 0; h < g.H; ++h)
        for (int64_t i = 0; i < nq; ++i) {
          float* target = &dq(b, q_rows.begin + i, h, 0);
          for (int64_t c = 0; c < chunks; ++c) {
            const float* part = dq_partial + (((c * g.B + b) * g.H + h) * nq + i) * g.D;
            for (int64_t d = 0; d < g.D; ++d) target[d] += part[d];
          }
        }
  }
}

// ---- [one-shot] ------------------------------------------------------------------------------

AttentionOutput<float> flash_attention(const Tensor<float>& q, const Tensor<float>& k, const Tensor<float>& v,
                                       const Mask& mask, std::span<const int64_t> q_pos, std::span<const int64_t> k_pos,
                                       const KernelOptions& options) {
  const std::vector<int64_t> q_default = q_pos.empty() ? iota_positions(q.dim(1)) : std::vector<int64_t>{};
  const std::vector<int64_t> k_default = k_pos.empty() ? iota_positions(k.dim(1)) : std::vector<int64_t>{};
  if (q_pos.empty()) q_pos = q_default;
  if (k_pos.empty()) k_pos = k_default;
  SoftmaxState<float> acc = make_accumulator(q.dim(0), q.dim(2), q.dim(1), q.dim(3));
  flash_forward_accumulate(q, k, v, q_pos, k_pos, {0, q.dim(1)}, {0, k.dim(1)}, mask, acc, options);
  return finalize_accumulator(acc, q.dim(0), q.dim(2), q.dim(1), q.dim(3));
}

AttentionGrads<float> flash_attention_backward(const Tensor<float>& q, const Tensor<float>& k, const Tensor<float>& v,
                                               const AttentionOutput<float>& forward, const Tensor<float>& dout,
                                               const Mask& mask, std::span<const int64_t> q_pos,
                                               std::span<const int64_t> k_pos, const KernelOptions& options) {
  const std::vector<int64_t> q_default = q_pos.empty() ? iota_positions(q.dim(1)) : std::vector<int64_t>{};
  const std::vector<int64_t> k_default = k_pos.empty() ? iota_positions(k.dim(1)) : std::vector<int64_t>{};
  if (q_pos.empty()) q_pos = q_default;
  if (k_pos.empty()) k_pos = k_default;
  AttentionGrads<float> grads{Tensor<float>(q.shape()), Tensor<float>(k.shape()), Tensor<float>(v.shape())};
  const Tensor<float> delta = softmax_delta(dout, forward.out);
  flash_backward_accumulate(q, k, v, dout, forward.lse, delta, q_pos, k_pos, {0, q.dim(1)}, {0, k.dim(1)}, mask,
                            grads.dq, grads.dk, grads.dv, options);
  return grads;
}

}  // namespace ringlab
