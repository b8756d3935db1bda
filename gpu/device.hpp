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
