// Launchers of the small kernels of elementwise.cuh.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>

#include "gpu/cuda_check.hpp"
#include "gpu/kernels/attention_kernels.hpp"
#include "gpu/kernels/elementwise.cuh"

namespace ringlab::gpu {
namespace {

constexpr int kThreads = 256;

unsigned blocks_for(int64_t count) {
  const int64_t blocks = (count + kThreads - 1) / kThreads;
  return static_cast<unsigned>(std::min<int64_t>(std::max<int64_t>(blocks, 1), 4096));  // grid-stride beyond
}

}  // namespace

void init_accumulator(float* max, float* sum, float* out, int64_t rows, int dim, cudaStream_t stream) {
  if (rows == 0) return;
  init_accumulator_kernel<<<blocks_for(rows * dim), kThreads, 0, stream>>>(max, sum, out, rows, dim);
  RINGLAB_CUDA_CHECK(cudaGetLastError());
}

void finalize_accumulator(Dtype dtype, const float* max, const float* sum, const float* acc_out, int batch, int heads,
                          int q_seq, int dim, void* out, float* lse, cudaStream_t stream) {
  const int64_t total = static_cast<int64_t>(batch) * q_seq * heads * dim;
  if (total == 0) return;
  const unsigned blocks = blocks_for(total);
  switch (dtype) {
    case Dtype::bf16:
      finalize_kernel<<<blocks, kThreads, 0, stream>>>(max, sum, acc_out, batch, heads, q_seq, dim,
                                                       static_cast<__nv_bfloat16*>(out), lse);
      break;
    case Dtype::fp16:
      finalize_kernel<<<blocks, kThreads, 0, stream>>>(max, sum, acc_out, batch, heads, q_seq, dim,
                                                       static_cast<__half*>(out), lse);
      break;
    case Dtype::fp32:
      finalize_kernel<<<blocks, kThreads, 0, stream>>>(max, sum, acc_out, batch, heads, q_seq, dim,
                                                       static_cast<float*>(out), lse);
      break;
  }
  RINGLAB_CUDA_CHECK(cudaGetLastError());
}

void softmax_delta(Dtype dtype, const void* dout, const void* out, int batch, int q_seq, int heads, int dim,
                   float* delta, cudaStream_t stream) {
  const int64_t rows = static_cast<int64_t>(batch) * q_seq * heads;
  if (rows == 0) return;
  const unsigned blocks = blocks_for(rows * 32);
  switch (dtype) {
    case Dtype::bf16:
      delta_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<const __nv_bfloat16*>(dout),
                                                    static_cast<const __nv_bfloat16*>(out), batch, q_seq, heads, dim,
                                                    delta);
      break;
    case Dtype::fp16:
      delta_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<const __half*>(dout), static_cast<const __half*>(out),
                                                    batch, q_seq, heads, dim, delta);
      break;
    case Dtype::fp32:
      delta_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<const float*>(dout), static_cast<const float*>(out),
                                                    batch, q_seq, heads, dim, delta);
      break;
  }
  RINGLAB_CUDA_CHECK(cudaGetLastError());
}

void fill_iota(int32_t* positions, int64_t count, cudaStream_t stream) {
  if (count == 0) return;
  iota_kernel<<<blocks_for(count), kThreads, 0, stream>>>(positions, count);
  RINGLAB_CUDA_CHECK(cudaGetLastError());
}

void add_into(float* to, const float* from, int64_t count, cudaStream_t stream) {
  if (count == 0) return;
  add_kernel<<<blocks_for(count), kThreads, 0, stream>>>(to, from, count);
  RINGLAB_CUDA_CHECK(cudaGetLastError());
}

void copy_token_rows(const RowCopy& copy, cudaStream_t stream) {
  const int64_t total = static_cast<int64_t>(copy.batch) * copy.count * copy.head_count * copy.dim;
  if (total == 0) return;
  // a thread per 16-byte word, the widest the kernel moves (narrower words: the grid strides on)
  const unsigned blocks = blocks_for((total * copy.element_bytes + 15) / 16);
  if (copy.element_bytes == 2) {
    copy_token_rows_kernel<unsigned short><<<blocks, kThreads, 0, stream>>>(copy);
  } else {
    copy_token_rows_kernel<float><<<blocks, kThreads, 0, stream>>>(copy);
  }
  RINGLAB_CUDA_CHECK(cudaGetLastError());
}

void copy_lse_rows(const RowCopy& copy, cudaStream_t stream) {
  const int64_t total = static_cast<int64_t>(copy.batch) * copy.count * copy.head_count;
  if (total == 0) return;
  copy_lse_rows_kernel<<<blocks_for(total), kThreads, 0, stream>>>(copy);
  RINGLAB_CUDA_CHECK(cudaGetLastError());
}

}  // namespace ringlab::gpu
