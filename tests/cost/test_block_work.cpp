// BlockClassifier, the dry executor's allocation-free fast path, against its definition
// resolve_compute (sim/plan/plan.cpp) on every (ring position, key block) of many plans: shape, visible
// pairs, kernel rows and computed pairs must be identical, and the tile areas must equal a brute
// force walk of the kernel's tiles over the block's real positions.
#include <catch2/catch.hpp>

#include <algorithm>
#include <tuple>

#include "reference/error.hpp"
#include "sim/cost/block_work.hpp"
#include "tests/plan/plan_cases.hpp"

using namespace ringlab;

namespace {

// The kernel's tile decisions (reference/flash_attention.cpp), by brute force over positions.
std::pair<int64_t, int64_t> brute_force_tiles(const std::vector<int64_t>& q_pos, const std::vector<int64_t>& k_pos,
                                              const KernelBlock& kb, int64_t q_tile, int64_t kv_tile) {
  int64_t full = 0, masked = 0;
  for (int64_t qb = kb.q_rows.begin; qb < kb.q_rows.end; qb += q_tile) {
    const int64_t qe = std::min(kb.q_rows.end, qb + q_tile);
    const auto [q_lo, q_hi] = std::minmax_element(q_pos.begin() + qb, q_pos.begin() + qe);
    for (int64_t kb0 = kb.kv_rows.begin; kb0 < kb.kv_rows.end; kb0 += kv_tile) {
      const int64_t ke = std::min(kb.kv_rows.end, kb0 + kv_tile);
      const auto [k_lo, k_hi] = std::minmax_element(k_pos.begin() + kb0, k_pos.begin() + ke);
      const int64_t area = (qe - qb) * (ke - kb0);
      if (kb.mask.general()) {
        // Whether any / every query of the tile sees any / every position in the key tile's range.
        bool any = false, all = true;
        for (int64_t i = qb; i < qe; ++i)
          for (int64_t p = *k_lo; p <= *k_hi; ++p) {
            const bool v = kb.mask.visible(q_pos[i], p);
            any |= v, all &= v;
          }
        if (all)
          full += area;
        else if (any || !kb.skip_masked_tiles)
          masked += area;
        continue;
      }
      if (kb.mask.none() || *k_hi <= *q_lo) {
        full += area;
      } else if (*k_lo > *q_hi && kb.skip_masked_tiles) {
        // skipped
      } else {
        masked += area;
      }
    }
  }
  return {full, masked};
}

void check_plan(const PlanSpec& spec, int64_t q_tile, int64_t kv_tile) {
  const Plan plan = build_plan(spec);
  BlockClassifier classifier(plan, q_tile, kv_tile);
  INFO(plan.spec().describe() << " tiles " << q_tile << "x" << kv_tile);
  for (int64_t g = 0; g < plan.ring(); ++g) {
    const std::vector<int64_t> q_positions = plan.block_positions(g);
    for (int64_t row = 0; row < plan.block_tokens(); ++row) REQUIRE(classifier.position(g, row) == q_positions[row]);
    for (int64_t kv = 0; kv < plan.ring(); ++kv) {
      INFO("q block " << g << ", kv block " << kv);
      for (Pass pass : {Pass::forward, Pass::backward}) {
        const ComputeOp op = resolve_compute(plan, plan.rank_at(g, 0), kv, pass);
        const BlockWork work = classifier.classify(g, kv);
        REQUIRE(block_shape_name(work.shape) == std::string(block_shape_name(op.shape)));
        REQUIRE(work.pairs == op.pairs);
        REQUIRE(work.computed_pairs == op.computed_pairs);
        REQUIRE(work.kernels == static_cast<int>(op.kernels.size()));
        if (op.kernels.empty()) {
          REQUIRE(work.full_area + work.masked_area == 0);
          continue;
        }
        const KernelBlock& kb = op.kernels.front();
        REQUIRE(work.q_rows == kb.q_rows);
        REQUIRE(work.kv_rows == kb.kv_rows);
        const std::vector<int64_t> q_pos =
            kb.erratum_local_query_index ? iota_positions(plan.block_tokens()) : q_positions;
        const auto [full, masked] = brute_force_tiles(q_pos, plan.block_positions(kv), kb, q_tile, kv_tile);
        REQUIRE(work.full_area == full);
        REQUIRE(work.masked_area == masked);
      }
    }
  }
}

// S = 72P, H = 2P, HKV = P (GQA), D = 8; the hybrid at U = 2 where P is even.
PlanSpec mixed_spec(Algorithm algo, LayoutKind layout, int64_t P, bool causal, bool skip) {
  return test::matrix_spec(algo, layout, P, {1, 72 * P, P * 2, P, 8}, causal, skip, false);
}

}  // namespace

TEST_CASE("block classification equals resolve_compute on every block", "[cost][blocks]") {
  const LayoutKind layout = GENERATE(LayoutKind::contiguous, LayoutKind::zigzag, LayoutKind::striped);
  const int64_t P = GENERATE(1, 2, 3, 4, 6, 8);
  const auto [causal, skip] = GENERATE(std::tuple{false, true}, std::tuple{true, true}, std::tuple{true, false});
  const int64_t block = GENERATE(0, 1, 2, 3);
  const Algorithm algo = GENERATE(Algorithm::ring, Algorithm::hybrid, Algorithm::ulysses);
  PlanSpec spec = mixed_spec(algo, layout, P, causal, skip);
  spec.block = block;
  try {
    (void)build_plan(spec);
  } catch (const UsageError&) {
    return;  // a block size the layout cannot use at this P: nothing to compare
  }
  check_plan(spec, 4, 8);
  check_plan(spec, 128, 256);
}

TEST_CASE("block classification equals resolve_compute under windows and documents", "[cost][blocks][mask]") {
  const LayoutKind layout =
      GENERATE(LayoutKind::contiguous, LayoutKind::zigzag, LayoutKind::striped, LayoutKind::balanced);
  const int64_t P = GENERATE(2, 3, 4);
  const auto [causal, window, skip] = GENERATE(std::tuple{true, int64_t{0}, true}, std::tuple{false, int64_t{11}, true},
                                               std::tuple{true, int64_t{30}, false});
  const Algorithm algo = GENERATE(Algorithm::ring, Algorithm::hybrid);
  PlanSpec spec = mixed_spec(algo, layout, P, causal, skip);
  spec.window = window;
  spec.documents = test::test_documents(layout, 72 * P, P);
  check_plan(spec, 4, 8);
  check_plan(spec, 16, 32);
}

TEST_CASE("block classification matches the erratum mask's resolve_compute", "[cost][blocks]") {
  const LayoutKind layout = GENERATE(LayoutKind::contiguous, LayoutKind::zigzag, LayoutKind::striped);
  const int64_t P = GENERATE(2, 3, 4);
  PlanSpec spec;
  spec.layout = layout;
  spec.ranks = P;
  spec.dims = {1, 48 * P, 2, 2, 8};
  spec.causal = true;
  spec.erratum = Erratum::kv_offset_mask;
  check_plan(spec, 4, 8);
}

TEST_CASE("a contiguous causal ring classifies blocks as full, diagonal and skipped", "[cost][blocks]") {
  PlanSpec spec;
  spec.ranks = 4;
  spec.dims = {1, 1024, 2, 2, 16};
  spec.causal = true;
  const Plan plan = build_plan(spec);
  BlockClassifier classifier(plan, 128, 256);
  const BlockWork past = classifier.classify(3, 0), diagonal = classifier.classify(2, 2),
                  future = classifier.classify(0, 3);
  CHECK(past.shape == BlockShape::full);
  CHECK(past.full_area == 256 * 256);
  CHECK(diagonal.shape == BlockShape::diagonal);
  CHECK(diagonal.pairs == 256 * 257 / 2);
  // 256 rows: two query tiles of 128 against one key tile of 256, both cut by the diagonal.
  CHECK(diagonal.full_area == 0);
  CHECK(diagonal.masked_area == 256 * 256);
  CHECK(future.shape == BlockShape::skipped);
  CHECK(future.kernels == 0);
}
