#include "reference/tensor.hpp"

namespace ringlab {

std::string shape_string(const Shape& shape) {
  std::string text = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) text += ", ";
    text += std::to_string(shape[i]);
  }
  return text + ")";
}

int64_t shape_elements(const Shape& shape) {
  int64_t n = 1;
  for (int64_t extent : shape) n *= extent;
  return n;
}

}  // namespace ringlab
