// A stand-in for the CUDA runtime library (the few functions ringlab's host code calls), so that
// the GPU executors run on a machine without a GPU, their kernels emulated
// (emulated_launchers.cpp). Everything executes synchronously, at the moment it is enqueued: the
// executors' host scheduling order is then one valid serialisation of their event graph, and a
// wrong slot, offset, copy or merge shows up as wrong numbers. What it cannot show: a missing
// event dependency (the real device runs streams concurrently) — that needs the real GPU tests.
//
// "Device" memory is host memory; events carry a counter as their time (0.001 ms per tick).
#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdlib>
#include <cstring>

struct CUevent_st {
  uint64_t stamp = 0;
  bool timing = true;
};

namespace ringlab::gpu {
extern std::atomic<int64_t> emulated_kernel_launches;  // emulated_launchers.cpp
}
struct CUstream_st {
  int unused = 0;
};

namespace {
std::atomic<uint64_t> g_clock{0};
std::atomic<int> g_devices{1};
std::atomic<int64_t> g_launches_at_first_timing{-1};
std::atomic<int64_t> g_records[2]{{0}, {0}};  // cudaEventRecord calls: [0] untimed events, [1] timing events
}  // namespace

// cudaEventRecord calls on timing events (timing) or untimed ones since the last call that asked
// for the same kind, then starts over: the host's event traffic per run.
int64_t ringlab_mock_event_records(bool timing) { return g_records[timing ? 1 : 0].exchange(0); }

// Kernel launches made before the first timing event recorded since the last call (-1: none yet),
// then starts over: where a warm-up's launches fall against a measured run's events.
int64_t ringlab_mock_launches_before_first_timing_event() { return g_launches_at_first_timing.exchange(-1); }

// How many devices the mock reports (the gpu-nccl tests run one rank thread per "device").
void ringlab_mock_set_device_count(int count) { g_devices = count; }

extern "C" {

cudaError_t CUDARTAPI cudaMalloc(void** pointer, size_t size) {
  *pointer = std::aligned_alloc(256, (size + 255) / 256 * 256);
  return *pointer ? cudaSuccess : cudaErrorMemoryAllocation;
}
cudaError_t CUDARTAPI cudaFree(void* pointer) {
  std::free(pointer);
  return cudaSuccess;
}
cudaError_t CUDARTAPI cudaMemcpy(void* dst, const void* src, size_t count, enum cudaMemcpyKind) {
  std::memmove(dst, src, count);
  return cudaSuccess;
}
cudaError_t CUDARTAPI cudaMemcpyAsync(void* dst, const void* src, size_t count, enum cudaMemcpyKind, cudaStream_t) {
  std::memmove(dst, src, count);
  ++g_clock;
  return cudaSuccess;
}
cudaError_t CUDARTAPI cudaMemset(void* pointer, int value, size_t count) {
  std::memset(pointer, value, count);
  return cudaSuccess;
}
cudaError_t CUDARTAPI cudaMemsetAsync(void* pointer, int value, size_t count, cudaStream_t) {
  std::memset(pointer, value, count);
  return cudaSuccess;
}
cudaError_t CUDARTAPI cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int) {
  *stream = new CUstream_st;
  return cudaSuccess;
}
cudaError_t CUDARTAPI cudaStreamDestroy(cudaStream_t stream) {
  delete stream;
  return cudaSuccess;
}
cudaError_t CUDARTAPI cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }
cudaError_t CUDARTAPI cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int flags) {
  *event = new CUevent_st;
  (*event)->timing = (flags & cudaEventDisableTiming) == 0;
  return cudaSuccess;
}
cudaError_t CUDARTAPI cudaEventDestroy(cudaEvent_t event) {
  delete event;
  return cudaSuccess;
}
cudaError_t CUDARTAPI cudaEventRecord(cudaEvent_t event, cudaStream_t) {
  event->stamp = ++g_clock;
  ++g_records[event->timing ? 1 : 0];
  int64_t none = -1;
  if (event->timing) g_launches_at_first_timing.compare_exchange_strong(none, ringlab::gpu::emulated_kernel_launches);
  return cudaSuccess;
}
cudaError_t CUDARTAPI cudaStreamWaitEvent(cudaStream_t, cudaEvent_t, unsigned int) { return cudaSuccess; }
cudaError_t CUDARTAPI cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  *ms = 0.001f * static_cast<float>(static_cast<int64_t>(end->stamp) - static_cast<int64_t>(start->stamp));
  return cudaSuccess;
}
cudaError_t CUDARTAPI cudaEventQuery(cudaEvent_t) { return cudaSuccess; }
cudaError_t CUDARTAPI cudaDeviceSynchronize(void) { return cudaSuccess; }
cudaError_t CUDARTAPI cudaGetDeviceCount(int* count) {
  *count = g_devices;
  return cudaSuccess;
}
cudaError_t CUDARTAPI cudaGetDeviceProperties(struct cudaDeviceProp* prop, int) {
  std::memset(prop, 0, sizeof *prop);
  std::strcpy(prop->name, "warp emulator (CPU)");
  prop->major = 9;
  prop->multiProcessorCount = 1;
  return cudaSuccess;
}
const char* CUDARTAPI cudaGetErrorName(cudaError_t) { return "cudaErrorMock"; }
const char* CUDARTAPI cudaGetErrorString(cudaError_t) { return "error in the mock CUDA runtime"; }
cudaError_t CUDARTAPI cudaGetLastError(void) { return cudaSuccess; }
cudaError_t CUDARTAPI cudaSetDevice(int) { return cudaSuccess; }
cudaError_t CUDARTAPI cudaRuntimeGetVersion(int* version) {
  *version = 0;
  return cudaSuccess;
}
cudaError_t CUDARTAPI cudaDriverGetVersion(int* version) {
  *version = 0;
  return cudaSuccess;
}

}  // extern "C"
