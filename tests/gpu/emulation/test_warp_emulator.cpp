// The warp emulator itself (gpu/emulation/warp_emulator.hpp): each adversarial mode on toy kernels,
// and the precision of ex2.approx and the cvt.rn conversions against their PTX ISA definitions.
// Also restarts the emulator's launch numbering at every test case of this executable, so a
// failure reported with a seed reproduces when its test case runs alone.
#include "gpu/emulation/warp_emulator.hpp"  // first: it stands in for nvcc

#define CATCH_CONFIG_EXTERNAL_INTERFACES  // the listener's base class
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "gpu/kernels/primitives.cuh"

namespace ringlab {
namespace {

struct RestartLaunchNumbers : Catch::TestEventListenerBase {
  using TestEventListenerBase::TestEventListenerBase;
  void testCaseStarting(const Catch::TestCaseInfo& /*info*/) override { emu::restart_launch_numbers(); }
};

// Sets one adversarial setting for a scope.
template <class Field>
class Scoped {
 public:
  Scoped(Field& field, Field value) : field_(field), previous_(field) { field_ = value; }
  ~Scoped() { field_ = previous_; }
  Scoped(const Scoped&) = delete;
  Scoped& operator=(const Scoped&) = delete;

 private:
  Field& field_;
  Field previous_;
};

float bits_to_float(uint32_t bits) {
  float x;
  std::memcpy(&x, &bits, sizeof x);
  return x;
}

uint16_t cuda_bf16_bits(float x) {
  const __nv_bfloat16_raw raw = __nv_bfloat16(__float2bfloat16_rn(x));
  return raw.x;
}

uint16_t cuda_fp16_bits(float x) {
  const __half_raw raw = __half(__float2half_rn(x));
  return raw.x;
}

}  // namespace

CATCH_REGISTER_LISTENER(RestartLaunchNumbers)

TEST_CASE("warp emulator: a cross-warp shared-memory race is reported with kernel, offset and warps",
          "[gpu][emulated][emulator]") {
  // Warp 1 stores 16 rows of 16 bytes; warp 0 reads them with ldmatrix. Without the barrier the
  // read and the stores share an interval, whichever warp runs first.
  auto kernel = [](bool barrier) {
    using namespace gpu::dev;
    RINGLAB_DYNAMIC_SMEM(smem);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (warp == 1) std::memset(smem + lane * 16, lane + 1, 16);
    if (barrier) sync_threads();
    if (warp == 0) {
      uint32_t r[4];
      ldmatrix_x4(r, smem + lane * 16);
    }
  };
  REQUIRE_NOTHROW(emu::launch(
      {1, 1, 1}, 64, 512, [&] { kernel(true); }, "toy"));
  try {
    emu::launch(
        {1, 1, 1}, 64, 512, [&] { kernel(false); }, "toy");
    FAIL("no race reported");
  } catch (const std::runtime_error& e) {
    const std::string message = e.what();
    INFO(message);
    CHECK(message.find("shared-memory race in toy, block (0, 0)") != std::string::npos);
    CHECK(message.find("byte offset") != std::string::npos);
    CHECK(message.find("warp 0") != std::string::npos);
    CHECK(message.find("warp 1") != std::string::npos);
    CHECK(message.find("RINGLAB_EMU_SEED") != std::string::npos);
  }
  const Scoped off(emu::adversary().race_check, false);
  CHECK_NOTHROW(emu::launch(
      {1, 1, 1}, 64, 512, [&] { kernel(false); }, "toy"));
}

TEST_CASE("warp emulator: stmatrix.x4 writes C fragments as rows, the inverse of ldmatrix.x4",
          "[gpu][emulated][emulator]") {
  // A 16 x 16 tile of 16-bit values v(row, col) = 256 row + col, held as the C fragments of two
  // n-tiles (lane 4 g + t: rows g and g + 8, cols 2t and 2t + 1 of each), stored by one stmatrix.x4
  // whose lane l gives row l % 16 at column chunk l / 16; shared memory must hold the tile row by
  // row, and ldmatrix.x4 at the same addresses must give the registers back.
  auto value = [](int row, int col) { return static_cast<uint32_t>(256 * row + col); };
  std::vector<uint16_t> tile(16 * 16);
  bool registers_back = true;
  emu::launch({1, 1, 1}, 32, 512, [&] {
    using namespace gpu::dev;
    unsigned char* smem = emu::dynamic_shared_memory();
    const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    auto pair = [&](int row, int col) { return value(row, col) | (value(row, col + 1) << 16); };
    const uint32_t r[4] = {pair(g, 2 * t), pair(g + 8, 2 * t), pair(g, 8 + 2 * t), pair(g + 8, 8 + 2 * t)};
    unsigned char* row_address = smem + (lane % 16) * 32 + (lane / 16) * 16;
    stmatrix_x4(r, row_address);
    uint32_t back[4];
    ldmatrix_x4(back, row_address);
    for (int i = 0; i < 4; ++i) registers_back = registers_back && back[i] == r[i];
    if (lane == 0) std::memcpy(tile.data(), smem, tile.size() * sizeof(uint16_t));
  });
  CHECK(registers_back);
  bool rows = true;
  for (int row = 0; row < 16; ++row)
    for (int col = 0; col < 16; ++col) rows = rows && tile[static_cast<size_t>(16 * row + col)] == value(row, col);
  CHECK(rows);
  // A row address that is not 16-byte aligned is refused, as ldmatrix's is.
  CHECK_THROWS_WITH(emu::launch({1, 1, 1}, 32, 1024,
                                [&] {
                                  const uint32_t r[4] = {};
                                  gpu::dev::stmatrix_x4(r, emu::dynamic_shared_memory() + 8 + 32 * (threadIdx.x % 32));
                                }),
                    Catch::Contains("stmatrix: shared address not 16-byte aligned"));
}

TEST_CASE("warp emulator: vote.any is true in every lane when one lane holds true, per warp",
          "[gpu][emulated][emulator]") {
  // Two warps: in warp 0 only lane 5 votes true, in warp 1 no lane does.
  std::vector<int> seen(64, -1);
  emu::launch({1, 1, 1}, 64, 0, [&] {
    const int thread = static_cast<int>(threadIdx.x);
    seen[static_cast<size_t>(thread)] = gpu::dev::warp_any(thread == 5) ? 1 : 0;
  });
  CHECK(std::count(seen.begin(), seen.begin() + 32, 1) == 32);
  CHECK(std::count(seen.begin() + 32, seen.end(), 0) == 32);
}

TEST_CASE("warp emulator: cp.async lands at a random point before its wait_group", "[gpu][emulated][emulator]") {
  // One thread copies 16 bytes and looks at the destination before waiting (the bug this mode
  // exposes): sometimes the copy has landed, sometimes not; after the wait it always has.
  alignas(16) static const unsigned char source[16] = {42};
  int early = 0, late = 0;
  auto run = [&] {
    emu::launch({1, 1, 1}, 32, 16, [&] {
      unsigned char* smem = emu::dynamic_shared_memory();
      if (threadIdx.x != 0) return;
      gpu::dev::cp_async_16(smem, source, true);
      gpu::dev::cp_async_commit();
      (smem[0] == 42 ? early : late) += 1;
      gpu::dev::cp_async_wait<0>();
      CHECK(smem[0] == 42);
    });
  };
  for (int i = 0; i < 200; ++i) run();
  CHECK(early > 0);
  CHECK(late > 0);
  const Scoped off(emu::adversary().async_landing, false);
  early = late = 0;
  for (int i = 0; i < 20; ++i) run();
  CHECK(early == 0);
}

TEST_CASE("warp emulator: 4-byte cp.async copies one word or zero-fills it, checked for alignment",
          "[gpu][emulated][emulator]") {
  alignas(16) static const int32_t source[4] = {7, -3, 11, 5};
  int32_t got[4] = {};
  emu::launch({1, 1, 1}, 32, 16, [&] {
    auto* smem = reinterpret_cast<int32_t*>(emu::dynamic_shared_memory());
    if (threadIdx.x < 4) gpu::dev::cp_async_4(smem + threadIdx.x, source + threadIdx.x, threadIdx.x != 2);
    gpu::dev::cp_async_commit();
    gpu::dev::cp_async_wait<0>();
    gpu::dev::sync_threads();
    if (threadIdx.x == 0) std::memcpy(got, smem, sizeof got);
  });
  CHECK(got[0] == 7);
  CHECK(got[1] == -3);
  CHECK(got[2] == 0);  // !valid: zero-filled, the source not read
  CHECK(got[3] == 5);
  auto misaligned = [&] {
    emu::launch({1, 1, 1}, 32, 16, [&] {
      unsigned char* smem = emu::dynamic_shared_memory();
      if (threadIdx.x == 0) gpu::dev::cp_async_4(smem + 2, source, true);
      gpu::dev::cp_async_wait<0>();
    });
  };
  CHECK_THROWS_WITH(misaligned(), Catch::Contains("not 4-byte aligned"));
}

TEST_CASE("warp emulator: warps run in a random order per barrier interval", "[gpu][emulated][emulator]") {
  std::set<int> first;
  for (int i = 0; i < 50; ++i) {
    int order = 0, first_warp = -1;
    emu::launch({1, 1, 1}, 128, 0, [&] {
      if (order++ == 0) first_warp = static_cast<int>(threadIdx.x / 32);
      gpu::dev::sync_threads();
    });
    first.insert(first_warp);
  }
  CHECK(first.size() == 4);
}

TEST_CASE("warp emulator: atomics are applied in a random order, all of them", "[gpu][emulated][emulator]") {
  // Float addition is not associative: the order shows in the sum's last bits.
  std::set<float> sums;
  for (int i = 0; i < 20; ++i) {
    float sum = 0.f, count = 0.f;
    emu::launch({2, 1, 1}, 64, 0, [&] {
      gpu::dev::atomic_add(&sum, (threadIdx.x % 2 ? 1e7f : 1.f) + 0.1f * static_cast<float>(threadIdx.x));
      gpu::dev::atomic_add(&count, 1.f);
    });
    CHECK(count == 128.f);
    sums.insert(sum);
  }
  CHECK(sums.size() > 1);
}

TEST_CASE(
    "warp emulator: vector atomics add every element, one by one in a random order, aligned; predicated ones only "
    "where told",
    "[gpu][emulated][emulator]") {
  // 64 threads add (v, v + 1, v + 2, v + 3) to the same 4 floats: each element is an independent
  // atomic, so the elements' sums see different orders (their last bits differ run to run).
  std::set<float> sums;
  for (int i = 0; i < 20; ++i) {
    alignas(16) float sum[4] = {};
    float pair[2] = {};
    emu::launch({1, 1, 1}, 64, 0, [&] {
      const float v = (threadIdx.x % 2 ? 1e7f : 1.f) + 0.1f * static_cast<float>(threadIdx.x);
      const float quad[4] = {v, v + 1.f, v + 2.f, 1.f};
      gpu::dev::atomic_add_vector(sum, quad);
      const float two[2] = {1.f, 2.f};
      gpu::dev::atomic_add_vector(pair, two);
    });
    CHECK(sum[3] == 64.f);
    CHECK(pair[0] == 64.f);
    CHECK(pair[1] == 128.f);
    sums.insert(sum[0]);
  }
  CHECK(sums.size() > 1);
  alignas(16) float buffer[8] = {};
  auto misaligned = [&] {
    emu::launch({1, 1, 1}, 32, 0, [&] {
      const float quad[4] = {1.f, 1.f, 1.f, 1.f};
      gpu::dev::atomic_add_vector(buffer + 2, quad);  // 8-byte aligned, not 16
    });
  };
  CHECK_THROWS_WITH(misaligned(), Catch::Contains("not 16-byte aligned"));
  // The predicated form adds where its predicate holds and touches nothing elsewhere: the odd
  // threads' address is past the end (misaligned too), which a predicated-off red never reads.
  alignas(16) float quad_sum[4] = {};
  emu::launch({1, 1, 1}, 64, 0, [&] {
    const bool even = threadIdx.x % 2 == 0;
    const float quad[4] = {1.f, 2.f, 3.f, 4.f};
    gpu::dev::atomic_add_vector_if(even, even ? quad_sum : buffer + 9, quad);
  });
  CHECK(quad_sum[0] == 32.f);
  CHECK(quad_sum[3] == 128.f);
}

TEST_CASE("warp emulator: 8-byte pair loads and stores move two floats, aligned", "[gpu][emulated][emulator]") {
  alignas(16) float buffer[8] = {1.f, 2.f, 3.f, 4.f, 5.f, 6.f, 7.f, 8.f};
  emu::launch({1, 1, 1}, 32, 0, [&] {
    const int i = static_cast<int>(threadIdx.x);
    if (i >= 4) return;
    float x = 0.f, y = 0.f;
    gpu::dev::load_pair(buffer + 2 * i, x, y);
    gpu::dev::store_pair(buffer + 2 * i, y * 10.f, x * 10.f);  // swapped: each lands where it should
  });
  CHECK(std::vector<float>(buffer, buffer + 8) == std::vector<float>{20.f, 10.f, 40.f, 30.f, 60.f, 50.f, 80.f, 70.f});
  float x = 0.f, y = 0.f;
  CHECK_THROWS_WITH(emu::launch({1, 1, 1}, 32, 0, [&] { gpu::dev::load_pair(buffer + 1, x, y); }),
                    Catch::Contains("ld.global.v2.f32: address not 8-byte aligned"));
  CHECK_THROWS_WITH(emu::launch({1, 1, 1}, 32, 0, [&] { gpu::dev::store_pair(buffer + 3, x, y); }),
                    Catch::Contains("st.global.v2.f32: address not 8-byte aligned"));
}

TEST_CASE("warp emulator: a deleted barrier site is skipped in scope only", "[gpu][emulated][emulator]") {
  int passed = 0;
  auto run = [&] { emu::launch({1, 1, 1}, 32, 0, [&] { gpu::dev::sync_site<1>(), ++passed; }); };
  {
    const emu::DropBarrier drop(1);
    run();
  }
  run();
  CHECK(passed == 64);
}

TEST_CASE("warp emulator: ex2.approx.ftz.f32 within 2^-22 relative, subnormals flushed", "[gpu][emulated][emulator]") {
  std::mt19937 random(7);
  std::uniform_real_distribution<float> range(-126.f, 127.9f);
  double worst = 0;
  for (int i = 0; i < 100000; ++i) {
    const float x = range(random);
    const double exact = std::exp2(static_cast<double>(x));
    worst = std::max(worst, std::fabs(emu::ex2_approx(x) - exact) / exact);
  }
  CHECK(worst <= std::ldexp(1.0, -22));
  CHECK(worst > 0);  // a model of the approximation, not the exact function
  for (int k = -126; k <= 127; ++k) CHECK(emu::ex2_approx(static_cast<float>(k)) == std::ldexp(1.f, k));
  CHECK(emu::ex2_approx(-126.5f) == 0.f);           // 2^-126.5 is subnormal: flushed
  CHECK(emu::ex2_approx(bits_to_float(1)) == 1.f);  // a subnormal input counts as 0
  CHECK(emu::ex2_approx(128.f) == INFINITY);
  CHECK(emu::ex2_approx(-INFINITY) == 0.f);
  CHECK(std::isnan(emu::ex2_approx(NAN)));
  // __expf = ex2.approx(x log2 e): the product's rounding adds up to |x| 2^-24 relative.
  for (int step = 0; static_cast<float>(step) * 0.37f < 160.f; ++step) {  // x from -80 to 80 in steps of 0.37
    const float x = -80.f + static_cast<float>(step) * 0.37f;
    const double exact = std::exp(static_cast<double>(x));
    CHECK(std::fabs(emu::fast_exp(x) - exact) / exact <= std::ldexp(1.0, -22) + std::fabs(x) * std::ldexp(1.0, -23));
  }
  CHECK(emu::fast_exp(-INFINITY) == 0.f);
  CHECK(emu::fast_exp(-100.f) == 0.f);  // e^-100 is below 2^-126: flushed
}

TEST_CASE("warp emulator: cvt.rn.bf16.f32 and cvt.rn.f16.f32 round to nearest even", "[gpu][emulated][emulator]") {
  // The PTX ISA's cases, by hand: ties to even, overflow to infinity, fp16 subnormals, NaN.
  CHECK(emu::to_bf16_bits(1.f + 0x1p-8f) == 0x3f80);      // a tie: down to the even 1.0
  CHECK(emu::to_bf16_bits(1.f + 3 * 0x1p-8f) == 0x3f82);  // a tie: up to the even neighbour
  CHECK(emu::to_bf16_bits(1.f + 0x1p-8f + 0x1p-20f) == 0x3f81);
  CHECK(emu::to_bf16_bits(std::numeric_limits<float>::max()) == 0x7f80);  // rounds up to infinity
  CHECK(emu::to_bf16_bits(-0.f) == 0x8000);
  CHECK(emu::to_bf16_bits(bits_to_float(0x00018000)) == 0x0002);  // f32 subnormal, a tie to even
  CHECK(emu::to_bf16_bits(NAN) == 0x7fff);
  CHECK(emu::to_fp16_bits(65504.f) == 0x7bff);
  CHECK(emu::to_fp16_bits(65519.f) == 0x7bff);
  CHECK(emu::to_fp16_bits(65520.f) == 0x7c00);  // 65504 + half an ulp: the tie goes to infinity
  CHECK(emu::to_fp16_bits(-1e6f) == 0xfc00);
  CHECK(emu::to_fp16_bits(2049.f) == 0x6800);    // 2048: a tie, even
  CHECK(emu::to_fp16_bits(2051.f) == 0x6802);    // 2052: a tie, even
  CHECK(emu::to_fp16_bits(0x1p-24f) == 0x0001);  // the smallest subnormal
  CHECK(emu::to_fp16_bits(0x1p-25f) == 0x0000);  // half of it: a tie, to the even 0
  CHECK(emu::to_fp16_bits(0x1.8p-25f) == 0x0001);
  CHECK(emu::to_fp16_bits(0x1.ffcp-15f) == 0x0400);  // rounds up into the normals
  CHECK(emu::to_fp16_bits(NAN) == 0x7fff);
  // Random bit patterns agree with CUDA's host conversions, which implement the same rounding.
  std::mt19937 random(11);
  int disagree_bf16 = 0, disagree_fp16 = 0;
  for (int i = 0; i < 200000; ++i) {
    const uint32_t bits = random();
    const float x = i % 2 ? bits_to_float(bits) : bits_to_float((bits & 0x80ffffffu) | (0x60u + bits % 0x20u) << 24);
    if (std::isnan(x)) continue;
    disagree_bf16 += emu::to_bf16_bits(x) != cuda_bf16_bits(x) ? 1 : 0;
    disagree_fp16 += emu::to_fp16_bits(x) != cuda_fp16_bits(x) ? 1 : 0;
  }
  CHECK(disagree_bf16 == 0);
  CHECK(disagree_fp16 == 0);
}

}  // namespace ringlab
