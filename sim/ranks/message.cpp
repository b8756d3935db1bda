#include "sim/ranks/message.hpp"

#include <cstring>

namespace ringlab {

// Both loops vectorize (the memcpy calls are how C++ reads a float's bits without aliasing UB).
Checksum checksum_of(std::span<const float> data) {
  uint64_t sum = 0;
  uint32_t bits = 0;
  const float* source = data.data();
  const size_t count = data.size();
  for (size_t i = 0; i < count; ++i) {
    uint32_t word;
    std::memcpy(&word, source + i, sizeof word);
    sum += word;
    bits ^= word;
  }
  return {sum, bits};
}

Checksum copy_with_checksum(std::span<const float> from, std::span<float> to) {
  uint64_t sum = 0;
  uint32_t bits = 0;
  const float* source = from.data();
  float* target = to.data();
  const size_t count = from.size();
  for (size_t i = 0; i < count; ++i) {
    uint32_t word;
    std::memcpy(&word, source + i, sizeof word);
    std::memcpy(target + i, &word, sizeof word);
    sum += word;
    bits ^= word;
  }
  return {sum, bits};
}

bool BufferPool::take(size_t floats, Buffer& out) {
  if (floats < kMinPooledFloats) return false;
  std::lock_guard lock(mutex_);
  auto found = free_.find(floats);
  if (found == free_.end() || found->second.empty()) return false;
  out = std::move(found->second.back());
  found->second.pop_back();
  held_bytes_ -= floats * sizeof(float);
  return true;
}

void BufferPool::give_back(Buffer&& buffer) {
  const size_t floats = buffer.size();
  if (floats < kMinPooledFloats) return;  // left to the caller's destructor
  std::lock_guard lock(mutex_);
  if (held_bytes_ + floats * sizeof(float) > capacity_bytes_) return;
  held_bytes_ += floats * sizeof(float);
  free_[floats].push_back(std::move(buffer));
}

Checksum make_payload(BufferPool& pool, std::span<const float> data, Buffer& payload) {
  if (pool.take(data.size(), payload)) return copy_with_checksum(data, payload);
  payload.assign(data.begin(), data.end());  // one pass that also faults the fresh pages in
  return checksum_of(payload);
}

}  // namespace ringlab
