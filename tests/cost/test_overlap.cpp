// The source material's overlap exercise (seeds/000_..., exercise 3) out of the cost model, with
// its erratum: 80 ms with overlap, not 82 — step 0 computes on the rank's own K/V, so P = 8 has 7
// transfers, all hidden behind 10 ms of compute.
#include <catch2/catch.hpp>

#include "sim/cost/overlap_exercise.hpp"

using namespace ringlab;

TEST_CASE("overlap exercise: compute 10 ms, transfer 2 ms, P = 8", "[cost][overlap]") {
  const RingOverlapFigures f = ring_overlap_figures(8, 0.010, 0.002);
  CHECK(f.transfers == 7);
  CHECK(f.with_overlap_s == Approx(0.080));
  CHECK(f.with_overlap_s != Approx(f.source_claim_s));
  CHECK(f.source_claim_s == Approx(0.082));
  CHECK(f.hidden_fraction == Approx(1.0));
  CHECK(f.exposed_s == Approx(0).margin(1e-12));
  CHECK(f.overhead_fraction == Approx(0).margin(1e-12));
  CHECK(f.naive_loop_s == Approx(0.096));
  CHECK(f.without_overlap_s == Approx(0.094));
  CHECK(f.speedup == Approx(0.094 / 0.080));  // the same plan with and without overlap
}

TEST_CASE("overlap exercise when communication outweighs compute", "[cost][overlap]") {
  // c = 2 ms, t = 10 ms: each of the P-1 transfers exposes t - c; the source's P (t - c) counts one
  // transfer too many.
  const RingOverlapFigures f = ring_overlap_figures(8, 0.002, 0.010);
  CHECK(f.with_overlap_s == Approx(7 * 0.010 + 0.002));
  CHECK(f.exposed_s == Approx(7 * (0.010 - 0.002)));
  CHECK(f.hidden_fraction == Approx(0.2));
  CHECK(f.naive_loop_s == Approx(8 * 0.012));
}

TEST_CASE("overlap exercise at other P, and bad input", "[cost][overlap]") {
  const int64_t P = GENERATE(1, 2, 3, 16);
  const RingOverlapFigures f = ring_overlap_figures(P, 0.005, 0.001);
  CHECK(f.transfers == P - 1);
  CHECK(f.with_overlap_s == Approx(P * 0.005));
  CHECK(f.naive_loop_s == Approx(P * 0.006));
  CHECK(f.without_overlap_s == Approx(P * 0.005 + (P - 1) * 0.001));
  CHECK_THROWS(ring_overlap_figures(0, 0.01, 0.002));
  CHECK_THROWS(ring_overlap_figures(4, -1, 0.002));
}
