// NumPy .npy files: the bridge to NumPy and PyTorch users.
//
// Reads format versions 1.0 and 2.0, little-endian float32 ('<f4') or float64 ('<f8'), C order.
// Anything else — bad magic, truncated header or data, trailing bytes, another dtype, big-endian,
// Fortran order — is a UsageError naming the file, the problem and the fix.
// Writes version 1.0 (2.0 when the header needs it), '<f4' or '<f8', C order.
#pragma once

#include <string>

#include "reference/tensor.hpp"

namespace ringlab {

struct NpyArray {
  std::string descr;      // "<f4" or "<f8"
  Tensor<double> values;  // the shape and values (float32 values convert exactly)
};

NpyArray read_npy(const std::string& path);
// Parses the bytes of a .npy file; `name` is used in error messages. (The fuzzers call this.)
NpyArray parse_npy(const std::string& bytes, const std::string& name);

void write_npy(const std::string& path, const Tensor<float>& tensor);
void write_npy(const std::string& path, const Tensor<double>& tensor);
// The bytes write_npy would write.
std::string npy_bytes(const Tensor<float>& tensor);
std::string npy_bytes(const Tensor<double>& tensor);

}  // namespace ringlab
