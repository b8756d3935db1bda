// Host entry points of the production kernels — what the executors, tests and benchmarks call.
// Each launches on the given stream and returns at once (errors of the launch itself throw
// CudaError). Shapes are those of gpu/kernels/kernel_params.hpp; dtype is the element type of
// q, k, v, dout. Sections: [attention] [accumulator] [data movement]
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

#include "gpu/dtype.hpp"
#include "gpu/kernels/kernel_params.hpp"

namespace ringlab::gpu {

// ---- [attention] -------------------------------------------------------------------------------

// "" when the kernels support (dtype, D); otherwise one line saying what is supported.
// bf16 / fp16 (tensor cores): D = 64 or 128. fp32 (CUDA cores): 1 <= D <= 128.
std::string kernel_support(Dtype dtype, int64_t dim);

// "" when a launch of `p` (ForwardParams or BackwardParams) can run; otherwise the line naming
// why: an unsupported D (kernel_support) or, for bf16 / fp16, a pointer the tensor-core kernels'
// vector accesses cannot use (misaligned_pointer). What every launcher checks first.
template <class Params>
std::string launch_problem(Dtype dtype, const Params& p) {
  if (std::string why = kernel_support(dtype, p.a.dim); !why.empty()) return why;
  return dtype == Dtype::fp32 ? "" : misaligned_pointer(p);
}

// Forward of one block merged into the accumulator (online softmax, in place). With params.out and
// params.lse set, the rows' last step: out and lse written for rows [q_begin, q_end) instead of the
// state (kernel_params.hpp); bf16 / fp16 only, fp32 refuses it (finalize_accumulator instead).
void forward_accumulate(Dtype dtype, const ForwardParams& params, cudaStream_t stream);
// Backward of one block added into dq, dk, dv.
void backward_accumulate(Dtype dtype, const BackwardParams& params, cudaStream_t stream);

// ---- [accumulator] -----------------------------------------------------------------------------

// rows accumulator rows (B*H*Sq) of width dim: m = -inf, l = 0, o = 0 (the merge's identity).
void init_accumulator(float* max, float* sum, float* out, int64_t rows, int dim, cudaStream_t stream);
// out (B, Sq, H, D) = o / l, lse (B, H, Sq) = m + log l; out 0 and lse -inf where no key was seen.
// out is stored in dtype (bf16 / fp16 rounded to nearest even; the executors pass the input dtype),
// lse in fp32.
void finalize_accumulator(Dtype dtype, const float* max, const float* sum, const float* acc_out, int batch, int heads,
                          int q_seq, int dim, void* out, float* lse, cudaStream_t stream);
// delta (B, H, Sq) = rowsum(dout o out), fp32; dout and out (B, Sq, H, D) in dtype.
void softmax_delta(Dtype dtype, const void* dout, const void* out, int batch, int q_seq, int heads, int dim,
                   float* delta, cudaStream_t stream);

// ---- [data movement] ---------------------------------------------------------------------------

// positions[i] = i for i < count.
void fill_iota(int32_t* positions, int64_t count, cudaStream_t stream);
// to[i] += from[i], fp32.
void add_into(float* to, const float* from, int64_t count, cudaStream_t stream);

// Token rows with a slice of heads, between two (B, rows, heads, D) tensors — the all-to-alls:
//   dst[b, dst_index[i], dst_head0 + h, :] = src[b, src_index[i], src_head0 + h, :]
// for b < batch, i < count, h < head_count; a null index list means row i.
struct RowCopy {
  const void* src = nullptr;
  int src_rows = 0, src_heads = 0, src_head0 = 0;
  const int32_t* src_index = nullptr;
  void* dst = nullptr;
  int dst_rows = 0, dst_heads = 0, dst_head0 = 0;
  const int32_t* dst_index = nullptr;
  int count = 0, head_count = 0, batch = 1, dim = 1;
  int element_bytes = 4;  // 2 or 4
};
void copy_token_rows(const RowCopy& copy, cudaStream_t stream);
// The same on (B, heads, rows) tensors (lse, fp32; dim is ignored):
//   dst[b, dst_head0 + h, dst_index[i]] = src[b, src_head0 + h, src_index[i]]
void copy_lse_rows(const RowCopy& copy, cudaStream_t stream);

}  // namespace ringlab::gpu
