// The source material's overlap exercise (exercise 3: "attention compute takes 10 ms and the K/V
// transfer 2 ms per ring step, P = 8") out of the cost model, with its erratum: 80 ms with
// overlap, not 82 — step 0 computes on the rank's own K/V, so P = 8 has 7 transfers, all hidden
// behind 10 ms of compute.
#include <catch2/catch.hpp>

#include "exercises/step_timing.hpp"

using namespace ringlab;
using namespace ringlab::exercises;

TEST_CASE("overlap exercise: compute 10 ms, transfer 2 ms, P = 8", "[timing][overlap]") {
  const RingTimes f = ring_times(8, 0.010, 0.002);
  CHECK(f.transfers == 7);
  CHECK(f.with_overlap == Approx(0.080));
  CHECK(f.with_overlap != Approx(f.source_claim));
  CHECK(f.source_claim == Approx(0.082));
  CHECK(f.hidden_fraction == Approx(1.0));
  CHECK(f.exposed == Approx(0).margin(1e-12));
  CHECK(f.overhead_fraction == Approx(0).margin(1e-12));
  CHECK(f.naive_loop == Approx(0.096));
  CHECK(f.without_overlap == Approx(0.094));
  CHECK(f.speedup == Approx(0.094 / 0.080));  // the same plan with and without overlap
}

TEST_CASE("overlap exercise when communication outweighs compute", "[timing][overlap]") {
  // c = 2 ms, t = 10 ms: each of the P-1 transfers exposes t - c; the source's P (t - c) counts one
  // transfer too many.
  const RingTimes f = ring_times(8, 0.002, 0.010);
  CHECK(f.with_overlap == Approx(7 * 0.010 + 0.002));
  CHECK(f.exposed == Approx(7 * (0.010 - 0.002)));
  CHECK(f.hidden_fraction == Approx(0.2));
  CHECK(f.naive_loop == Approx(8 * 0.012));
}

TEST_CASE("overlap exercise at other P, and bad input", "[timing][overlap]") {
  const int64_t P = GENERATE(1, 2, 3, 16);
  const RingTimes f = ring_times(P, 0.005, 0.001);
  CHECK(f.transfers == P - 1);
  CHECK(f.with_overlap == Approx(P * 0.005));
  CHECK(f.naive_loop == Approx(P * 0.006));
  CHECK(f.without_overlap == Approx(P * 0.005 + (P - 1) * 0.001));
  CHECK_THROWS(ring_times(0, 0.01, 0.002));
  CHECK_THROWS(ring_times(4, -1, 0.002));
}
