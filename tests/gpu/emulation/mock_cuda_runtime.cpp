// A stand-in for the CUDA runtime library (the few functions ringlab's host code calls), so that
// the GPU executors run on a machine without a GPU, their kernels emulated
// (emulated_launchers.cpp). Everything executes synchronously, at the moment it is enqueued: the
// executors' host scheduling order is then one valid serialisation of their event graph, and a
// wrong slot, offset, copy or merge shows up as wrong numbers. What it cannot show: a missing
// event dependency (the real device runs streams concurrently) — that needs the real GPU tests.
//
// "Device" memory is host memory; events carry a counter as their time (0.001 ms per tick).
//
// Stream capture (CUDA graphs): while a capture is under way, the work enqueued on a capturing
// stream is kept, not run, and a graph launch runs it in the order it was enqueued (again one
// valid serialisation). The mock keeps CUDA's rules for the one capture mode ringlab uses
// (thread-local) and is stricter where CUDA would let a mistake through silently:
//   - a stream joins the capture by waiting on an event recorded in it; work on a stream that has
//     not joined fails (on a device it would run at once, ahead of the graph);
//   - a capturing stream that waits on an event recorded outside the capture fails;
//   - a call that could synchronise (blocking copies and sets, allocation, synchronisation,
//     queries, elapsed times) fails and invalidates the capture;
//   - ending the capture fails unless every stream that joined has been joined back: the origin
//     waited on an event recorded on it after its last work (CUDA also accepts a chain through
//     other streams; ringlab's executor joins each stream directly);
//   - events recorded in a capture become the graph's dependencies, not its nodes: a launch
//     records none of them.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <set>
#include <utility>
#include <vector>

struct CUstream_st {
  bool capturing = false;   // joined the capture under way
  int64_t work = 0;         // work enqueued on it in this capture
  int64_t joined_back = 0;  // of which the origin has waited for this much
};

struct CUevent_st {
  uint64_t stamp = 0;
  bool timing = true;
  uint64_t capture = 0;  // the capture it was recorded in (0: none)
  CUstream_st* stream = nullptr;
  int64_t work = 0;  // its stream's work when recorded in a capture
};

struct CUgraph_st {
  std::vector<std::function<void()>> nodes;
};
struct CUgraphExec_st {
  std::vector<std::function<void()>> nodes;
};

namespace ringlab::gpu {
extern std::atomic<int64_t> emulated_kernel_launches;  // emulated_launchers.cpp
}

namespace {
std::atomic<uint64_t> g_clock{0};
std::atomic<int> g_devices{1};
std::atomic<int64_t> g_launches_at_first_timing{-1};
std::atomic<int64_t> g_records[2]{{0}, {0}};  // cudaEventRecord calls: [0] untimed events, [1] timing events
std::atomic<int64_t> g_graph_launches{0};

// The capture under way (one at a time: ringlab captures from one thread). g_capturing is the
// fast path's flag; the rest is read and written under the mutex.
std::atomic<bool> g_capturing{false};
std::mutex g_capture_mutex;
uint64_t g_capture_id = 0;
CUstream_st* g_origin = nullptr;
std::set<CUstream_st*> g_joined;
std::vector<std::function<void()>> g_nodes;
bool g_invalidated = false;

// Under the capture's mutex: `stream` has not joined the capture under way, so what it is given
// fails, and so does the capture.
bool outside_capture(cudaStream_t stream) {
  if (stream != nullptr && stream->capturing) return false;
  g_invalidated = true;
  return true;
}

// A call that could synchronise, made while a capture is under way.
bool forbidden_during_capture() {
  if (!g_capturing) return false;
  const std::lock_guard<std::mutex> lock(g_capture_mutex);
  g_invalidated = true;
  return true;
}

}  // namespace

// cudaEventRecord calls on timing events (timing) or untimed ones since the last call that asked
// for the same kind, then starts over: the host's event traffic per run.
int64_t ringlab_mock_event_records(bool timing) { return g_records[timing ? 1 : 0].exchange(0); }

// Kernel launches made before the first timing event recorded since the last call (-1: none yet),
// then starts over: where a warm-up's launches fall against a measured run's events.
int64_t ringlab_mock_launches_before_first_timing_event() { return g_launches_at_first_timing.exchange(-1); }

// How many devices the mock reports (the gpu-nccl tests run one rank thread per "device").
void ringlab_mock_set_device_count(int count) { g_devices = count; }

// Graph launches since the last call, then starts over.
int64_t ringlab_mock_graph_launches() { return g_graph_launches.exchange(0); }

// Device work on `stream` (a copy, a set, an emulated kernel): run now, or kept by the capture
// under way when the stream has joined it; refused on a stream outside it during a capture.
cudaError_t ringlab_mock_enqueue(cudaStream_t stream, std::function<void()> work) {
  if (g_capturing) {
    const std::lock_guard<std::mutex> lock(g_capture_mutex);
    if (outside_capture(stream)) return cudaErrorStreamCaptureIsolation;
    ++stream->work;
    g_nodes.push_back(std::move(work));
    return cudaSuccess;
  }
  work();
  return cudaSuccess;
}

extern "C" {

cudaError_t CUDARTAPI cudaMalloc(void** pointer, size_t size) {
  if (forbidden_during_capture()) return cudaErrorStreamCaptureUnsupported;
  *pointer = std::aligned_alloc(256, (size + 255) / 256 * 256);
  return *pointer ? cudaSuccess : cudaErrorMemoryAllocation;
}
cudaError_t CUDARTAPI cudaFree(void* pointer) {
  if (forbidden_during_capture()) return cudaErrorStreamCaptureUnsupported;
  std::free(pointer);
  return cudaSuccess;
}
cudaError_t CUDARTAPI cudaMemcpy(void* dst, const void* src, size_t count, enum cudaMemcpyKind) {
  if (forbidden_during_capture()) return cudaErrorStreamCaptureUnsupported;
  std::memmove(dst, src, count);
  return cudaSuccess;
}
cudaError_t CUDARTAPI cudaMemcpyAsync(void* dst, const void* src, size_t count, enum cudaMemcpyKind,
                                      cudaStream_t stream) {
  return ringlab_mock_enqueue(stream, [=] {
    std::memmove(dst, src, count);
    ++g_clock;
  });
}
cudaError_t CUDARTAPI cudaMemset(void* pointer, int value, size_t count) {
  if (forbidden_during_capture()) return cudaErrorStreamCaptureUnsupported;
  std::memset(pointer, value, count);
  return cudaSuccess;
}
cudaError_t CUDARTAPI cudaMemsetAsync(void* pointer, int value, size_t count, cudaStream_t stream) {
  return ringlab_mock_enqueue(stream, [=] { std::memset(pointer, value, count); });
}
cudaError_t CUDARTAPI cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int) {
  *stream = new CUstream_st;
  return cudaSuccess;
}
cudaError_t CUDARTAPI cudaStreamDestroy(cudaStream_t stream) {
  delete stream;
  return cudaSuccess;
}
cudaError_t CUDARTAPI cudaStreamSynchronize(cudaStream_t) {
  return forbidden_during_capture() ? cudaErrorStreamCaptureUnsupported : cudaSuccess;
}
cudaError_t CUDARTAPI cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int flags) {
  *event = new CUevent_st;
  (*event)->timing = (flags & cudaEventDisableTiming) == 0;
  return cudaSuccess;
}
cudaError_t CUDARTAPI cudaEventDestroy(cudaEvent_t event) {
  delete event;
  return cudaSuccess;
}
cudaError_t CUDARTAPI cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  if (g_capturing) {  // a dependency of the graph: nothing to run, nothing to count
    const std::lock_guard<std::mutex> lock(g_capture_mutex);
    if (outside_capture(stream)) return cudaErrorStreamCaptureIsolation;
    event->capture = g_capture_id, event->stream = stream, event->work = stream->work;
    return cudaSuccess;
  }
  event->capture = 0;
  event->stamp = ++g_clock;
  ++g_records[event->timing ? 1 : 0];
  int64_t none = -1;
  if (event->timing) g_launches_at_first_timing.compare_exchange_strong(none, ringlab::gpu::emulated_kernel_launches);
  return cudaSuccess;
}
cudaError_t CUDARTAPI cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int) {
  if (!g_capturing) return cudaSuccess;
  const std::lock_guard<std::mutex> lock(g_capture_mutex);
  const bool captured = event->capture == g_capture_id;
  if (stream == nullptr || (stream->capturing && !captured)) {
    g_invalidated = true;
    return cudaErrorStreamCaptureIsolation;
  }
  if (!captured) return cudaSuccess;  // a stream outside the capture waiting on a stream outside it
  if (!stream->capturing) stream->capturing = true, g_joined.insert(stream);  // joins: a fork
  if (stream == g_origin && event->stream != g_origin) {                      // a join back
    event->stream->joined_back = std::max(event->stream->joined_back, event->work);
  }
  return cudaSuccess;
}
cudaError_t CUDARTAPI cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  if (forbidden_during_capture()) return cudaErrorStreamCaptureUnsupported;
  if (start->capture != 0 || end->capture != 0) return cudaErrorInvalidResourceHandle;  // recorded in a capture
  *ms = 0.001f * static_cast<float>(static_cast<int64_t>(end->stamp) - static_cast<int64_t>(start->stamp));
  return cudaSuccess;
}
cudaError_t CUDARTAPI cudaEventQuery(cudaEvent_t) {
  return forbidden_during_capture() ? cudaErrorStreamCaptureUnsupported : cudaSuccess;
}
cudaError_t CUDARTAPI cudaDeviceSynchronize(void) {
  return forbidden_during_capture() ? cudaErrorStreamCaptureUnsupported : cudaSuccess;
}
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
const char* CUDARTAPI cudaGetErrorName(cudaError_t error) {
  switch (error) {
    case cudaErrorStreamCaptureUnsupported: return "cudaErrorStreamCaptureUnsupported";
    case cudaErrorStreamCaptureInvalidated: return "cudaErrorStreamCaptureInvalidated";
    case cudaErrorStreamCaptureUnjoined: return "cudaErrorStreamCaptureUnjoined";
    case cudaErrorStreamCaptureIsolation: return "cudaErrorStreamCaptureIsolation";
    case cudaErrorIllegalState: return "cudaErrorIllegalState";
    case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
    default: return "cudaErrorMock";
  }
}
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

// ---- stream capture and graphs ----

cudaError_t CUDARTAPI cudaStreamBeginCapture(cudaStream_t stream, enum cudaStreamCaptureMode mode) {
  const std::lock_guard<std::mutex> lock(g_capture_mutex);
  if (g_capturing || stream == nullptr || mode != cudaStreamCaptureModeThreadLocal) return cudaErrorIllegalState;
  ++g_capture_id;
  g_origin = stream;
  g_joined = {stream};
  g_nodes.clear();
  g_invalidated = false;
  stream->capturing = true, stream->work = 0, stream->joined_back = 0;
  g_capturing = true;
  return cudaSuccess;
}

cudaError_t CUDARTAPI cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph) {
  const std::lock_guard<std::mutex> lock(g_capture_mutex);
  *graph = nullptr;
  if (!g_capturing || stream != g_origin) return cudaErrorIllegalState;
  bool unjoined = false;
  for (CUstream_st* joined : g_joined) {
    if (joined != g_origin && joined->joined_back < joined->work) unjoined = true;
    joined->capturing = false, joined->work = 0, joined->joined_back = 0;
  }
  g_capturing = false;
  g_joined.clear();
  g_origin = nullptr;
  if (g_invalidated) return cudaErrorStreamCaptureInvalidated;
  if (unjoined) return cudaErrorStreamCaptureUnjoined;
  *graph = new CUgraph_st{std::move(g_nodes)};
  g_nodes.clear();
  return cudaSuccess;
}

cudaError_t CUDARTAPI cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long) {
  *exec = new CUgraphExec_st{graph->nodes};
  return cudaSuccess;
}
cudaError_t CUDARTAPI cudaGraphUpload(cudaGraphExec_t, cudaStream_t) { return cudaSuccess; }
cudaError_t CUDARTAPI cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t) {
  if (g_capturing) return cudaErrorIllegalState;  // ringlab never launches a graph inside a capture
  ++g_graph_launches;
  for (const std::function<void()>& node : exec->nodes) node();
  return cudaSuccess;
}
cudaError_t CUDARTAPI cudaGraphExecDestroy(cudaGraphExec_t exec) {
  delete exec;
  return cudaSuccess;
}
cudaError_t CUDARTAPI cudaGraphDestroy(cudaGraph_t graph) {
  delete graph;
  return cudaSuccess;
}

}  // extern "C"
