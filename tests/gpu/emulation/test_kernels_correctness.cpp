// The production attention kernels (gpu/kernels/*.cuh) executed by the CPU warp emulator and
// checked against the reference blockwise kernel and float64 — these run everywhere, GPU or not, so
// CI checks the kernels' index arithmetic, swizzles, fragment layouts, masks, tile skipping and GQA.
// Sizes are small and ragged on purpose (partial tiles, row ranges not starting at 0). The
// emulator's adversarial modes are on (warp_emulator.hpp): shuffled warp order, cp.async landing at
// random, the shared-memory race check, atomics in random order. Barrier deletion:
// test_kernels_barriers.cpp; rounding points: test_kernels_precision.cpp.
#include "tests/gpu/emulation/kernel_test_support.hpp"  // first: the warp emulator stands in for nvcc

#include <algorithm>
#include <cstdint>
#include <vector>

#include "gpu/kernels/elementwise.cuh"

namespace ringlab {
namespace {

using namespace kernel_test;

// The all-to-all row copies (elementwise.cuh): every word width the kernel picks (16, 8, 4 bytes,
// one element), index lists, head offsets, a batch, and grids too small and too large for the work,
// against a plain loop over (b, i, h, d).
struct CopyCase {
  int element_bytes, dim, batch, count, head_count;
  bool indexed;
  int base_offset;  // elements added to both bases: misaligns them
};

template <class E>
void check_row_copy(const CopyCase& k, unsigned blocks) {
  const int src_rows = k.count + 3, dst_rows = k.count + 5, src_heads = k.head_count + 2, dst_heads = k.head_count + 1;
  std::vector<E> src(static_cast<size_t>(k.batch) * src_rows * src_heads * k.dim + 8);
  for (size_t e = 0; e < src.size(); ++e) src[e] = static_cast<E>(e * 7 + 1);
  std::vector<E> dst(static_cast<size_t>(k.batch) * dst_rows * dst_heads * k.dim + 8, E(0));
  std::vector<E> want = dst;
  std::vector<int32_t> src_index, dst_index;
  for (int i = 0; i < k.count; ++i) {
    src_index.push_back((i * 5 + 2) % src_rows);
    dst_index.push_back(dst_rows - 1 - i);
  }
  gpu::RowCopy c;
  c.src = src.data() + k.base_offset;
  c.dst = dst.data() + k.base_offset;
  c.src_rows = src_rows, c.src_heads = src_heads, c.src_head0 = 1;
  c.dst_rows = dst_rows, c.dst_heads = dst_heads, c.dst_head0 = dst_heads - k.head_count;
  c.src_index = k.indexed ? src_index.data() : nullptr;
  c.dst_index = k.indexed ? dst_index.data() : nullptr;
  c.count = k.count, c.head_count = k.head_count, c.batch = k.batch, c.dim = k.dim, c.element_bytes = k.element_bytes;
  for (int b = 0; b < k.batch; ++b) {
    for (int i = 0; i < k.count; ++i) {
      const int si = k.indexed ? src_index[i] : i, di = k.indexed ? dst_index[i] : i;
      for (int h = 0; h < k.head_count; ++h) {
        for (int d = 0; d < k.dim; ++d) {
          want[k.base_offset + ((size_t(b) * dst_rows + di) * dst_heads + c.dst_head0 + h) * k.dim + d] =
              src[k.base_offset + ((size_t(b) * src_rows + si) * src_heads + c.src_head0 + h) * k.dim + d];
        }
      }
    }
  }
  emu::launch(
      emu::Dim3{blocks, 1, 1}, 64, 0, [&] { gpu::copy_token_rows_kernel<E>(c); }, "copy_token_rows");
  CHECK(dst == want);

  // copy_lse_rows on (B, heads, rows) fp32 tensors, the same RowCopy
  if constexpr (std::is_same_v<E, float>) {
    std::vector<float> lse_dst(dst.size(), 0.f), lse_want(dst.size(), 0.f);
    c.dst = lse_dst.data() + k.base_offset;
    for (int b = 0; b < k.batch; ++b) {
      for (int h = 0; h < k.head_count; ++h) {
        for (int i = 0; i < k.count; ++i) {
          const int si = k.indexed ? src_index[i] : i, di = k.indexed ? dst_index[i] : i;
          lse_want[k.base_offset + (size_t(b) * dst_heads + c.dst_head0 + h) * dst_rows + di] =
              src[k.base_offset + (size_t(b) * src_heads + c.src_head0 + h) * src_rows + si];
        }
      }
    }
    emu::launch(
        emu::Dim3{blocks, 1, 1}, 64, 0, [&] { gpu::copy_lse_rows_kernel(c); }, "copy_lse_rows");
    CHECK(lse_dst == lse_want);
  }
}

}  // namespace

TEST_CASE("emulated mma forward, bf16, D=64: causal positions, GQA, two merged blocks", "[gpu][emulated]") {
  check_forward<__nv_bfloat16, 64>(Kind::bf16, causal_problem(), kBf16Out, kBf16Lse);
}

TEST_CASE("emulated mma forward, fp16, D=128: causal, no skip", "[gpu][emulated]") {
  BlockProblem pr = causal_problem();
  pr.skip = false;
  check_forward<__half, 128>(Kind::fp16, pr, kFp16Out, kFp16Lse);
}

TEST_CASE("emulated mma forward, bf16, D=128: full mask, batch 2", "[gpu][emulated]") {
  BlockProblem pr = causal_problem();
  pr.causal = false;
  pr.B = 2;
  pr.H = 2;
  pr.HKV = 1;
  check_forward<__nv_bfloat16, 128>(Kind::bf16, pr, kBf16Out, kBf16Lse);
}

TEST_CASE("forward block order: heaviest tiles first, by sections of heads, each block once", "[gpu][order]") {
  // forward_launch's grid read back by forward_block, in the order blocks start (x, then y, then
  // z): every (tile, head) once; under the causal mask every head of a section at a tile before
  // any at a lighter one, sections one after the other; otherwise the plain (tiles, B H) grid.
  struct Case {
    bool causal;
    int tiles, batch, heads, kv_heads, keys;
    int64_t bytes;
    int section;  // expected heads per section (0: the plain grid)
  };
  const int64_t kv_head = int64_t(1000) * 64 * 4;  // K and V of 1000 keys at D = 64, 2-byte elements
  const Case cases[] = {
      {true, 5, 2, 6, 3, 1000, 24 << 20, 12},                           // everything in one section
      {true, 5, 2, 6, 3, 1000, kv_head, 2},                             // one kv head's bytes: its 2 query heads
      {true, 7, 3, 4, 4, 1000, 3 * kv_head, 3},                         // 3 heads of 12: sections of 3
      {true, 4, 1, 5, 5, 1000, 2 * kv_head, 1},                         // 5 heads: 2 does not divide, so 1
      {true, 1, 2, 2, 1, 1000, kv_head, 2},                             // one tile
      {false, 5, 2, 6, 3, 1000, kv_head, 0},                            // no causal mask: the plain grid
      {true, gpu::kMaxTilesHeavyFirst + 1, 1, 1, 1, 1000, kv_head, 0},  // too many tiles for y
  };
  for (const Case& c : cases) {
    ForwardParams p;
    p.a.causal = c.causal, p.a.batch = c.batch, p.a.heads = c.heads, p.a.kv_heads = c.kv_heads, p.a.dim = 64;
    p.a.kv_begin = 0, p.a.kv_end = c.keys;
    const gpu::ForwardLaunch launch = gpu::forward_launch(p, c.tiles, c.bytes);
    const gpu::LaunchGrid g = launch.grid;
    const int bh = c.batch * c.heads;
    INFO("tiles " << c.tiles << ", B H " << bh << ", grid " << g.x << " x " << g.y << " x " << g.z);
    REQUIRE(int64_t(g.x) * g.y * g.z == int64_t(c.tiles) * bh);
    CHECK(launch.params.heavy_first == (c.section > 0));
    if (c.section == 0) {
      CHECK((g.x == c.tiles && g.y == bh && g.z == 1));
      if (c.tiles > 1000) continue;  // the plain grid's order is x itself; not walked
    } else {
      CHECK((g.x == c.section && g.y == c.tiles && g.z == bh / c.section));
    }
    std::vector<int> seen(static_cast<size_t>(c.tiles) * bh, 0);
    int last_section = -1, last_tile = c.tiles;
    for (int z = 0; z < g.z; ++z)
      for (int y = 0; y < g.y; ++y)
        for (int x = 0; x < g.x; ++x) {
          const gpu::BlockOrder b = gpu::forward_block(launch.params.heavy_first, x, y, z, g.x, g.y);
          REQUIRE((b.tile >= 0 && b.tile < c.tiles && b.head >= 0 && b.head < bh));
          ++seen[static_cast<size_t>(b.head) * c.tiles + b.tile];
          if (c.section == 0) continue;
          const int section = b.head / c.section;
          CHECK(section >= last_section);  // sections in order
          if (section != last_section) last_tile = c.tiles;
          CHECK(b.tile <= last_tile);  // within a section, never a heavier tile after a lighter one
          last_section = section, last_tile = b.tile;
        }
    CHECK(std::count(seen.begin(), seen.end(), 1) == static_cast<long>(seen.size()));
  }
  // What bench_gpu_kernels times the order against: the plain grid, asked for.
  ForwardParams p;
  p.a.causal = true, p.a.batch = 2, p.a.heads = 4, p.a.kv_heads = 4, p.a.kv_end = 1000;
  p.plain_order = true;
  const gpu::ForwardLaunch plain = gpu::forward_launch(p, 5);
  CHECK_FALSE(plain.params.heavy_first);
  CHECK((plain.grid.x == 5 && plain.grid.y == 8 && plain.grid.z == 1));
}

TEST_CASE("emulated mma forward, bf16, D=64: causal, heaviest tiles first in sections of 2 heads", "[gpu][emulated]") {
  // Three query tiles of 128 rows, B H = 8 in sections of 2 heads (grid 2 x 3 x 4): the kernel
  // reads its tile and head back from the reordered grid.
  BlockProblem pr;
  pr.B = 2, pr.H = 4, pr.HKV = 2, pr.D = 64;
  pr.Sq = pr.Sk = 320;
  pr.q_rows = {0, 320};
  pr.kv_blocks = {{0, 150}, {150, 320}};
  pr.q_pos = positions(pr.Sq, 0, 0);
  pr.k_pos = positions(pr.Sk, 0, 0);
  pr.order_section_bytes = int64_t(170) * 64 * 4;  // the larger block's K and V of one kv head
  check_forward<__nv_bfloat16, 64>(Kind::bf16, pr, kBf16Out, kBf16Lse);
}

TEST_CASE("emulated mma backward, bf16, D=64: causal positions, GQA", "[gpu][emulated]") {
  check_backward<__nv_bfloat16, 64>(Kind::bf16, causal_problem(), kBf16Grad);
}

TEST_CASE("emulated mma backward, bf16, D=64: causal key blocks whose first query tile is far in (the prologue's scan)",
          "[gpu][emulated][mask]") {
  // 10 query tiles of 128 rows; the prologue classifies 8 per round. Keys 896-1023 first see query
  // tile 7 (the first round's last), keys 1152-1279 tile 9 (the second round's second): a scan that
  // took a round's first tile for its answer, or stopped a tile late, fails here.
  BlockProblem pr = one_block(1280, 1280, 64);
  pr.causal = true;
  pr.kv_blocks = {{896, 1024}, {1152, 1280}};
  check_backward<__nv_bfloat16, 64>(Kind::bf16, pr, kBf16Grad);
}

TEST_CASE("emulated mma backward, fp16, D=128: causal, no skip, two blocks", "[gpu][emulated]") {
  BlockProblem pr = causal_problem();
  pr.skip = false;
  check_backward<__half, 128>(Kind::fp16, pr, kFp16Grad);
}

TEST_CASE("emulated mma backward, each launch the only writer of its keys' dk, dv: stored, not added",
          "[gpu][emulated][mask]") {
  // dk and dv hold garbage in the blocks' key rows; BackwardParams::store_dkv has each launch store
  // them, zeros for keys no query sees (the causal blocks below include key tiles whose every query
  // tile is skipped, which end without running a tile).
  BlockProblem causal = causal_problem();
  causal.HKV = causal.H;
  causal.store_dkv = true;
  check_backward<__nv_bfloat16, 64>(Kind::bf16, causal, kBf16Grad);
  check_backward<__half, 128>(Kind::fp16, causal, kFp16Grad);
  BlockProblem future = causal_chunks(64);
  future.HKV = future.H;
  future.kv_blocks = {{0, 256}, {256, 384}};  // the second lies wholly in the queries' future
  future.store_dkv = true;
  check_backward<__nv_bfloat16, 128>(Kind::bf16, future, kBf16Grad);
}

TEST_CASE("emulated mma backward, store_dkv under documents and padding, and where no query sees a key",
          "[gpu][emulated][mask]") {
  const size_t index = GENERATE(0, 6, 8);  // documents, queries that see no key, padding
  INFO(kMaskCases[index].name);
  BlockProblem masked = masked_problem(kMaskCases[index]);
  masked.HKV = masked.H;
  masked.store_dkv = true;
  check_backward<__nv_bfloat16, 64>(Kind::bf16, masked, kBf16Grad);
}

TEST_CASE("emulated mma backward, the garbage shows where store_dkv is withheld, and GQA or fp32 refuse it",
          "[gpu][emulated]") {
  BlockProblem pr = causal_problem();
  pr.HKV = pr.H;
  pr.store_withheld = true;  // the negative control of the test above
  const Verdict added = run_backward<__nv_bfloat16, 64>(Kind::bf16, pr, kBf16Grad);
  INFO(added.describe);
  CHECK_FALSE(added.ok);
  pr.store_withheld = false, pr.store_dkv = true;  // the same problem passes with it
  CHECK(run_backward<__nv_bfloat16, 64>(Kind::bf16, pr, kBf16Grad).ok);
  pr.HKV = 2;  // a GQA group's heads add into one kv head: refused, one line
  CHECK_THROWS_WITH((run_backward<__nv_bfloat16, 64>(Kind::bf16, pr, kBf16Grad)), Catch::Contains("needs H = HKV"));
  pr.HKV = pr.H;
  CHECK_THROWS_WITH((run_backward<float, 0>(Kind::fp32, pr, kFp32Grad)), Catch::Contains("the fp32 kernel adds"));
}

TEST_CASE("emulated fp32 forward and backward, D=40: causal positions, GQA", "[gpu][emulated]") {
  BlockProblem pr = causal_problem();
  pr.D = 40;
  check_forward<float, 0>(Kind::fp32, pr, kFp32Out, kFp32Lse);
  check_backward<float, 0>(Kind::fp32, pr, kFp32Grad);
}

TEST_CASE("emulated fp32 forward and backward, D=128: full mask", "[gpu][emulated]") {
  BlockProblem pr = causal_problem();
  pr.D = 128;
  pr.causal = false;
  check_forward<float, 0>(Kind::fp32, pr, kFp32Out, kFp32Lse);
  check_backward<float, 0>(Kind::fp32, pr, kFp32Grad);
}

TEST_CASE("emulated mma forward, tile kinds classified in chunks of 1 and 2 key tiles", "[gpu][emulated][mask]") {
  // The production chunk (256 tiles) is never crossed at these sizes; small chunks cross it at
  // every tile or every other one, with skipped tiles and whole skipped chunks among them.
  check_forward<__nv_bfloat16, 64, Forward::fa2, 1>(Kind::bf16, causal_problem(), kBf16Out, kBf16Lse);
  check_forward<__half, 128, Forward::fa2, 2>(Kind::fp16, causal_chunks(128), kFp16Out, kFp16Lse);
  const MaskCase& c = kMaskCases[GENERATE(range(size_t{0}, std::size(kMaskCases)))];
  INFO(c.name);
  check_forward<__nv_bfloat16, 64, Forward::fa2, 1>(Kind::bf16, masked_problem(c), kBf16Out, kBf16Lse);
}

TEST_CASE("emulated mma forward, the last block's launch finalizes: out and lse written by the kernel",
          "[gpu][emulated][mask]") {
  BlockProblem causal = causal_problem();
  causal.fused_finalize = true;
  check_forward<__nv_bfloat16, 64>(Kind::bf16, causal, kBf16Out, kBf16Lse);
  causal.skip = false;
  check_forward<__half, 128>(Kind::fp16, causal, kFp16Out, kFp16Lse);
  // The last block lies wholly in the queries' future: every tile skipped, out and lse come from
  // the state the first block left.
  BlockProblem future = causal_chunks(128);
  future.kv_blocks = {{0, 256}, {256, 384}};
  future.fused_finalize = true;
  check_forward<__nv_bfloat16, 128>(Kind::bf16, future, kBf16Out, kBf16Lse);
  const MaskCase& c = kMaskCases[GENERATE(range(size_t{0}, std::size(kMaskCases)))];
  INFO(c.name);
  BlockProblem masked = masked_problem(c);
  masked.fused_finalize = true;
  check_forward<__nv_bfloat16, 64>(Kind::bf16, masked, kBf16Out, kBf16Lse);
}

TEST_CASE("emulated mma forward, the first block's launch starts its rows: the stale state is never read",
          "[gpu][emulated][mask]") {
  // The rows' state holds garbage (no init_accumulator), the first launch is told to start them.
  BlockProblem causal = causal_problem();
  causal.fused_init = true;
  check_forward<__nv_bfloat16, 64>(Kind::bf16, causal, kBf16Out, kBf16Lse);
  check_forward<__half, 128>(Kind::fp16, causal, kFp16Out, kFp16Lse);
  // A rank's only block: started and finalised by one launch, the state neither read nor written.
  BlockProblem only = causal_problem();
  only.kv_blocks = {{0, 100}};
  only.fused_init = only.fused_finalize = true;
  check_forward<__nv_bfloat16, 64>(Kind::bf16, only, kBf16Out, kBf16Lse);
  // The first block lies wholly in the queries' future: every tile skipped, and still the launch
  // must store the empty state for the second block to merge into.
  BlockProblem future = causal_chunks(64);
  future.kv_blocks = {{256, 384}, {0, 256}};
  future.fused_init = true;
  check_forward<__nv_bfloat16, 64>(Kind::bf16, future, kBf16Out, kBf16Lse);
  future.fused_finalize = true;
  check_forward<__half, 64>(Kind::fp16, future, kFp16Out, kFp16Lse);
  // General masks: documents, a window inside a tile, queries that see no key (the first block
  // stores their empty state), padding; the last two finalised by their last launch as well. (The
  // init touches only the state's load and store: the other cases add emulation time, not paths.)
  const size_t index = GENERATE(0, 2, 6, 8);
  INFO(kMaskCases[index].name);
  BlockProblem masked = masked_problem(kMaskCases[index]);
  masked.fused_init = true;
  masked.fused_finalize = index >= 6;
  check_forward<__nv_bfloat16, 64>(Kind::bf16, masked, kBf16Out, kBf16Lse);
}

TEST_CASE("emulated mma forward, the stale state shows where the first launch is not told to start its rows",
          "[gpu][emulated]") {
  // The negative control of the test above: the same garbage state, ForwardParams::init withheld.
  BlockProblem pr = causal_problem();
  pr.init_withheld = true;
  const Verdict loaded = run_forward<__nv_bfloat16, 64, Forward::fa2, 256>(Kind::bf16, pr, kBf16Out, kBf16Lse);
  INFO(loaded.describe);
  CHECK_FALSE(loaded.ok);
  pr.fused_finalize = true;
  CHECK_FALSE(run_forward<__nv_bfloat16, 64, Forward::fa2, 256>(Kind::bf16, pr, kBf16Out, kBf16Lse).ok);
  pr.init_withheld = false, pr.fused_init = true;  // and the same problem passes with it
  CHECK(run_forward<__nv_bfloat16, 64, Forward::fa2, 256>(Kind::bf16, pr, kBf16Out, kBf16Lse).ok);
}

// ---- the general mask: documents, window, padding ----------------------------------------------

TEST_CASE("emulated mma forward and backward, bf16, D=64: documents, window, padding", "[gpu][emulated][mask]") {
  const MaskCase& c = kMaskCases[GENERATE(range(size_t{0}, std::size(kMaskCases)))];
  INFO(c.name);
  check_forward<__nv_bfloat16, 64>(Kind::bf16, masked_problem(c), kBf16Out, kBf16Lse);
  check_backward<__nv_bfloat16, 64>(Kind::bf16, masked_problem(c), kBf16Grad);
}

TEST_CASE("emulated mma forward and backward, fp16, D=128: documents, window, padding", "[gpu][emulated][mask]") {
  const MaskCase& c = kMaskCases[GENERATE(1, 2, 5, 7, 8)];  // the rest at D=128 below: D=128 is slow to emulate
  INFO(c.name);
  check_forward<__half, 128>(Kind::fp16, masked_problem(c), kFp16Out, kFp16Lse);
  check_backward<__half, 128>(Kind::fp16, masked_problem(c), kFp16Grad);
}

TEST_CASE("emulated mma forward and backward, bf16, D=128: documents and window", "[gpu][emulated][mask]") {
  const MaskCase& c = kMaskCases[GENERATE(0, 3, 4, 6)];
  INFO(c.name);
  check_forward<__nv_bfloat16, 128>(Kind::bf16, masked_problem(c), kBf16Out, kBf16Lse);
  check_backward<__nv_bfloat16, 128>(Kind::bf16, masked_problem(c), kBf16Grad);
}

TEST_CASE("emulated fp32 forward and backward, D=40 and 128: documents, window, padding", "[gpu][emulated][mask]") {
  const MaskCase& c = kMaskCases[GENERATE(range(size_t{0}, std::size(kMaskCases)))];
  INFO(c.name);
  BlockProblem pr = masked_problem(c);
  pr.D = 40;
  check_forward<float, 0>(Kind::fp32, pr, kFp32Out, kFp32Lse);
  check_backward<float, 0>(Kind::fp32, pr, kFp32Grad);
  pr.D = 128;
  pr.H = 2, pr.HKV = 1;
  check_forward<float, 0>(Kind::fp32, pr, kFp32Out, kFp32Lse);
  check_backward<float, 0>(Kind::fp32, pr, kFp32Grad);
}

TEST_CASE("emulated all-to-all row copies: 16/8/4-byte words and single elements, indexed, any grid",
          "[gpu][emulated][copy]") {
  const CopyCase cases[] = {
      {2, 64, 2, 5, 3, true, 0},    // bf16, D = 64: 128-byte rows, 16-byte words
      {2, 128, 1, 3, 2, false, 0},  // 16-byte words, no index lists
      {2, 12, 2, 4, 3, true, 0},    // 24-byte rows: 8-byte words
      {2, 6, 1, 5, 2, true, 0},     // 12-byte rows: 4-byte words
      {2, 3, 2, 3, 2, true, 0},     // 6-byte rows: single elements
      {2, 64, 1, 3, 2, true, 1},    // bases off by 2 bytes: single elements
      {4, 40, 2, 3, 3, true, 0},    // fp32, D = 40: 160-byte rows, 16-byte words
      {4, 5, 1, 4, 3, true, 0},     // 20-byte rows: 4-byte words
      {4, 32, 1, 3, 2, false, 2},   // bases off by 8 bytes: 8-byte words
  };
  for (const CopyCase& k : cases) {
    for (const unsigned blocks : {1U, 3U, 64U}) {  // 64 threads, 192, and more threads than words
      CAPTURE(k.element_bytes, k.dim, k.batch, k.count, k.head_count, k.indexed, k.base_offset, blocks);
      if (k.element_bytes == 2) {
        check_row_copy<uint16_t>(k, blocks);
      } else {
        check_row_copy<float>(k, blocks);
      }
    }
  }
}

}  // namespace ringlab
