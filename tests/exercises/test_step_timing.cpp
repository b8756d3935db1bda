// The exercises' timing questions (exercises/step_timing.hpp), answered by the cost model's dry
// executor and hardware description, against the closed forms: the ring's c + (P-1) max(c, t),
// and the overlap threshold F HKV e / (2 H BW).
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>

#include "exercises/step_timing.hpp"

using namespace ringlab;
using namespace ringlab::exercises;

TEST_CASE("equal steps: c + (P-1) max(c, t) with overlap, P c + (P-1) t without", "[timing]") {
  for (int64_t P : {1, 2, 3, 8, 16})
    for (double c : {1.0, 2.0, 10.0})
      for (double t : {0.5, 2.0, 3.0, 15.0}) {
        const RingTimes times = ring_times(P, c, t);
        CHECK(times.transfers == P - 1);
        CHECK(times.with_overlap == Approx(c + double(P - 1) * std::max(c, t)));
        CHECK(times.without_overlap == Approx(double(P) * c + double(P - 1) * t));
        CHECK(times.naive_loop == Approx(double(P) * (c + t)));
        CHECK(times.exposed == Approx(double(P - 1) * std::max(0.0, t - c)).margin(1e-12));
        if (P > 1) CHECK(times.hidden_fraction == Approx(t <= c ? 1.0 : c / t));
      }
}

TEST_CASE("the source's exercise 3: 80 ms, not 82", "[timing]") {
  const RingTimes times = ring_times(8, 10e-3, 2e-3);
  CHECK(times.with_overlap == Approx(80e-3));
  CHECK(times.without_overlap == Approx(94e-3));
  CHECK(times.hidden_fraction == Approx(1.0));
}

TEST_CASE("the overlap threshold is F HKV e / (2 H BW) when latency is zero", "[timing]") {
  AttentionDims mha;
  mha.heads = mha.kv_heads = 32, mha.dim = 128;
  const StepCostModel a100{312e12, 300e9, 0, 2};
  CHECK(overlap_threshold_tokens(a100, mha) == 1040);
  AttentionDims gqa = mha;
  gqa.kv_heads = 8;
  CHECK(overlap_threshold_tokens(a100, gqa) == 260);
  const StepCostModel h100{989e12, 450e9, 0, 2};
  CHECK(overlap_threshold_tokens(h100, mha) == static_cast<int64_t>(std::ceil(989e12 / 450e9)));
  // Latency only raises it, and at the threshold compute covers the transfer while one token less does not.
  const StepCostModel slow{312e12, 300e9, 20e-6, 2};
  const int64_t c = overlap_threshold_tokens(slow, mha);
  CHECK(c > 1040);
  CHECK(step_compute_seconds(slow, mha, c) >= step_transfer_seconds(slow, mha, c));
  CHECK(step_compute_seconds(slow, mha, c - 1) < step_transfer_seconds(slow, mha, c - 1));
}
