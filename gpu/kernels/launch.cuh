// Launching the attention kernels (forward.cu, backward.cu):
//   launch_by_dtype    an empty block does nothing; an unsupported D or, for bf16 / fp16, a
//                      misaligned pointer is refused (launch_problem); then the tensor-core
//                      kernel of (bf16 | fp16) x (D = 64 | 128), or fp32
//   launch_attention   a block per (tile, batch x head), the kernel's dynamic shared memory
//                      allowed first (once per kernel and device), errors checked. The grid's y dimension holds B x H, which
//                      CUDA caps at 65535 blocks: a larger product is refused with a message
//                      naming the fix instead of failing as an invalid launch.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <map>
#include <mutex>
#include <string>
#include <type_traits>
#include <utility>

#include "gpu/cuda_check.hpp"
#include "gpu/kernels/attention_kernels.hpp"
#include "gpu/kernels/kernel_params.hpp"
#include "reference/error.hpp"

namespace ringlab::gpu {

inline constexpr long long kMaxGridY = 65535;

// sm_90: static + dynamic shared memory of one block, at most (the 228 KiB of an SM less the
// runtime's reserved kilobyte). tests/gpu/kernel_static.py checks the built kernels against it.
inline constexpr int kMaxSmemPerBlock = 227 * 1024;

// Lets `kernel` take `smem` bytes of dynamic shared memory on the current device. The attribute is
// per kernel and device and stays set, so cudaFuncSetAttribute runs once per (kernel, device) and
// again only when a launch asks for more than before (the fp32 kernels' size depends on D); the
// launch path otherwise costs a lock and a lookup.
inline void allow_dynamic_smem(const void* kernel, int smem) {
  static std::mutex mutex;
  static std::map<std::pair<const void*, int>, int> allowed;  // (kernel, device) -> bytes allowed
  int device = 0;
  RINGLAB_CUDA_CHECK(cudaGetDevice(&device));
  const std::lock_guard<std::mutex> lock(mutex);
  int& bytes = allowed.try_emplace({kernel, device}, -1).first->second;
  if (smem <= bytes) return;
  RINGLAB_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  bytes = smem;
}

// A record "ringlab-smem:<kernel>=<bytes>" of the most dynamic shared memory a launcher requests
// for a kernel, compiled into the launcher's object for tests/gpu/kernel_static.py to read (the
// cubin knows a kernel's static shared memory, never what its launches ask for). N: the name's size.
template <std::size_t N>
struct SmemRecord {
  char text[N + 32] = {};
};

template <std::size_t N>
constexpr SmemRecord<N> smem_record(const char (&kernel)[N], int bytes) {
  SmemRecord<N> record;
  std::size_t at = 0;
  for (const char c : "ringlab-smem:") {
    if (c != 0) record.text[at++] = c;
  }
  for (std::size_t i = 0; i + 1 < N; ++i) record.text[at++] = kernel[i];
  record.text[at++] = '=';
  char digits[12] = {};
  int count = 0;
  do {
    digits[count++] = static_cast<char>('0' + bytes % 10);
    bytes /= 10;
  } while (bytes > 0);
  while (count > 0) record.text[at++] = digits[--count];
  return record;  // the rest stays zero: the text's terminator
}

// The records of a tensor-core kernel `kernel`<T, D `suffix`> for T = bf16 | fp16 and D = 64 | 128,
// whose launches ask for Tiles<D>::kSmemBytes (each checked against the per-block limit), as
// variables name##Bf16D64 ... name##Fp16D128. `suffix`: further template arguments (", 256"), or "".
#define RINGLAB_SMEM_RECORDS_16BIT(name, kernel, suffix, Tiles)                                                    \
  static_assert(Tiles<64>::kSmemBytes <= kMaxSmemPerBlock && Tiles<128>::kSmemBytes <= kMaxSmemPerBlock);          \
  extern const auto name##Bf16D64 = smem_record(kernel "<__nv_bfloat16, 64" suffix ">", Tiles<64>::kSmemBytes);    \
  extern const auto name##Bf16D128 = smem_record(kernel "<__nv_bfloat16, 128" suffix ">", Tiles<128>::kSmemBytes); \
  extern const auto name##Fp16D64 = smem_record(kernel "<__half, 64" suffix ">", Tiles<64>::kSmemBytes);           \
  extern const auto name##Fp16D128 = smem_record(kernel "<__half, 128" suffix ">", Tiles<128>::kSmemBytes)

// `grid`: (tiles, B H) by default; the tensor-core forward's is forward_grid's (kernel_params.hpp).
template <class Params>
void launch_attention(void (*kernel)(Params), int tiles, int threads, int smem, const Params& p, cudaStream_t stream,
                      const LaunchGrid* grid = nullptr) {
  const long long batch_heads = static_cast<long long>(p.a.batch) * p.a.heads;
  if (batch_heads > kMaxGridY) {
    throw UsageError("B x H = " + std::to_string(batch_heads) + " (batch x heads per rank) exceeds the " +
                     std::to_string(kMaxGridY) +
                     " blocks a CUDA grid allows in y; use a smaller --batch or fewer --heads");
  }
  allow_dynamic_smem(reinterpret_cast<const void*>(kernel), smem);
  const dim3 blocks = grid != nullptr ? dim3(static_cast<unsigned>(grid->x), static_cast<unsigned>(grid->y),
                                             static_cast<unsigned>(grid->z))
                                      : dim3(static_cast<unsigned>(tiles), static_cast<unsigned>(batch_heads));
  kernel<<<blocks, threads, smem, stream>>>(p);
  RINGLAB_CUDA_CHECK(cudaGetLastError());
}

// The element type of a tensor-core launch, as a value: mma(DtypeTag<T>{}, std::integral_constant<int, D>{}).
template <class T>
struct DtypeTag {
  using type = T;
};

// launch_by_dtype's tensor-core launch of kernel<T, D> with Tiles<D> (tiles_of: q_tiles | k_tiles),
// for the Params `p` on `stream` of the enclosing launcher.
#define RINGLAB_MMA_LAUNCH(kernel, Tiles, tiles_of)                                                      \
  [&](auto type, auto dim) {                                                                             \
    using Tiles_ = Tiles<decltype(dim)::value>;                                                          \
    launch_attention(kernel<typename decltype(type)::type, decltype(dim)::value>, Tiles_::tiles_of(p.a), \
                     Tiles_::kThreads, Tiles_::kSmemBytes, p, stream);                                   \
  }

template <class Params, class Mma, class Fp32>
void launch_by_dtype(Dtype dtype, const Params& p, Mma&& mma, Fp32&& fp32) {
  if (p.a.q_end <= p.a.q_begin || p.a.kv_end <= p.a.kv_begin) return;
  if (const std::string why = launch_problem(dtype, p); !why.empty()) throw UsageError(why);
  using D64 = std::integral_constant<int, 64>;
  using D128 = std::integral_constant<int, 128>;
  switch (dtype) {
    case Dtype::bf16:
      return p.a.dim == 64 ? mma(DtypeTag<__nv_bfloat16>{}, D64{}) : mma(DtypeTag<__nv_bfloat16>{}, D128{});
    case Dtype::fp16: return p.a.dim == 64 ? mma(DtypeTag<__half>{}, D64{}) : mma(DtypeTag<__half>{}, D128{});
    case Dtype::fp32: return fp32();
  }
}

}  // namespace ringlab::gpu
