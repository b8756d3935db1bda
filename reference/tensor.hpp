// Dense row-major tensors with a shape — clear, not clever.
//
// Dimension letters mean the same everywhere in ringlab:
//   B batch, S sequence (tokens), H query heads, HKV key/value heads, D head dimension,
//   P ranks. Attention tensors are (B, S, H, D) for q, out, dout, dq and (B, S, HKV, D) for
//   k, v, dk, dv; the log-sum-exp is (B, H, S).
#pragma once

#include <cassert>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace ringlab {

using Shape = std::vector<int64_t>;

// "(1, 1024, 4, 64)"
std::string shape_string(const Shape& shape);
int64_t shape_elements(const Shape& shape);

template <class T>
class Tensor {
 public:
  using value_type = T;

  Tensor() = default;
  explicit Tensor(Shape shape, T fill = T(0))
      : shape_(std::move(shape)), data_(static_cast<size_t>(shape_elements(shape_)), fill) {}
  // Takes ownership of `data` (no copy): a received message becomes a tensor. Its size must
  // match the shape.
  Tensor(Shape shape, std::vector<T>&& data) : shape_(std::move(shape)), data_(std::move(data)) {
    assert(static_cast<int64_t>(data_.size()) == shape_elements(shape_));
  }
  // Gives the storage away (no copy), leaving the tensor empty: a tensor becomes a message.
  std::vector<T> release() && {
    shape_.clear();
    return std::move(data_);
  }

  const Shape& shape() const { return shape_; }
  int64_t dim(size_t axis) const { return shape_.at(axis); }
  int64_t rank() const { return static_cast<int64_t>(shape_.size()); }
  int64_t size() const { return static_cast<int64_t>(data_.size()); }
  bool empty() const { return data_.empty(); }

  T* data() { return data_.data(); }
  const T* data() const { return data_.data(); }
  std::span<T> span() { return data_; }
  std::span<const T> span() const { return data_; }
  std::vector<T>& storage() { return data_; }
  const std::vector<T>& storage() const { return data_; }

  T& operator[](int64_t i) { return data_[static_cast<size_t>(i)]; }
  const T& operator[](int64_t i) const { return data_[static_cast<size_t>(i)]; }

  // Element of a 3-D tensor, e.g. lse(b, h, s).
  T& operator()(int64_t i0, int64_t i1, int64_t i2) { return data_[index(i0, i1, i2)]; }
  const T& operator()(int64_t i0, int64_t i1, int64_t i2) const { return data_[index(i0, i1, i2)]; }
  // Element of a 4-D tensor, e.g. q(b, s, h, d).
  T& operator()(int64_t i0, int64_t i1, int64_t i2, int64_t i3) { return data_[index(i0, i1, i2, i3)]; }
  const T& operator()(int64_t i0, int64_t i1, int64_t i2, int64_t i3) const { return data_[index(i0, i1, i2, i3)]; }

  // Same values, another element type (float <-> double).
  template <class U>
  Tensor<U> cast() const {
    if (shape_.empty()) return {};  // an empty tensor stays empty (not a 0-d scalar)
    Tensor<U> result(shape_);
    for (size_t i = 0; i < data_.size(); ++i) result.storage()[i] = static_cast<U>(data_[i]);
    return result;
  }

  friend bool operator==(const Tensor& a, const Tensor& b) = default;

 private:
  size_t index(int64_t i0, int64_t i1, int64_t i2) const {
    assert(shape_.size() == 3);
    return static_cast<size_t>((i0 * shape_[1] + i1) * shape_[2] + i2);
  }
  size_t index(int64_t i0, int64_t i1, int64_t i2, int64_t i3) const {
    assert(shape_.size() == 4);
    return static_cast<size_t>(((i0 * shape_[1] + i1) * shape_[2] + i2) * shape_[3] + i3);
  }

  Shape shape_;
  std::vector<T> data_;
};

}  // namespace ringlab
