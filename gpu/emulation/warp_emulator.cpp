// The fiber scheduler and the lane-by-lane primitives of warp_emulator.hpp. Sections:
//   [fibers]      ucontext fibers, the per-interval warp-turn scheduler, deadlock detection
//   [adversary]   settings, random streams, cp.async landing, the race check, queued atomics
//   [barriers]    block barrier and warp exchange (double-buffered slots)
//   [primitives]  shuffles, ldmatrix, stmatrix, mma, cp.async, atomics
//   [precision]   ex2.approx and the cvt.rn conversions
//   [launch]      grid loop
#include "gpu/emulation/warp_emulator.hpp"

#include <ucontext.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <deque>
#include <limits>
#include <memory>
#include <numeric>
#include <queue>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace ringlab::emu {
namespace {

// ---- [fibers] ----------------------------------------------------------------------------------

constexpr size_t kStackBytes = 128 * 1024;
constexpr int kSlotBytes = 32;
constexpr uint64_t kNotWaiting = ~uint64_t{0};

struct AsyncCopy {
  void* destination;
  const void* source;
  bool valid;
  bool landed;
  int warp;        // of the issuing thread
  int bytes = 16;  // 16, or 4 for cp.async.ca's single words
};

struct Fiber {
  ThreadCoordinates coordinates;
  ucontext_t context{};
  char* stack = nullptr;  // from the thread's stack pool
  bool done = false;
  uint64_t block_wait = kNotWaiting;          // the block barrier generation this fiber waits to pass
  std::deque<std::vector<size_t>> committed;  // cp.async groups (indices into BlockState::copies), oldest first
  std::vector<size_t> open;                   // issued since the last commit
};

struct Barrier {
  int arrived = 0;
  uint64_t generation = 0;
};

struct WarpState {
  Barrier barrier;
  std::array<std::array<std::array<unsigned char, kSlotBytes>, 32>, 2> slots{};
};

// Who touched a byte of shared memory in the current barrier interval (race_check).
struct ByteHistory {
  uint64_t write_epoch = 0, read_epoch = 0;
  uint32_t readers = 0;  // bit per warp, for read_epoch
  int writer = -1;       // for write_epoch
};

struct BlockState {
  Dim3 grid, block, index;
  int threads = 0;
  std::vector<Fiber> fibers;
  std::vector<WarpState> warps;
  Barrier block_barrier;
  std::vector<unsigned char> smem;
  const std::function<void()>* kernel = nullptr;
  ucontext_t scheduler{};
  Fiber* running = nullptr;
  uint64_t progress = 0;        // arrivals, releases and exits: a pass without any is a deadlock
  bool interval_ended = false;  // the block barrier released during this warp's turn
  std::string error;            // set by a fiber; the scheduler throws it
  // [adversary]
  const char* name = "kernel";
  uint64_t launch = 0;
  std::mt19937_64 random;
  uint64_t tick = 0;
  std::vector<AsyncCopy> copies;
  std::priority_queue<std::pair<uint64_t, size_t>, std::vector<std::pair<uint64_t, size_t>>, std::greater<>> landing;
  std::vector<ByteHistory> history;
  std::vector<unsigned char> shadow;  // shared memory as of the start of the running warp's turn
  std::vector<std::pair<float*, float>> atomics;
};

thread_local BlockState* g_block = nullptr;
thread_local int g_dropped_site = 0;
thread_local uint64_t g_launches = 0;

// Fiber stacks, allocated once per OS thread and reused by every block (allocating and touching
// megabytes per block dominated the run time).
std::vector<std::unique_ptr<char[]>>& stack_pool(size_t count) {
  thread_local std::vector<std::unique_ptr<char[]>> pool;
  while (pool.size() < count) pool.emplace_back(new char[kStackBytes]);
  return pool;
}  // per OS thread: each may run its own grid

void fiber_main() {
  BlockState& block = *g_block;
  try {
    (*block.kernel)();
  } catch (const std::exception& e) {
    if (block.error.empty()) block.error = e.what();
  }
  block.running->done = true;
  ++block.progress;
  // returning resumes uc_link: the scheduler
}

void yield() { swapcontext(&g_block->running->context, &g_block->scheduler); }

[[noreturn]] void fail(const std::string& message) { throw std::runtime_error("warp emulator: " + message); }

int lane_of_running() { return static_cast<int>(g_block->running->coordinates.thread_idx.x % 32); }
int warp_of_running() { return static_cast<int>(g_block->running->coordinates.thread_idx.x / 32); }

// ---- [adversary] -------------------------------------------------------------------------------

uint64_t mix(uint64_t x) {  // splitmix64's finaliser
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

std::string where() {
  const BlockState& block = *g_block;
  return std::string(block.name) + ", block (" + std::to_string(block.index.x) + ", " + std::to_string(block.index.y) +
         "), barrier interval " + std::to_string(block.block_barrier.generation);
}

std::string reproduce() {
  return " (seed " + std::to_string(adversary().seed) + ", launch " + std::to_string(g_block->launch) +
         " of this thread: RINGLAB_EMU_SEED=" + std::to_string(adversary().seed) +
         " and the same test case reproduce it)";
}

uint64_t epoch() { return g_block->block_barrier.generation + 1; }  // 0: never touched

[[noreturn]] void race(int warp, const char* access, size_t offset, int other, const char* other_access) {
  fail("shared-memory race in " + where() + ": warp " + std::to_string(warp) + " " + access +
       " shared memory at byte offset " + std::to_string(offset) + ", which warp " + std::to_string(other) + " " +
       other_access + " since the last __syncthreads" + reproduce());
}

int first_other(uint32_t warps, int warp) {
  const uint32_t others = warps & ~(1u << warp);
  for (int w = 0; w < 32; ++w)
    if (others & (1u << w)) return w;
  return -1;
}

void note_read(size_t offset, size_t bytes, int warp) {
  const uint64_t now = epoch();
  for (size_t i = offset; i < offset + bytes; ++i) {
    ByteHistory& h = g_block->history[i];
    if (h.write_epoch == now && h.writer != warp) race(warp, "reads", i, h.writer, "wrote");
    if (h.read_epoch != now) {
      h.read_epoch = now;
      h.readers = 0;
    }
    h.readers |= 1u << warp;
  }
}

void note_write(size_t offset, size_t bytes, int warp, const char* how) {
  const uint64_t now = epoch();
  for (size_t i = offset; i < offset + bytes; ++i) {
    ByteHistory& h = g_block->history[i];
    if (h.write_epoch == now && h.writer != warp) race(warp, how, i, h.writer, "wrote");
    if (h.read_epoch == now && first_other(h.readers, warp) >= 0)
      race(warp, how, i, first_other(h.readers, warp), "read");
    h.write_epoch = now;
    h.writer = warp;
  }
}

size_t smem_offset(const void* address) {
  return static_cast<size_t>(static_cast<const unsigned char*>(address) - g_block->smem.data());
}

// Plain stores are not seen as they happen: the bytes that changed during a warp's turn are its
// stores (copies that landed meanwhile were applied to the shadow too).
void note_plain_stores(int warp) {
  BlockState& block = *g_block;
  if (!adversary().race_check || block.smem.empty()) return;
  constexpr size_t kChunk = 64;
  for (size_t at = 0; at < block.smem.size(); at += kChunk) {
    const size_t n = std::min(kChunk, block.smem.size() - at);
    if (std::memcmp(block.smem.data() + at, block.shadow.data() + at, n) == 0) continue;
    for (size_t i = at; i < at + n; ++i)
      if (block.smem[i] != block.shadow[i]) note_write(i, 1, warp, "writes (a plain store to)");
    std::memcpy(block.shadow.data() + at, block.smem.data() + at, n);
  }
}

void land(size_t index) {
  BlockState& block = *g_block;
  AsyncCopy& copy = block.copies[index];
  if (copy.landed) return;
  copy.landed = true;
  const auto bytes = static_cast<size_t>(copy.bytes);
  if (copy.valid) {
    std::memcpy(copy.destination, copy.source, bytes);
  } else {
    std::memset(copy.destination, 0, bytes);
  }
  if (!block.shadow.empty()) std::memcpy(block.shadow.data() + smem_offset(copy.destination), copy.destination, bytes);
}

// One step of the block's clock: every emulated primitive is one. Copies due by now land.
void tick() {
  BlockState& block = *g_block;
  ++block.tick;
  while (!block.landing.empty() && block.landing.top().first <= block.tick) {
    const size_t index = block.landing.top().second;
    block.landing.pop();
    land(index);
  }
}

// A cp.async is being written from its issue until its wait_group: in each barrier interval it
// spans it counts as a write by the issuing warp.
void note_copies_in_flight() {
  for (Fiber& fiber : g_block->fibers) {
    for (const std::vector<size_t>& group : fiber.committed)
      for (size_t index : group) {
        const AsyncCopy& copy = g_block->copies[index];
        note_write(smem_offset(copy.destination), static_cast<size_t>(copy.bytes), copy.warp,
                   "writes (an earlier cp.async in flight to)");
      }
    for (size_t index : fiber.open) {
      const AsyncCopy& copy = g_block->copies[index];
      note_write(smem_offset(copy.destination), static_cast<size_t>(copy.bytes), copy.warp,
                 "writes (an earlier cp.async in flight to)");
    }
  }
}

void flush_atomics() {
  BlockState& block = *g_block;
  std::shuffle(block.atomics.begin(), block.atomics.end(), block.random);
  for (const auto& [address, value] : block.atomics) *address += value;
  block.atomics.clear();
}

// ---- [barriers] --------------------------------------------------------------------------------

void wait_barrier(Barrier& barrier, int participants) {
  const uint64_t generation = barrier.generation;
  ++g_block->progress;
  if (++barrier.arrived == participants) {
    barrier.arrived = 0;
    ++barrier.generation;
    return;
  }
  while (barrier.generation == generation) yield();
}

// Every lane of the warp deposits `size` bytes; returns the slot array all lanes' bytes are in.
// Slots alternate by generation, so a fast lane's next exchange never overwrites what a slow lane
// has still to read (it cannot get two exchanges ahead: the next barrier waits for everyone).
const std::array<std::array<unsigned char, kSlotBytes>, 32>& exchange(const void* mine, size_t size) {
  tick();
  WarpState& warp = g_block->warps[static_cast<size_t>(warp_of_running())];
  auto& slots = warp.slots[warp.barrier.generation % 2];
  std::memcpy(slots[static_cast<size_t>(lane_of_running())].data(), mine, size);
  wait_barrier(warp.barrier, 32);
  return slots;
}

// `bytes` of shared memory at `address`, inside the block's and aligned to `bytes` (ldmatrix rows and
// 16-byte copies to 16, single-word copies to 4).
void check_smem(const void* address, size_t bytes, const char* what) {
  const auto* p = static_cast<const unsigned char*>(address);
  const unsigned char* base = g_block->smem.data();
  if (p < base || p + bytes > base + g_block->smem.size()) {
    fail(std::string(what) + ": address outside the block's " + std::to_string(g_block->smem.size()) +
         " bytes of shared memory (offset " + std::to_string(p - base) + ")");
  }
  if (static_cast<size_t>(p - base) % bytes != 0)
    fail(std::string(what) + ": shared address not " + std::to_string(bytes) + "-byte aligned");
}

float half_to_float(uint16_t bits, Operand type) {
  if (type == Operand::bf16) {
    __nv_bfloat16_raw raw;
    raw.x = bits;
    return __bfloat162float(__nv_bfloat16(raw));
  }
  __half_raw raw;
  raw.x = bits;
  return __half2float(__half(raw));
}

uint16_t half_of(uint32_t reg, int which) { return static_cast<uint16_t>(which ? reg >> 16 : reg & 0xffffu); }

}  // namespace

// ---- [adversary] (public) ----------------------------------------------------------------------

Adversary& adversary() {
  static Adversary settings = [] {
    Adversary a;
    if (const char* seed = std::getenv("RINGLAB_EMU_SEED"); seed && *seed) a.seed = std::strtoull(seed, nullptr, 0);
    if (const char* on = std::getenv("RINGLAB_EMU_ADVERSARY"); on && std::string(on) == "0")
      a.shuffle = a.async_landing = a.race_check = a.atomic_shuffle = false;
    return a;
  }();
  return settings;
}

void restart_launch_numbers() { g_launches = 0; }

DropBarrier::DropBarrier(int site) : previous_(g_dropped_site) { g_dropped_site = site; }
DropBarrier::~DropBarrier() { g_dropped_site = previous_; }

// ---- [primitives] ------------------------------------------------------------------------------

const ThreadCoordinates& current() { return g_block->running->coordinates; }
Dim3 block_dim() { return g_block->block; }
Dim3 grid_dim() { return g_block->grid; }
unsigned char* dynamic_shared_memory() { return g_block->smem.data(); }

void sync_block(int site) {
  if (site != 0 && site == g_dropped_site) return;
  tick();
  BlockState& block = *g_block;
  Fiber& fiber = *block.running;
  fiber.block_wait = block.block_barrier.generation;
  if (block.block_barrier.arrived + 1 == block.threads) {
    // The last thread to arrive: the interval ends here. Its warp's stores so far belong to it.
    note_plain_stores(warp_of_running());
    flush_atomics();
    block.interval_ended = true;
  }
  wait_barrier(block.block_barrier, block.threads);
  fiber.block_wait = kNotWaiting;
}

float shfl_xor(float value, int lane_mask) {
  const auto& slots = exchange(&value, sizeof value);
  float result;
  std::memcpy(&result, slots[static_cast<size_t>(lane_of_running() ^ lane_mask)].data(), sizeof result);
  return result;
}

int shfl_xor(int value, int lane_mask) {
  const auto& slots = exchange(&value, sizeof value);
  int result;
  std::memcpy(&result, slots[static_cast<size_t>(lane_of_running() ^ lane_mask)].data(), sizeof result);
  return result;
}

bool warp_any(bool value) {
  const auto& slots = exchange(&value, sizeof value);
  bool any = false;
  for (const auto& slot : slots) {
    bool lane_value;
    std::memcpy(&lane_value, slot.data(), sizeof lane_value);
    any = any || lane_value;
  }
  return any;
}

void ldmatrix(uint32_t (&r)[4], const void* row_address, bool trans) {
  check_smem(row_address, 16, trans ? "ldmatrix.trans" : "ldmatrix");
  if (adversary().race_check) note_read(smem_offset(row_address), 16, warp_of_running());
  const auto& slots = exchange(&row_address, sizeof row_address);
  auto row_of = [&](int lane) {
    const uint16_t* row;
    std::memcpy(&row, slots[static_cast<size_t>(lane)].data(), sizeof row);
    return row;
  };
  const int lane = lane_of_running();
  for (int i = 0; i < 4; ++i) {
    uint16_t lo, hi;
    if (!trans) {  // tile i's (row lane/4, cols 2(lane%4), +1)
      const uint16_t* row = row_of(8 * i + lane / 4);
      lo = row[2 * (lane % 4)];
      hi = row[2 * (lane % 4) + 1];
    } else {  // tile i's (rows 2(lane%4), +1; col lane/4)
      lo = row_of(8 * i + 2 * (lane % 4))[lane / 4];
      hi = row_of(8 * i + 2 * (lane % 4) + 1)[lane / 4];
    }
    r[i] = static_cast<uint32_t>(lo) | (static_cast<uint32_t>(hi) << 16);
  }
}

void stmatrix(const uint32_t (&r)[4], void* row_address) {
  check_smem(row_address, 16, "stmatrix");
  struct Lane {
    void* row;
    uint32_t r[4];
  } mine{row_address, {r[0], r[1], r[2], r[3]}};
  static_assert(sizeof(Lane) <= kSlotBytes);
  const auto& slots = exchange(&mine, sizeof mine);
  // This lane's row is row lane % 8 of tile lane / 8; its pair at cols 2u, 2u + 1 is register
  // lane / 8 of lane 4 (lane % 8) + u. The stores are plain ones, which the race check sees.
  const int lane = lane_of_running();
  uint32_t row[4];
  for (int u = 0; u < 4; ++u) {
    Lane holder;
    const int from = 4 * (lane % 8) + u;
    std::memcpy(&holder, slots[static_cast<size_t>(from)].data(), sizeof holder);
    row[u] = holder.r[lane / 8];
  }
  std::memcpy(row_address, row, sizeof row);
}

void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1, Operand type) {
  struct Fragments {
    uint32_t a[4], b[2];
  } mine{{a[0], a[1], a[2], a[3]}, {b0, b1}};
  static_assert(sizeof(Fragments) <= kSlotBytes);
  const auto& slots = exchange(&mine, sizeof mine);
  auto fragments = [&](int lane) {
    Fragments f;
    std::memcpy(&f, slots[static_cast<size_t>(lane)].data(), sizeof f);
    return f;
  };
  // A (16 x 16): element (row, k) is in lane 4 (row % 8) + (k % 8) / 2, register
  // (row >= 8) + 2 (k >= 8), half k % 2. B (16 x 8): (k, n) in lane 4 n + (k % 8) / 2, register
  // k >= 8, half k % 2.
  float A[16][16], B[16][8];
  for (int row = 0; row < 16; ++row)
    for (int k = 0; k < 16; ++k) {
      const Fragments f = fragments(4 * (row % 8) + (k % 8) / 2);
      A[row][k] = half_to_float(half_of(f.a[(row >= 8 ? 1 : 0) + (k >= 8 ? 2 : 0)], k % 2), type);
    }
  for (int k = 0; k < 16; ++k)
    for (int n = 0; n < 8; ++n) {
      const Fragments f = fragments(4 * n + (k % 8) / 2);
      B[k][n] = half_to_float(half_of(f.b[k >= 8 ? 1 : 0], k % 2), type);
    }
  const int lane = lane_of_running(), g = lane / 4, t = lane % 4;
  for (int e = 0; e < 4; ++e) {
    const int row = g + (e >= 2 ? 8 : 0), col = 2 * t + (e % 2);
    float sum = d[e];
    for (int k = 0; k < 16; ++k) sum += A[row][k] * B[k][col];
    d[e] = sum;
  }
}

void cp_async(void* smem_destination, const void* global_source, bool valid, int bytes) {
  if (bytes != 16 && bytes != 4) fail("cp.async: " + std::to_string(bytes) + " bytes (this emulator: 16 or 4)");
  const auto size = static_cast<size_t>(bytes);
  check_smem(smem_destination, size, "cp.async");
  if (valid && reinterpret_cast<uintptr_t>(global_source) % size != 0)
    fail("cp.async: global source not " + std::to_string(bytes) + "-byte aligned");
  tick();
  BlockState& block = *g_block;
  const int warp = warp_of_running();
  if (adversary().race_check) note_write(smem_offset(smem_destination), size, warp, "writes (cp.async to)");
  const size_t index = block.copies.size();
  block.copies.push_back({smem_destination, global_source, valid, false, warp, bytes});
  block.running->open.push_back(index);
  if (adversary().async_landing) {
    // Log-uniform over 0 .. 65535 steps: about one copy in sixteen lands at once, many within a
    // few hundred steps, some not before their wait_group.
    const double u = std::uniform_real_distribution<double>(0.0, 16.0)(block.random);
    block.landing.emplace(block.tick + static_cast<uint64_t>(std::exp2(u)) - 1, index);
  }
}

void cp_async_commit() {
  tick();
  Fiber& fiber = *g_block->running;
  fiber.committed.push_back(std::move(fiber.open));
  fiber.open.clear();
}

void cp_async_wait(int pending) {
  tick();
  Fiber& fiber = *g_block->running;
  while (static_cast<int>(fiber.committed.size()) > pending) {
    for (size_t index : fiber.committed.front()) land(index);
    fiber.committed.pop_front();
  }
}

void atomic_add(float* address, float value) {
  tick();
  if (adversary().atomic_shuffle) {
    g_block->atomics.emplace_back(address, value);
  } else {
    *address += value;
  }
}

void atomic_add_vector(float* address, const float* values, int count) {
  if (count != 2 && count != 4) fail("red.global.add.v" + std::to_string(count) + ".f32: not a PTX vector width");
  if (reinterpret_cast<uintptr_t>(address) % (sizeof(float) * static_cast<size_t>(count)) != 0)
    fail("red.global.add.v" + std::to_string(count) + ".f32: address not " + std::to_string(4 * count) +
         "-byte aligned");
  // Each element is its own atomic add (the weakest reading of the PTX ISA's vector red): queued
  // one by one, so atomic_shuffle may apply a vector's elements apart and in any order.
  for (int i = 0; i < count; ++i) atomic_add(address + i, values[i]);
}

void check_pair_aligned(const float* address, const char* instruction) {
  if (reinterpret_cast<uintptr_t>(address) % (2 * sizeof(float)) != 0)
    fail(std::string(instruction) + ": address not 8-byte aligned");
}

// ---- [precision] -------------------------------------------------------------------------------

float ex2_approx(float x) {
  if (std::isnan(x)) return x;
  if (std::fpclassify(x) == FP_SUBNORMAL) x = 0.f;  // .ftz: subnormal inputs are zero
  const double exact = std::exp2(static_cast<double>(x));
  if (exact < 0x1p-126) return 0.f;  // .ftz: a subnormal result is +0
  if (exact > static_cast<double>(std::numeric_limits<float>::max())) return INFINITY;
  int exponent = 0;
  const double mantissa = std::frexp(exact, &exponent);  // [0.5, 1)
  return static_cast<float>(std::ldexp(std::nearbyint(std::ldexp(mantissa, 22)), exponent - 22));
}

float fast_exp(float x) {
  float scaled = x * 1.44269504088896340736f;  // mul.ftz.f32
  if (std::fpclassify(scaled) == FP_SUBNORMAL) scaled = 0.f;
  return ex2_approx(scaled);
}

uint16_t to_bf16_bits(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  if (std::isnan(x)) return 0x7fff;
  const uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);  // ties to the even upper half
  return static_cast<uint16_t>((bits + rounding) >> 16);    // a carry into the exponent is right
}

uint16_t to_fp16_bits(float x) {
  if (std::isnan(x)) return 0x7fff;
  const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  const double a = std::fabs(static_cast<double>(x));
  if (a >= 65520.0) return sign | 0x7c00;  // 65504 + half an ulp, which ties away from the odd 65504
  if (a < 0x1p-14) return sign | static_cast<uint16_t>(std::nearbyint(a * 0x1p24));  // subnormal (or 2^-14)
  int exponent = 0;
  const double mantissa = std::frexp(a, &exponent);                          // a = mantissa 2^exponent, [0.5, 1)
  auto q = static_cast<uint32_t>(std::nearbyint(std::ldexp(mantissa, 11)));  // [1024, 2048]
  if (q == 2048) {
    q = 1024;
    ++exponent;
  }
  return sign | static_cast<uint16_t>(((exponent - 1 + 15) << 10) | (q - 1024));
}

// ---- [launch] ----------------------------------------------------------------------------------

namespace {

// Runs warp `w`'s threads, lanes in a fresh order each pass, until none of them can move (all at
// the block barrier, exited, or stuck) or the block barrier releases.
void run_turn(BlockState& block, int w) {
  std::array<int, 32> lanes{};
  std::iota(lanes.begin(), lanes.end(), 0);
  for (;;) {
    const uint64_t before = block.progress;
    if (adversary().shuffle) std::shuffle(lanes.begin(), lanes.end(), block.random);
    for (int lane : lanes) {
      Fiber& fiber = block.fibers[static_cast<size_t>(w) * 32 + static_cast<size_t>(lane)];
      if (fiber.done || fiber.block_wait == block.block_barrier.generation) continue;
      block.running = &fiber;
      swapcontext(&block.scheduler, &fiber.context);
      if (!block.error.empty() || block.interval_ended) return;
    }
    if (block.progress == before) return;
  }
}

void run_block(BlockState& block) {
  const int n_warps = block.threads / 32;
  std::vector<int> order(static_cast<size_t>(n_warps));
  std::iota(order.begin(), order.end(), 0);
  for (;;) {
    const uint64_t before = block.progress;
    bool live = false;
    for (const Fiber& fiber : block.fibers) live = live || !fiber.done;
    if (!live) break;
    if (adversary().shuffle) std::shuffle(order.begin(), order.end(), block.random);
    block.interval_ended = false;
    for (int w : order) {
      block.running = nullptr;
      run_turn(block, w);
      if (!block.error.empty()) throw std::runtime_error(block.error);  // fibers left suspended are dropped
      note_plain_stores(w);
      if (block.interval_ended) break;
    }
    if (block.interval_ended && adversary().race_check) note_copies_in_flight();
    if (!block.interval_ended && block.progress == before) {
      int done = 0;
      for (const Fiber& fiber : block.fibers) done += fiber.done ? 1 : 0;
      fail("deadlock in " + std::string(block.name) + ", block (" + std::to_string(block.index.x) + ", " +
           std::to_string(block.index.y) + "): " + std::to_string(done) + " of " + std::to_string(block.threads) +
           " threads exited while the others wait at a barrier or warp collective");
    }
  }
  flush_atomics();
}

}  // namespace

void launch(Dim3 grid, int threads, int smem_bytes, const std::function<void()>& kernel, const char* name) {
  if (threads <= 0 || threads % 32 != 0) fail("threads per block must be a positive multiple of 32");
  const Adversary& settings = adversary();
  const uint64_t launch_number = ++g_launches;
  std::vector<Dim3> blocks;
  grid.z = std::max(grid.z, 1u);  // a 2-D grid
  for (unsigned bz = 0; bz < grid.z; ++bz)
    for (unsigned by = 0; by < grid.y; ++by)
      for (unsigned bx = 0; bx < grid.x; ++bx) blocks.push_back({bx, by, bz});
  std::mt19937_64 grid_random(mix(settings.seed ^ mix(launch_number)));
  if (settings.shuffle) std::shuffle(blocks.begin(), blocks.end(), grid_random);
  for (const Dim3& index : blocks) {
    BlockState block;
    block.grid = grid;
    block.block = {static_cast<unsigned>(threads), 1, 1};
    block.index = index;
    block.threads = threads;
    block.kernel = &kernel;
    block.name = name;
    block.launch = launch_number;
    block.random.seed(mix(settings.seed ^
                          mix(launch_number ^ mix((index.z * uint64_t{65536} + index.y) * uint64_t{65536} + index.x))));
    block.warps.resize(static_cast<size_t>(threads / 32));
    block.smem.assign(static_cast<size_t>(smem_bytes), 0xff);  // NaN bit patterns
    if (settings.race_check) {
      block.history.resize(block.smem.size());
      block.shadow = block.smem;
    }
    block.fibers.resize(static_cast<size_t>(threads));
    g_block = &block;
    std::vector<std::unique_ptr<char[]>>& stacks = stack_pool(static_cast<size_t>(threads));
    for (int i = 0; i < threads; ++i) {
      Fiber& fiber = block.fibers[static_cast<size_t>(i)];
      fiber.coordinates = {{static_cast<unsigned>(i), 0, 0}, index};
      fiber.stack = stacks[static_cast<size_t>(i)].get();
      getcontext(&fiber.context);
      fiber.context.uc_stack.ss_sp = fiber.stack;
      fiber.context.uc_stack.ss_size = kStackBytes;
      fiber.context.uc_link = &block.scheduler;
      makecontext(&fiber.context, fiber_main, 0);
    }
    try {
      run_block(block);
    } catch (...) {
      g_block = nullptr;
      throw;
    }
    g_block = nullptr;
  }
}

}  // namespace ringlab::emu
