// Memory per rank by phase, against sizes worked out by hand from the buffers of
// sim/cost/memory_model.hpp.
#include <catch2/catch.hpp>

#include "sim/cost/memory_model.hpp"

using namespace ringlab;

namespace {

int64_t bytes_of(const PhaseMemory& m, MemoryCategory c) { return m.bytes[static_cast<size_t>(c)]; }

PlanSpec spec_of(Algorithm algo, bool backward) {
  PlanSpec spec;
  spec.algo = algo;
  spec.ranks = 4;
  spec.dims = {1, 4096, 8, 4, 64};  // GQA: 8 query heads, 4 kv heads
  spec.backward = backward;
  spec.element_bytes = 2;
  return spec;
}

}  // namespace

TEST_CASE("ring memory by phase: inputs, the K/V double buffer, accumulators, dK/dV slots", "[cost][memory]") {
  const MemoryReport m = memory_per_rank(build_plan(spec_of(Algorithm::ring, true)));
  // t = n = 1024 tokens per rank, h = 8, hk = 4, D = 64, bf16.
  const int64_t inputs = 1024 * (8 + 2 * 4) * 64 * 2;  // q, k, v
  const int64_t dout = 1024 * 8 * 64 * 2;
  const int64_t kv_slot = 2 * 1024 * 4 * 64 * 2, dkv_slot = 2 * 1024 * 4 * 64 * 4;
  const int64_t forward_acc = 1024 * 8 * (64 + 2) * 4, backward_acc = 1024 * 8 * (64 + 1) * 4;
  const int64_t out_lse = 1024 * 8 * (64 * 2 + 4);
  REQUIRE(m.phases.size() == 3);
  CHECK(m.phases[0].phase == "ring forward");
  CHECK(bytes_of(m.phases[0], MemoryCategory::inputs) == inputs);
  CHECK(bytes_of(m.phases[0], MemoryCategory::kv_slots) == 2 * kv_slot);
  CHECK(bytes_of(m.phases[0], MemoryCategory::accumulators) == forward_acc);
  CHECK(m.phases[0].total() == inputs + 2 * kv_slot + forward_acc);
  CHECK(m.phases[1].total() == inputs + forward_acc + out_lse);  // finalize: the slots are free
  const PhaseMemory& backward = m.phases[2];
  CHECK(bytes_of(backward, MemoryCategory::inputs) == inputs + dout);
  CHECK(bytes_of(backward, MemoryCategory::dkv_slots) == 3 * dkv_slot);  // two travelling + this step's
  CHECK(bytes_of(backward, MemoryCategory::accumulators) == backward_acc);
  CHECK(backward.total() == inputs + dout + 2 * kv_slot + 3 * dkv_slot + backward_acc + out_lse);
  CHECK(m.peak_bytes == backward.total());
  CHECK(m.peak_phase == 2);
}

TEST_CASE("all-gather holds every block's K/V while it computes", "[cost][memory]") {
  const MemoryReport m = memory_per_rank(build_plan(spec_of(Algorithm::allgather, false)));
  const int64_t kv_slot = 2 * 1024 * 4 * 64 * 2;
  REQUIRE(m.phases.size() == 3);
  CHECK(bytes_of(m.phases[0], MemoryCategory::gathered_kv) == 4 * kv_slot);
  CHECK(bytes_of(m.phases[1], MemoryCategory::gathered_kv) == 4 * kv_slot);
  CHECK(bytes_of(m.phases[2], MemoryCategory::gathered_kv) == 0);
  CHECK(m.peak_phase == 1);
  // Against the ring: the gathered K/V is R / 2 times the ring's double buffer.
  const MemoryReport ring = memory_per_rank(build_plan(spec_of(Algorithm::ring, false)));
  CHECK(bytes_of(m.phases[1], MemoryCategory::gathered_kv) == 2 * bytes_of(ring.phases[0], MemoryCategory::kv_slots));
}

TEST_CASE("Ulysses stages its all-to-alls and works on the whole sequence for its heads", "[cost][memory]") {
  const MemoryReport m = memory_per_rank(build_plan(spec_of(Algorithm::ulysses, true)));
  // t = 1024 local tokens; after the all-to-all: n = S = 4096 tokens, h = 2, hk = 1.
  const int64_t shard_qkv = 1024 * (8 + 2 * 4) * 64 * 2;
  const int64_t working = 4096 * (2 + 2 * 1) * 64 * 2;
  REQUIRE(m.phases.front().phase == "all-to-all q, k, v");
  CHECK(bytes_of(m.phases[0], MemoryCategory::staging) == 2 * shard_qkv);  // send and receive buffers
  CHECK(bytes_of(m.phases[0], MemoryCategory::working) == working);
  CHECK(bytes_of(m.phases[1], MemoryCategory::staging) == 0);
  CHECK(bytes_of(m.phases[1], MemoryCategory::kv_slots) == 2 * 4096 * 1 * 64 * 2);  // one slot: R = 1
  const PhaseMemory& grads = m.phases.back();
  CHECK(grads.phase == "all-to-all dq, dk, dv");
  CHECK(bytes_of(grads, MemoryCategory::staging) == 2 * 1024 * (8 + 2 * 4) * 64 * 4);
  CHECK(bytes_of(grads, MemoryCategory::outputs) > 0);
}
