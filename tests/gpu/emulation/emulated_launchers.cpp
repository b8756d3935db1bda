// gpu/kernels/attention_kernels.hpp implemented with the warp emulator: the same kernels
// (forward_fa2.cuh, backward_mma.cuh, the fp32 ones, elementwise.cuh) and the same grids as the
// nvcc launchers (gpu/kernels/*.cu), run on the CPU. Linked, with mock_cuda_runtime.cpp, into the
// tests that run the GPU executors without a GPU (test_executor_emulated.cpp).
#include "gpu/emulation/warp_emulator.hpp"  // first: it stands in for nvcc

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>

#include "gpu/cuda_check.hpp"
#include "gpu/kernels/attention_kernels.hpp"
#include "gpu/kernels/backward_fp32.cuh"
#include "gpu/kernels/backward_mma.cuh"
#include "gpu/kernels/elementwise.cuh"
#include "gpu/kernels/forward_fa2.cuh"
#include "gpu/kernels/forward_fp32.cuh"
#include "reference/error.hpp"
#include "tests/gpu/emulation/emulated_counts.hpp"

namespace ringlab::gpu {

// Every emulated kernel launch, counted (the warm-up test sees where they fall among the events).
std::atomic<int64_t> emulated_kernel_launches{0};

namespace {

// Runs the kernel on the emulator when the mocked runtime runs the stream's work: at once, or at
// a graph's launch when the stream is being captured (mock_cuda_runtime.cpp). The kernel keeps
// copies of its arguments: a captured launch runs after the launcher has returned.
void counted_launch(cudaStream_t stream, emu::Dim3 grid, int threads, int smem_bytes, std::function<void()> kernel) {
  RINGLAB_CUDA_CHECK(ringlab_mock_enqueue(stream, [=, kernel = std::move(kernel)] {
    ++emulated_kernel_launches;
    emu::launch(grid, threads, smem_bytes, kernel);
  }));
}

emu::Dim3 grid2(int x, int y) { return {static_cast<unsigned>(x), static_cast<unsigned>(y), 1}; }
// Grid-stride kernels are right for any grid; a few blocks keep the emulation quick.
emu::Dim3 small_grid(int64_t count) {
  return {static_cast<unsigned>(std::clamp<int64_t>(count / 4096 + 1, 1, 4)), 1, 1};
}

template <class T, int D>
void forward_fa2(const ForwardParams& p, cudaStream_t stream) {
  using Tiles = ForwardFa2Tiles<D>;
  const ForwardLaunch launch = forward_launch(p, Tiles::q_tiles(p.a));  // forward.cu's grid and order
  const LaunchGrid& grid = launch.grid;
  const ForwardParams q = launch.params;
  counted_launch(stream, {static_cast<unsigned>(grid.x), static_cast<unsigned>(grid.y), static_cast<unsigned>(grid.z)},
                 Tiles::kThreads, Tiles::kSmemBytes,
                 [q] { q.init ? forward_fa2_init_kernel<T, D>(q) : forward_fa2_kernel<T, D>(q); });
}

template <class T, int D>
void backward_mma(const BackwardParams& p, cudaStream_t stream) {
  using Tiles = BackwardMmaTiles<D>;
  counted_launch(stream, grid2(Tiles::k_tiles(p.a), p.a.batch * p.a.heads), Tiles::kThreads, Tiles::kSmemBytes,
                 [p] { backward_mma_kernel<T, D>(p); });
}

}  // namespace

// What the executor tests count to see whether the fused finalize happened
// (test_executor_emulated.cpp). Atomic: gpu-nccl's ranks are threads.
std::atomic<int64_t> emulated_fused_forward_launches{0};
std::atomic<int64_t> emulated_finalize_accumulator_launches{0};
// Likewise for the fused init: forward launches that start their rows (ForwardParams::init), and
// init_accumulator's launches by the accumulator they clear (each rank has its own: the executor
// tests count them rank by rank).
std::atomic<int64_t> emulated_init_forward_launches{0};
// Backward launches that store dk and dv (BackwardParams::store_dkv) rather than add them.
std::atomic<int64_t> emulated_store_dkv_launches{0};
std::mutex emulated_init_mutex;
std::map<const float*, int64_t> emulated_init_accumulator_launches;

std::string kernel_support(Dtype dtype, int64_t dim) {
  if (dtype == Dtype::fp32) return dim >= 1 && dim <= 128 ? "" : "fp32: D <= 128";
  return dim == 64 || dim == 128 ? "" : "tensor cores: D = 64 or 128";
}

void forward_accumulate(Dtype dtype, const ForwardParams& p, cudaStream_t stream) {
  if (p.a.q_end <= p.a.q_begin || p.a.kv_end <= p.a.kv_begin) return;
  if (const std::string why = launch_problem(dtype, p); !why.empty()) throw UsageError(why);  // as launch_by_dtype
  if (p.out != nullptr && dtype != Dtype::fp32) ++emulated_fused_forward_launches;
  if (p.init && dtype != Dtype::fp32) ++emulated_init_forward_launches;
  const bool d64 = p.a.dim == 64;
  switch (dtype) {
    case Dtype::bf16:
      return d64 ? forward_fa2<__nv_bfloat16, 64>(p, stream) : forward_fa2<__nv_bfloat16, 128>(p, stream);
    case Dtype::fp16: return d64 ? forward_fa2<__half, 64>(p, stream) : forward_fa2<__half, 128>(p, stream);
    case Dtype::fp32:
      if (p.out != nullptr) throw UsageError("fp32: no fused finalize");
      if (p.init) throw UsageError("fp32: no fused init");
      counted_launch(stream, grid2(ForwardFp32Tiles::q_tiles(p.a), p.a.batch * p.a.heads), ForwardFp32Tiles::kThreads,
                     ForwardFp32Tiles::smem_bytes(p.a.dim), [p] { forward_fp32_kernel(p); });
  }
}

void backward_accumulate(Dtype dtype, const BackwardParams& p, cudaStream_t stream) {
  if (const std::string why = store_dkv_problem(dtype == Dtype::fp32, p); !why.empty()) throw UsageError(why);
  if (p.a.q_end <= p.a.q_begin || p.a.kv_end <= p.a.kv_begin) return;
  if (const std::string why = launch_problem(dtype, p); !why.empty()) throw UsageError(why);  // as launch_by_dtype
  if (p.store_dkv) ++emulated_store_dkv_launches;
  const bool d64 = p.a.dim == 64;
  switch (dtype) {
    case Dtype::bf16:
      return d64 ? backward_mma<__nv_bfloat16, 64>(p, stream) : backward_mma<__nv_bfloat16, 128>(p, stream);
    case Dtype::fp16: return d64 ? backward_mma<__half, 64>(p, stream) : backward_mma<__half, 128>(p, stream);
    case Dtype::fp32:
      counted_launch(stream, grid2(BackwardFp32Tiles::k_tiles(p.a), p.a.batch * p.a.heads), BackwardFp32Tiles::kThreads,
                     BackwardFp32Tiles::smem_bytes(p.a.dim), [p] { backward_fp32_kernel(p); });
  }
}

void init_accumulator(float* max, float* sum, float* out, int64_t rows, int dim, cudaStream_t stream) {
  {
    const std::lock_guard<std::mutex> lock(emulated_init_mutex);
    ++emulated_init_accumulator_launches[max];
  }
  counted_launch(stream, small_grid(rows * dim), 256, 0, [=] { init_accumulator_kernel(max, sum, out, rows, dim); });
}

void finalize_accumulator(Dtype dtype, const float* max, const float* sum, const float* acc_out, int batch, int heads,
                          int q_seq, int dim, void* out, float* lse, cudaStream_t stream) {
  ++emulated_finalize_accumulator_launches;
  counted_launch(stream, small_grid(int64_t(batch) * heads * q_seq * dim), 256, 0, [=] {
    switch (dtype) {
      case Dtype::bf16:
        return finalize_kernel(max, sum, acc_out, batch, heads, q_seq, dim, static_cast<__nv_bfloat16*>(out), lse);
      case Dtype::fp16:
        return finalize_kernel(max, sum, acc_out, batch, heads, q_seq, dim, static_cast<__half*>(out), lse);
      case Dtype::fp32:
        return finalize_kernel(max, sum, acc_out, batch, heads, q_seq, dim, static_cast<float*>(out), lse);
    }
  });
}

void softmax_delta(Dtype dtype, const void* dout, const void* out, int batch, int q_seq, int heads, int dim,
                   float* delta, cudaStream_t stream) {
  counted_launch(stream, small_grid(int64_t(batch) * q_seq * heads * 32), 256, 0, [=] {
    switch (dtype) {
      case Dtype::bf16:
        return delta_kernel(static_cast<const __nv_bfloat16*>(dout), static_cast<const __nv_bfloat16*>(out), batch,
                            q_seq, heads, dim, delta);
      case Dtype::fp16:
        return delta_kernel(static_cast<const __half*>(dout), static_cast<const __half*>(out), batch, q_seq, heads, dim,
                            delta);
      case Dtype::fp32:
        return delta_kernel(static_cast<const float*>(dout), static_cast<const float*>(out), batch, q_seq, heads, dim,
                            delta);
    }
  });
}

void fill_iota(int32_t* positions, int64_t count, cudaStream_t stream) {
  counted_launch(stream, small_grid(count), 256, 0, [=] { iota_kernel(positions, count); });
}

void add_into(float* to, const float* from, int64_t count, cudaStream_t stream) {
  counted_launch(stream, small_grid(count), 256, 0, [=] { add_kernel(to, from, count); });
}

void copy_token_rows(const RowCopy& copy, cudaStream_t stream) {
  const int64_t total = int64_t(copy.batch) * copy.count * copy.head_count * copy.dim;
  counted_launch(stream, small_grid(total), 256, 0, [=] {
    copy.element_bytes == 2 ? copy_token_rows_kernel<unsigned short>(copy) : copy_token_rows_kernel<float>(copy);
  });
}

void copy_lse_rows(const RowCopy& copy, cudaStream_t stream) {
  counted_launch(stream, small_grid(int64_t(copy.batch) * copy.count * copy.head_count), 256, 0,
                 [=] { copy_lse_rows_kernel(copy); });
}

}  // namespace ringlab::gpu
