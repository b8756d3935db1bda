// The CUDA device, owned resources (memory, streams, events) as move-only RAII handles, and the
// one question every GPU test and command asks first: is there a device at all?
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "gpu/cuda_check.hpp"

namespace ringlab::gpu {

// Number of usable CUDA devices; 0 when the driver, the runtime or the hardware is missing (the
// reason, e.g. "cudaGetDeviceCount: no CUDA-capable device is detected", goes to *why).
int device_count(std::string* why = nullptr);
inline bool device_available(std::string* why = nullptr) { return device_count(why) > 0; }
// "NVIDIA H100 80GB HBM3 (sm_90, 132 SMs, 79.1 GiB)"
std::string device_description(int device);

// ---- hardware queues ---------------------------------------------------------------------------
// The host reaches a device through a few hardware work queues per context: as many as
// CUDA_DEVICE_MAX_CONNECTIONS says when the context is created, 8 when it is unset, 32 at most.
// Streams beyond that many share a queue (the driver hands the queues out in turn), and a queue
// takes its work in the order it was enqueued: a stream that waits for an event holds up the other
// streams on its queue, though they do not depend on it (a false dependency). gpu-streams uses
// two streams per virtual rank, so past 4 ranks the default would make ranks wait on each other.

inline constexpr int kDefaultHardwareQueues = 8;
inline constexpr int kMostHardwareQueues = 32;
inline constexpr const char* kHardwareQueuesVariable = "CUDA_DEVICE_MAX_CONNECTIONS";

// Asks for the most hardware queues (sets the variable to 32) unless the environment already says
// how many. Only a context created after the call gets them: the commands and the benchmarks call
// it first thing in main, before any CUDA call.
void request_hardware_queues();
// The hardware queues a context created now gets: the variable's value, 8 when it is unset, -1
// when it is not a whole number from 1 to 32.
int hardware_queues();
// "" when `streams` streams each get a queue of their own; else what is shared, as a clause for a
// label or a warning: "16 streams share 8 hardware queues, CUDA_DEVICE_MAX_CONNECTIONS=8".
std::string queue_sharing(int64_t streams);

// Device memory, freed on destruction. Not zeroed unless asked.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes);
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  ~DeviceBuffer();

  void* get() const { return data_; }
  template <class T>
  T* as() const {
    return static_cast<T*>(data_);
  }
  size_t bytes() const { return bytes_; }
  bool empty() const { return data_ == nullptr; }

  void upload(const void* host, size_t bytes, size_t offset = 0);
  void download(void* host, size_t bytes, size_t offset = 0) const;
  void zero_async(cudaStream_t stream);

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

class Stream {
 public:
  Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  Stream(Stream&& other) noexcept : stream_(other.stream_) { other.stream_ = nullptr; }
  ~Stream();
  cudaStream_t get() const { return stream_; }
  void synchronize() const;

 private:
  cudaStream_t stream_ = nullptr;
};

class Event {
 public:
  explicit Event(bool timing = false);
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  Event(Event&& other) noexcept : event_(other.event_) { other.event_ = nullptr; }
  ~Event();
  cudaEvent_t get() const { return event_; }
  void record(cudaStream_t stream) const;
  // Makes `stream` wait (on the device) for the work before the last record().
  void wait_on(cudaStream_t stream) const;

 private:
  cudaEvent_t event_ = nullptr;
};

// Milliseconds between two completed timing events.
float elapsed_ms(const Event& start, const Event& end);

// A CUDA graph: the device work that `enqueue` puts on `origin` and on every stream that joins
// the capture, captured once, instantiated and uploaded, then launched as often as wanted. The
// host's enqueueing (launches, copies, event records and waits) is paid once, at capture; a
// launch is one call. A stream joins by waiting on an event recorded in the capture, and must be
// joined back into `origin` (origin waits on an event recorded after its last work) before
// `enqueue` returns. The capture is thread-local: an API call that could synchronise (a blocking
// copy, an allocation, a query) fails it, rather than run outside the graph's order.
class Graph {
 public:
  Graph() = default;
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
  Graph(Graph&& other) noexcept;
  Graph& operator=(Graph&& other) noexcept;
  ~Graph();
  static Graph capture(cudaStream_t origin, const std::function<void()>& enqueue);
  void launch(cudaStream_t stream) const;
  bool empty() const { return exec_ == nullptr; }

 private:
  cudaGraphExec_t exec_ = nullptr;
};

}  // namespace ringlab::gpu
