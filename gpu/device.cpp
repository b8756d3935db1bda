#include "gpu/device.hpp"

#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <system_error>
#include <utility>

namespace ringlab::gpu {

void throw_cuda_error(cudaError_t error, const char* call, const char* file, int line) {
  throw CudaError(std::string(call) + " failed at " + file + ":" + std::to_string(line) + ": " +
                      cudaGetErrorName(error) + " (" + cudaGetErrorString(error) + ")",
                  error);
}

int device_count(std::string* why) {
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess) {
    if (why) *why = std::string("cudaGetDeviceCount: ") + cudaGetErrorString(error);
    (void)cudaGetLastError();  // clear the error so that later calls do not report it again
    return 0;
  }
  if (count == 0 && why) *why = "cudaGetDeviceCount: no devices";
  return count;
}

std::string device_description(int device) {
  cudaDeviceProp prop{};
  RINGLAB_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  char details[96];
  std::snprintf(details, sizeof details, " (sm_%d%d, %d SMs, %.1f GiB)", prop.major, prop.minor,
                prop.multiProcessorCount, static_cast<double>(prop.totalGlobalMem) / (1024.0 * 1024.0 * 1024.0));
  return std::string(prop.name) + details;
}

void request_hardware_queues() {
  (void)setenv(kHardwareQueuesVariable, std::to_string(kMostHardwareQueues).c_str(), /*overwrite=*/0);
}

int hardware_queues() {
  const char* value = std::getenv(kHardwareQueuesVariable);
  if (!value) return kDefaultHardwareQueues;
  int queues = 0;
  const char* end = value + std::strlen(value);
  const auto [stop, error] = std::from_chars(value, end, queues);
  if (error != std::errc() || stop != end || queues < 1 || queues > kMostHardwareQueues) return -1;
  return queues;
}

std::string queue_sharing(int64_t streams) {
  const int queues = hardware_queues();
  if (queues < 1 || streams <= queues) return "";
  const char* value = std::getenv(kHardwareQueuesVariable);
  return std::to_string(streams) + " streams share " + std::to_string(queues) + " hardware queues, " +
         kHardwareQueuesVariable + (value ? std::string("=") + value : std::string(" unset"));
}

DeviceBuffer::DeviceBuffer(size_t bytes) : bytes_(bytes) {
  if (bytes > 0) RINGLAB_CUDA_CHECK(cudaMalloc(&data_, bytes));
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    if (data_) cudaFree(data_);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

DeviceBuffer::~DeviceBuffer() {
  if (data_) cudaFree(data_);
}

void DeviceBuffer::upload(const void* host, size_t bytes, size_t offset) {
  if (offset + bytes > bytes_) throw CudaError("DeviceBuffer::upload: " + std::to_string(bytes) + " bytes do not fit");
  if (bytes) RINGLAB_CUDA_CHECK(cudaMemcpy(static_cast<char*>(data_) + offset, host, bytes, cudaMemcpyHostToDevice));
}

void DeviceBuffer::download(void* host, size_t bytes, size_t offset) const {
  if (offset + bytes > bytes_)
    throw CudaError("DeviceBuffer::download: " + std::to_string(bytes) + " bytes out of range");
  if (bytes)
    RINGLAB_CUDA_CHECK(cudaMemcpy(host, static_cast<const char*>(data_) + offset, bytes, cudaMemcpyDeviceToHost));
}

void DeviceBuffer::zero_async(cudaStream_t stream) {
  if (bytes_) RINGLAB_CUDA_CHECK(cudaMemsetAsync(data_, 0, bytes_, stream));
}

Stream::Stream() { RINGLAB_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)); }
Stream::~Stream() {
  if (stream_) cudaStreamDestroy(stream_);
}
void Stream::synchronize() const { RINGLAB_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

Event::Event(bool timing) {
  RINGLAB_CUDA_CHECK(cudaEventCreateWithFlags(&event_, timing ? cudaEventDefault : cudaEventDisableTiming));
}
Event::~Event() {
  if (event_) cudaEventDestroy(event_);
}
void Event::record(cudaStream_t stream) const { RINGLAB_CUDA_CHECK(cudaEventRecord(event_, stream)); }
void Event::wait_on(cudaStream_t stream) const { RINGLAB_CUDA_CHECK(cudaStreamWaitEvent(stream, event_, 0)); }

float elapsed_ms(const Event& start, const Event& end) {
  float ms = 0;
  RINGLAB_CUDA_CHECK(cudaEventElapsedTime(&ms, start.get(), end.get()));
  return ms;
}

Graph::Graph(Graph&& other) noexcept : exec_(std::exchange(other.exec_, nullptr)) {}
Graph& Graph::operator=(Graph&& other) noexcept {
  if (this != &other) {
    if (exec_) cudaGraphExecDestroy(exec_);
    exec_ = std::exchange(other.exec_, nullptr);
  }
  return *this;
}
Graph::~Graph() {
  if (exec_) cudaGraphExecDestroy(exec_);
}

Graph Graph::capture(cudaStream_t origin, const std::function<void()>& enqueue) {
  RINGLAB_CUDA_CHECK(cudaStreamBeginCapture(origin, cudaStreamCaptureModeThreadLocal));
  cudaGraph_t graph = nullptr;
  try {
    enqueue();
  } catch (...) {  // end the capture (its error, if any, is the one thrown already) and drop it
    if (cudaStreamEndCapture(origin, &graph) == cudaSuccess && graph) cudaGraphDestroy(graph);
    (void)cudaGetLastError();
    throw;
  }
  RINGLAB_CUDA_CHECK(cudaStreamEndCapture(origin, &graph));
  Graph captured;
  const cudaError_t instantiated = cudaGraphInstantiate(&captured.exec_, graph, 0);
  cudaGraphDestroy(graph);  // the executable graph keeps what it needs
  RINGLAB_CUDA_CHECK(instantiated);
  RINGLAB_CUDA_CHECK(cudaGraphUpload(captured.exec_, origin));  // the first launch pays no upload
  return captured;
}

void Graph::launch(cudaStream_t stream) const { RINGLAB_CUDA_CHECK(cudaGraphLaunch(exec_, stream)); }

}  // namespace ringlab::gpu
