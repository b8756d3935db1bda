// 03 — tensor cores: bf16 inputs, S = Q K^T and O += P V with mma.sync m16n8k16 (fp32
// accumulators), operands fed from shared memory by ldmatrix (x4; .trans for V). A block of
// 4 warps owns 64 query rows (16 per warp); K/V tiles of 64 keys are loaded synchronously into
// rows padded by 16 bytes, which keeps ldmatrix free of bank conflicts without a swizzle.
// P never leaves registers: the S accumulators of two n-tiles are exactly one A fragment.
#include "gpu/kernels/ladder/dense_mma.cuh"

namespace ringlab::gpu::ladder {

template <int D>
struct Tiles03 {
  static constexpr int kRows = 64, kKeys = 64, kPitch = D + 8;  // elements per padded row
  static constexpr int kSmemBytes = (kRows + 2 * kKeys) * kPitch * 2;
};

struct alignas(16) Chunk16 {
  uint32_t words[4];
};

// Rows [0, valid) of a (rows x D) bf16 tile into padded shared memory, 16 bytes per copy.
template <int D>
RINGLAB_DEVICE void load_padded(__nv_bfloat16* smem, const __nv_bfloat16* global, int64_t stride, int rows, int valid) {
  for (int c = static_cast<int>(threadIdx.x); c < rows * D / 8; c += 128) {
    const int row = c / (D / 8), chunk = c % (D / 8);
    Chunk16 value{{0, 0, 0, 0}};
    if (row < valid) value = *reinterpret_cast<const Chunk16*>(global + row * stride + chunk * 8);
    *reinterpret_cast<Chunk16*>(smem + row * Tiles03<D>::kPitch + chunk * 8) = value;
  }
}

template <int D>
RINGLAB_KERNEL void RINGLAB_LAUNCH_BOUNDS(128) kernel_03(Args p) {
  using namespace dev;
  using T = __nv_bfloat16;
  constexpr int BQ = Tiles03<D>::kRows, BK = Tiles03<D>::kKeys, LD = Tiles03<D>::kPitch;
  RINGLAB_DYNAMIC_SMEM(smem_raw);
  T* q_s = reinterpret_cast<T*>(smem_raw);
  T* k_s = q_s + BQ * LD;
  T* v_s = k_s + BK * LD;
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int g = lane / 4, t = lane % 4;
  const int q0 = static_cast<int>(blockIdx.x) * BQ;
  const int b = static_cast<int>(blockIdx.y) / p.H, h = static_cast<int>(blockIdx.y) % p.H;
  const int64_t stride = static_cast<int64_t>(p.H) * D;
  const int64_t head = (static_cast<int64_t>(b) * p.S * p.H + h) * D;  // (b, 0, h, 0)
  const T* q = static_cast<const T*>(p.q) + head;
  const T* k = static_cast<const T*>(p.k) + head;
  const T* v = static_cast<const T*>(p.v) + head;

  load_padded<D>(q_s, q + q0 * stride, stride, BQ, imin(BQ, p.S - q0));
  sync_threads();
  uint32_t qf[D / 16][4];
  RINGLAB_UNROLL
  for (int kc = 0; kc < D / 16; ++kc)
    ldmatrix_x4(qf[kc], q_s + (warp * 16 + lane % 16) * LD + kc * 16 + (lane / 16) * 8);

  const auto padded = [](int row, int col) { return row * LD + col; };  // the tiles' layout
  const int row0 = q0 + warp * 16 + g, row1 = row0 + 8;                 // this thread's two query rows
  float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.f, l1 = 0.f, o[D / 8][4];
  RINGLAB_UNROLL
  for (int nt = 0; nt < D / 8; ++nt) o[nt][0] = o[nt][1] = o[nt][2] = o[nt][3] = 0.f;
  const int end = p.causal ? imin(p.S, q0 + BQ) : p.S;  // keys the block's rows may see
  for (int k0 = 0; k0 < end; k0 += BK) {
    sync_threads();  // the previous tile is no longer read
    load_padded<D>(k_s, k + k0 * stride, stride, BK, imin(BK, p.S - k0));
    load_padded<D>(v_s, v + k0 * stride, stride, BK, imin(BK, p.S - k0));
    sync_threads();
    float s[BK / 8][4];
    scores_qk<T, D, BK>(s, qf, k_s, padded, lane);
    scale_and_mask<BK>(s, p, k0, q0, row0, row1, t);
    online_softmax(s, o, m0, m1, l0, l1);
    accumulate_pv<T, D, BK>(s, o, v_s, padded, lane);
  }
  write_rows<D>(p, o, m0, m1, l0, l1, b, h, row0, row1, t);
}

#ifdef __CUDACC__
void launch_03(const Problem& problem, const void* q, const void* k, const void* v, void* out, float* lse, void*,
               cudaStream_t stream) {
  const Args args = args_of(problem, q, k, v, out, lse);
  problem.dim == 64 ? launch_rows_of_64(kernel_03<64>, Tiles03<64>::kSmemBytes, problem, args, stream)
                    : launch_rows_of_64(kernel_03<128>, Tiles03<128>::kSmemBytes, problem, args, stream);
}
#endif

}  // namespace ringlab::gpu::ladder
