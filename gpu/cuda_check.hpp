// CUDA (and NCCL) errors become exceptions carrying the call, the file and line, and the
// runtime's message — never a silent bad result, never an abort.
#pragma once

#include <cuda_runtime_api.h>

#include <stdexcept>
#include <string>

namespace ringlab::gpu {

class CudaError : public std::runtime_error {
 public:
  explicit CudaError(const std::string& what, cudaError_t code = cudaErrorUnknown)
      : std::runtime_error(what), code_(code) {}
  cudaError_t code() const { return code_; }

 private:
  cudaError_t code_;
};

void throw_cuda_error(cudaError_t error, const char* call, const char* file, int line);

inline void cuda_check(cudaError_t error, const char* call, const char* file, int line) {
  if (error != cudaSuccess) throw_cuda_error(error, call, file, line);
}

}  // namespace ringlab::gpu

#define RINGLAB_CUDA_CHECK(call) ::ringlab::gpu::cuda_check((call), #call, __FILE__, __LINE__)
