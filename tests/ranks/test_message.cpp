// Message payloads: the checksum catches every single-bit flip, the fused copy agrees with it,
// and the buffer pool hands back buffers of the size asked for.
#include <catch2/catch.hpp>
#include <cstring>

#include "sim/ranks/message.hpp"
#include "tests/ranks/runtime_test_support.hpp"

using namespace ringlab;
using namespace ringlab::testing;

TEST_CASE("the checksum changes with any single flipped bit", "[sim][message]") {
  const std::vector<float> data = exact_payload(3, 37);
  const Checksum clean = checksum_of(data);
  const size_t element = GENERATE(0, 18, 36);
  for (int bit = 0; bit < 32; ++bit) {
    std::vector<float> flipped = data;
    uint32_t word;
    std::memcpy(&word, &flipped[element], sizeof word);
    word ^= 1u << bit;
    std::memcpy(&flipped[element], &word, sizeof word);
    CHECK(checksum_of(flipped) != clean);
  }
}

TEST_CASE("copy_with_checksum copies exactly and returns the same checksum", "[sim][message]") {
  const size_t n = GENERATE(0, 1, 7, 4096);
  const std::vector<float> data = exact_payload(1, n);
  std::vector<float> copy(n, -1.0f);
  CHECK(copy_with_checksum(data, copy) == checksum_of(data));
  CHECK(same_bits(copy, data));
}

TEST_CASE("the buffer pool reuses large buffers of the same size only, up to its cap", "[sim][message]") {
  BufferPool pool(3 * BufferPool::kMinPooledFloats * sizeof(float));
  const size_t large = BufferPool::kMinPooledFloats;
  Buffer out;
  CHECK_FALSE(pool.take(large, out));
  Buffer a(large, 1.0f);
  const float* address = a.data();
  pool.give_back(std::move(a));
  CHECK_FALSE(pool.take(large + 1, out));
  REQUIRE(pool.take(large, out));
  CHECK(out.data() == address);
  CHECK(out.size() == large);
  pool.give_back(Buffer(8));  // too small to pool
  CHECK_FALSE(pool.take(8, out));
  for (int i = 0; i < 4; ++i) pool.give_back(Buffer(large));  // the 4th is over the cap
  int taken = 0;
  while (pool.take(large, out)) ++taken;
  CHECK(taken == 3);
  Buffer payload;
  const std::vector<float> data = exact_payload(2, large);
  CHECK(make_payload(pool, data, payload) == checksum_of(data));
  CHECK(same_bits(payload, data));
}
