// What the emulated launchers count (emulated_launchers.cpp), for the tests that check which
// kernels a run launched: every kernel, the forward launches that finalise (fused finalize) or
// start (fused init) their rows, and finalize_accumulator's and init_accumulator's launches, the
// latter by the accumulator they clear. Atomic or guarded: gpu-nccl's ranks are threads.
#pragma once

#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>

// The mocked runtime (mock_cuda_runtime.cpp): device work on `stream`, run now or kept by the
// stream capture under way; and the graph launches since the last call.
cudaError_t ringlab_mock_enqueue(cudaStream_t stream, std::function<void()> work);
int64_t ringlab_mock_graph_launches();

namespace ringlab::gpu {

extern std::atomic<int64_t> emulated_kernel_launches;
extern std::atomic<int64_t> emulated_fused_forward_launches;
extern std::atomic<int64_t> emulated_finalize_accumulator_launches;
extern std::atomic<int64_t> emulated_init_forward_launches;
extern std::atomic<int64_t> emulated_store_dkv_launches;  // backward launches that store dk, dv
extern std::mutex emulated_init_mutex;
extern std::map<const float*, int64_t> emulated_init_accumulator_launches;

}  // namespace ringlab::gpu
