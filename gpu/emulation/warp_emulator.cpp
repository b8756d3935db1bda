// The fiber scheduler and the lane-by-lane primitives of warp_emulator.hpp. Sections:
//   [fibers]      ucontext fibers, the round-robin scheduler, deadlock detection
//   [barriers]    block barrier and warp exchange (double-buffered slots)
//   [primitives]  shuffles, ldmatrix, mma, cp.async
//   [launch]      grid loop
#include "gpu/emulation/warp_emulator.hpp"

#include <ucontext.h>

#include <array>
#include <deque>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace ringlab::emu {
namespace {

// ---- [fibers] ----------------------------------------------------------------------------------

constexpr size_t kStackBytes = 128 * 1024;
constexpr int kSlotBytes = 32;

struct PendingCopy {
  void* destination;
  const void* source;
  bool valid;
};

struct Fiber {
  ThreadCoordinates coordinates;
  ucontext_t context{};
  char* stack = nullptr;  // from the thread's stack pool
  bool done = false;
  std::deque<std::vector<PendingCopy>> committed;  // cp.async groups, oldest first
  std::vector<PendingCopy> open;                   // issued since the last commit
};

struct Barrier {
  int arrived = 0;
  uint64_t generation = 0;
};

struct WarpState {
  Barrier barrier;
  std::array<std::array<std::array<unsigned char, kSlotBytes>, 32>, 2> slots{};
};

struct BlockState {
  Dim3 grid, block;
  int threads = 0;
  std::vector<Fiber> fibers;
  std::vector<WarpState> warps;
  Barrier block_barrier;
  std::vector<unsigned char> smem;
  const std::function<void()>* kernel = nullptr;
  ucontext_t scheduler{};
  Fiber* running = nullptr;
  uint64_t progress = 0;  // arrivals, releases and exits: a pass without any is a deadlock
  std::string error;      // set by a fiber; the scheduler throws it
};

thread_local BlockState* g_block = nullptr;

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
  WarpState& warp = g_block->warps[static_cast<size_t>(warp_of_running())];
  auto& slots = warp.slots[warp.barrier.generation % 2];
  std::memcpy(slots[static_cast<size_t>(lane_of_running())].data(), mine, size);
  wait_barrier(warp.barrier, 32);
  return slots;
}

void check_smem(const void* address, size_t bytes, const char* what) {
  const auto* p = static_cast<const unsigned char*>(address);
  const unsigned char* base = g_block->smem.data();
  if (p < base || p + bytes > base + g_block->smem.size()) {
    fail(std::string(what) + ": address outside the block's " + std::to_string(g_block->smem.size()) +
         " bytes of shared memory (offset " + std::to_string(p - base) + ")");
  }
  if ((p - base) % 16 != 0) fail(std::string(what) + ": shared address not 16-byte aligned");
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

// ---- [primitives] ------------------------------------------------------------------------------

const ThreadCoordinates& current() { return g_block->running->coordinates; }
Dim3 block_dim() { return g_block->block; }
Dim3 grid_dim() { return g_block->grid; }
unsigned char* dynamic_shared_memory() { return g_block->smem.data(); }

void sync_block() { wait_barrier(g_block->block_barrier, g_block->threads); }

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

void ldmatrix(uint32_t (&r)[4], const void* row_address, bool trans) {
  check_smem(row_address, 16, trans ? "ldmatrix.trans" : "ldmatrix");
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

void cp_async(void* smem_destination, const void* global_source, bool valid) {
  check_smem(smem_destination, 16, "cp.async");
  if (valid && reinterpret_cast<uintptr_t>(global_source) % 16 != 0)
    fail("cp.async: global source not 16-byte aligned");
  g_block->running->open.push_back({smem_destination, global_source, valid});
}

void cp_async_commit() {
  Fiber& fiber = *g_block->running;
  fiber.committed.push_back(std::move(fiber.open));
  fiber.open.clear();
}

void cp_async_wait(int pending) {
  Fiber& fiber = *g_block->running;
  while (static_cast<int>(fiber.committed.size()) > pending) {
    for (const PendingCopy& copy : fiber.committed.front()) {
      if (copy.valid) {
        std::memcpy(copy.destination, copy.source, 16);
      } else {
        std::memset(copy.destination, 0, 16);
      }
    }
    fiber.committed.pop_front();
  }
}

// ---- [launch] ----------------------------------------------------------------------------------

void launch(Dim3 grid, int threads, int smem_bytes, const std::function<void()>& kernel) {
  if (threads <= 0 || threads % 32 != 0) fail("threads per block must be a positive multiple of 32");
  for (unsigned by = 0; by < grid.y; ++by)
    for (unsigned bx = 0; bx < grid.x; ++bx) {
      BlockState block;
      block.grid = grid;
      block.block = {static_cast<unsigned>(threads), 1, 1};
      block.threads = threads;
      block.kernel = &kernel;
      block.warps.resize(static_cast<size_t>(threads / 32));
      block.smem.assign(static_cast<size_t>(smem_bytes), 0xff);  // NaN bit patterns
      block.fibers.resize(static_cast<size_t>(threads));
      g_block = &block;
      std::vector<std::unique_ptr<char[]>>& stacks = stack_pool(static_cast<size_t>(threads));
      for (int i = 0; i < threads; ++i) {
        Fiber& fiber = block.fibers[static_cast<size_t>(i)];
        fiber.coordinates = {{static_cast<unsigned>(i), 0, 0}, {bx, by, 0}};
        fiber.stack = stacks[static_cast<size_t>(i)].get();
        getcontext(&fiber.context);
        fiber.context.uc_stack.ss_sp = fiber.stack;
        fiber.context.uc_stack.ss_size = kStackBytes;
        fiber.context.uc_link = &block.scheduler;
        makecontext(&fiber.context, fiber_main, 0);
      }
      for (;;) {
        const uint64_t before = block.progress;
        bool live = false;
        for (Fiber& fiber : block.fibers) {
          if (fiber.done) continue;
          live = true;
          block.running = &fiber;
          swapcontext(&block.scheduler, &fiber.context);
          if (!block.error.empty()) break;
        }
        if (!block.error.empty()) {
          g_block = nullptr;
          throw std::runtime_error(block.error);  // fibers left suspended are simply dropped
        }
        if (!live) break;
        if (block.progress == before) {
          int done = 0;
          for (const Fiber& fiber : block.fibers) done += fiber.done ? 1 : 0;
          g_block = nullptr;
          fail("deadlock in block (" + std::to_string(bx) + ", " + std::to_string(by) + "): " + std::to_string(done) +
               " of " + std::to_string(threads) +
               " threads exited while the others wait at a barrier or warp collective");
        }
      }
      g_block = nullptr;
    }
}

}  // namespace ringlab::emu
