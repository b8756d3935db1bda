// Messages between virtual ranks: the payload type, the checksum every message carries, and the
// pool that recycles large payload buffers.
//
// A payload is a copied Buffer: a send copies the caller's floats once into a buffer the message
// owns, and a receive that returns a Buffer moves that same buffer out — no rank ever sees memory
// another rank can write. The copy and the checksum are one fused pass over the data.
//
// Large fresh buffers cost page faults on first touch (about as much as the copy itself), so the
// world keeps a pool: buffers that come back (recv_into and the collectives give theirs back
// automatically; Communicator::recycle hands back one a caller has finished with) are reused by
// later sends of the same size.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <span>
#include <vector>

namespace ringlab {

using Buffer = std::vector<float>;

// Sum and xor of the payload's 32-bit words: any single flipped bit changes both. Not a
// cryptographic hash — it catches the corruption the fault injector makes, cheaply.
struct Checksum {
  uint64_t sum = 0;
  uint32_t bits = 0;
  friend bool operator==(const Checksum&, const Checksum&) = default;
};

Checksum checksum_of(std::span<const float> data);
// Copies `from` into `to` (same size) and returns the checksum of the data, in one pass.
Checksum copy_with_checksum(std::span<const float> from, std::span<float> to);

// Recycled payload buffers, keyed by exact size. Thread-safe. Buffers smaller than
// kMinPooledFloats are not pooled (malloc is fast for them); the pool never holds more than
// `capacity_bytes`.
class BufferPool {
 public:
  static constexpr size_t kMinPooledFloats = 16 * 1024;  // 64 KiB

  explicit BufferPool(size_t capacity_bytes) : capacity_bytes_(capacity_bytes) {}

  // Moves a pooled buffer of exactly `floats` elements (contents unspecified) into `out` and
  // returns true; false when none is free (then allocate one yourself).
  bool take(size_t floats, Buffer& out);
  void give_back(Buffer&& buffer);

 private:
  std::mutex mutex_;
  std::map<size_t, std::vector<Buffer>> free_;  // size in floats -> buffers of exactly that size
  size_t held_bytes_ = 0;
  size_t capacity_bytes_;
};

// A payload holding a copy of `data`: from the pool when one of that size is free, else freshly
// allocated. Returns the checksum of the data.
Checksum make_payload(BufferPool& pool, std::span<const float> data, Buffer& payload);

}  // namespace ringlab
