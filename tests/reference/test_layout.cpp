// Layouts: permutations of the tokens, the source material's zig-zag example, balanced causal
// work for zigzag and striped, closed-form pair counts against brute force, gather/scatter.
#include <algorithm>
#include <catch2/catch.hpp>

#include "reference/error.hpp"
#include "reference/layout.hpp"

using namespace ringlab;

namespace {

int64_t causal_work(const Layout& layout, int64_t rank) {
  int64_t pairs = 0;
  for (int64_t kv = 0; kv < layout.ranks(); ++kv) pairs += layout.causal_pairs(rank, kv);
  return pairs;
}

}  // namespace

TEST_CASE("every layout is a permutation of the tokens", "[layout]") {
  const LayoutKind kind = GENERATE(LayoutKind::contiguous, LayoutKind::zigzag, LayoutKind::striped);
  const int64_t P = GENERATE(1, 2, 3, 4, 8);
  const int64_t block = GENERATE(0, 1, 2);
  const int64_t S = 2 * P * 2 * 3;  // divisible by 2 P block for every block above
  const Layout layout(kind, S, P, block);
  INFO(layout.to_string() << " P=" << P);
  std::vector<int> seen(static_cast<size_t>(S), 0);
  for (int64_t r = 0; r < P; ++r) {
    const std::vector<int64_t> positions = layout.positions(r);
    REQUIRE(static_cast<int64_t>(positions.size()) == layout.tokens_per_rank());
    REQUIRE(std::is_sorted(positions.begin(), positions.end()));
    for (size_t i = 0; i < positions.size(); ++i) {
      ++seen[positions[i]];
      REQUIRE(layout.rank_of(positions[i]) == r);
      REQUIRE(layout.local_row(positions[i]) == static_cast<int64_t>(i));
    }
  }
  CHECK(std::all_of(seen.begin(), seen.end(), [](int n) { return n == 1; }));
}

TEST_CASE("the source material's zig-zag example holds", "[layout]") {
  const Layout layout(LayoutKind::zigzag, 16, 4, 1);
  CHECK(layout.positions(0) == std::vector<int64_t>{0, 7, 8, 15});
  CHECK(layout.positions(1) == std::vector<int64_t>{1, 6, 9, 14});
  CHECK(layout.positions(2) == std::vector<int64_t>{2, 5, 10, 13});
  CHECK(layout.positions(3) == std::vector<int64_t>{3, 4, 11, 12});
  // Default block S/(2P): the 2P-chunk split, rank r holds chunks r and 2P-1-r.
  const Layout chunks(LayoutKind::zigzag, 16, 4);
  CHECK(chunks.block() == 2);
  CHECK(chunks.positions(0) == std::vector<int64_t>{0, 1, 14, 15});
  CHECK(chunks.positions(3) == std::vector<int64_t>{6, 7, 8, 9});
}

TEST_CASE("closed-form causal pair counts equal brute force", "[layout]") {
  const LayoutKind kind = GENERATE(LayoutKind::contiguous, LayoutKind::zigzag, LayoutKind::striped);
  const int64_t P = GENERATE(1, 2, 3, 4, 8);
  const int64_t block = GENERATE(0, 1, 3);
  const Layout layout(kind, 2 * P * 3 * 4, P, block);
  INFO(layout.to_string() << " P=" << P);
  for (int64_t qr = 0; qr < P; ++qr)
    for (int64_t kr = 0; kr < P; ++kr) {
      const std::vector<int64_t> qp = layout.positions(qr), kp = layout.positions(kr);
      const std::vector<int64_t> qu = layout.units_of(qr), ku = layout.units_of(kr);
      const int64_t brute = causal_pairs_of_positions(qp, kp);
      REQUIRE(layout.causal_pairs(qr, kr) == brute);
      REQUIRE(causal_pairs_of_units(qu, ku, layout.block()) == brute);
    }
}

TEST_CASE("zigzag balances causal work exactly, striped nearly, contiguous not at all", "[layout]") {
  const int64_t P = GENERATE(2, 3, 4, 8);
  const int64_t S = 2 * P * 64;
  const Layout zigzag(LayoutKind::zigzag, S, P), striped(LayoutKind::striped, S, P),
      contiguous(LayoutKind::contiguous, S, P);
  const Layout token_fold(LayoutKind::zigzag, S, P, 1);
  for (int64_t r = 1; r < P; ++r) {
    CHECK(causal_work(zigzag, r) == causal_work(zigzag, 0));
    CHECK(causal_work(token_fold, r) == causal_work(token_fold, 0));
  }
  // Striped: rank r's token in each round is r positions late, so it sees r more keys per round.
  const double mean = double(S) * double(S + 1) / 2 / double(P);
  CHECK(double(causal_work(striped, P - 1)) / mean < 1.02);
  // Contiguous: the last rank does about 2P - 1 times the first rank's work (2P in the limit).
  const double ratio = double(causal_work(contiguous, P - 1)) / double(causal_work(contiguous, 0));
  CHECK(ratio == Approx(2.0 * double(P) - 1.0).epsilon(0.02));
}

TEST_CASE("the balanced layout is the greedy assignment, heaviest unit first to the least-loaded rank", "[layout]") {
  // The definition, scanned rank by rank for every unit, against make_layout's heap.
  const int64_t P = GENERATE(3, 5, 8), S = 64 * P * 4;
  const Mask mask = GENERATE_COPY(Mask(MaskKind::causal), Mask(true, 37), Mask(false, 90),
                                  Mask(true, 0, {S / 4, S / 8, S / 2, S / 8}), Mask(true, 50, {S / 2, S / 2}));
  const Layout layout = make_layout(LayoutKind::balanced, S, P, 0, mask);
  const int64_t b = layout.block(), units = layout.units(), room = layout.rounds();
  std::vector<std::pair<int64_t, int64_t>> work;
  for (int64_t u = 0; u < units; ++u) work.emplace_back(mask.range_pairs(u * b, u * b + b - 1, 0, S - 1), u);
  std::stable_sort(work.begin(), work.end(), [](const auto& x, const auto& y) { return x.first > y.first; });
  std::vector<int64_t> load(static_cast<size_t>(P), 0), count(static_cast<size_t>(P), 0);
  for (const auto& [pairs, unit] : work) {
    int64_t best = -1;
    for (int64_t r = 0; r < P; ++r)
      if (count[r] < room && (best < 0 || load[r] < load[best])) best = r;
    REQUIRE(layout.rank_of_unit(unit) == best);
    load[best] += pairs, ++count[best];
  }
}

TEST_CASE("bad layout sizes are usage errors with a fix", "[layout]") {
  CHECK_THROWS_AS(Layout(LayoutKind::zigzag, 100, 8), UsageError);
  CHECK_THROWS_WITH(Layout(LayoutKind::zigzag, 100, 8), Catch::Contains("2P=16"));
  CHECK_THROWS_AS(Layout(LayoutKind::contiguous, 10, 4), UsageError);
  CHECK_THROWS_AS(Layout(LayoutKind::striped, 64, 4, 3), UsageError);
  CHECK_THROWS_AS(parse_layout("diagonal"), UsageError);
}

TEST_CASE("gather and scatter rows round trip to global order", "[layout]") {
  const Layout layout(LayoutKind::zigzag, 48, 3, 2);
  Tensor<float> global({2, 48, 3, 4});
  for (int64_t i = 0; i < global.size(); ++i) global[i] = static_cast<float>(i);
  Tensor<float> rebuilt(global.shape(), -1.0f);
  for (int64_t r = 0; r < 3; ++r) {
    const std::vector<int64_t> positions = layout.positions(r);
    const Tensor<float> local = gather_rows(global, positions, 1);
    REQUIRE(local.shape() == Shape{2, 16, 3, 4});
    REQUIRE(local(1, 5, 2, 3) == global(1, positions[5], 2, 3));
    scatter_rows(local, positions, 1, rebuilt);
  }
  CHECK(rebuilt == global);
  // (B, H, S) tensors use axis 2.
  Tensor<double> lse({2, 3, 48});
  for (int64_t i = 0; i < lse.size(); ++i) lse[i] = static_cast<double>(i);
  const Tensor<double> local = gather_rows(lse, layout.positions(1), 2);
  CHECK(local(1, 2, 3) == lse(1, 2, layout.positions(1)[3]));
}
