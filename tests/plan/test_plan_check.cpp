// Plans of every algorithm pass the checker; deliberately broken plans and the erratum variants
// are caught, naming the rank and step.
#include <catch2/catch.hpp>
#include <numeric>
#include <set>
#include <tuple>

#include "reference/error.hpp"
#include "sim/plan/check.hpp"
#include "sim/plan/queries.hpp"
#include "tests/plan/plan_cases.hpp"

using namespace ringlab;

namespace {

std::string findings_text(const PlanCheck& check) {
  std::string text;
  for (const PlanFinding& f : check.findings) text += f.describe() + "\n";
  return text;
}

PlanSpec spec_of(Algorithm algo, LayoutKind layout, int64_t P, bool causal, bool skip, bool backward) {
  return test::matrix_spec(algo, layout, P, {1, 2 * P * 12, 4 * P, 2 * P, 8}, causal, skip, backward);
}

// The checker on a causal contiguous ring with an erratum; its findings in the test's log.
PlanCheck erratum_check(int64_t P, Erratum erratum, bool backward) {
  PlanSpec spec = spec_of(Algorithm::ring, LayoutKind::contiguous, P, true, true, backward);
  spec.erratum = erratum;
  const PlanCheck check = check_plan(build_plan(spec));
  UNSCOPED_INFO(findings_text(check));
  return check;
}

}  // namespace

TEST_CASE("every algorithm's plan passes the checker", "[plans][checker]") {
  const test::MatrixCase c = GENERATE(from_range(test::matrix_cases()));
  const bool skip = GENERATE(true, false);
  const Plan plan = build_plan(spec_of(c.algo, c.layout, c.ranks, c.causal, skip, c.backward));
  INFO(plan.spec().describe());
  const PlanCheck check = check_plan(plan);
  INFO(findings_text(check));
  CHECK(check.ok());
  CHECK(check.coverage_checked);
  CHECK(check.pairs_checked > 0);
}

TEST_CASE("plans under windows and packed documents pass the checker", "[plans][checker][mask]") {
  const auto [algo, layout, P] = GENERATE(from_range(test::plan_cases()));
  const auto [causal, window] =
      GENERATE(std::tuple{true, int64_t{0}}, std::tuple{false, int64_t{7}}, std::tuple{true, int64_t{30}});
  const bool skip = GENERATE(true, false);
  PlanSpec spec = spec_of(algo, layout, P, causal, skip, true);
  spec.window = window;
  spec.documents = test::test_documents(layout, spec.dims.seq, P);
  const Plan plan = build_plan(spec);
  INFO(plan.spec().describe());
  const PlanCheck check = check_plan(plan);
  INFO(findings_text(check));
  CHECK(check.ok());
  CHECK(check.coverage_checked);
}

TEST_CASE("per-document zig-zag and the balanced layout balance packed causal documents", "[plans][balance][mask]") {
  const int64_t P = 4, S = 4096;
  auto imbalance = [&](LayoutKind layout, const std::vector<int64_t>& documents, int64_t window) {
    PlanSpec spec = spec_of(Algorithm::ring, layout, P, true, true, false);
    spec.dims.seq = S;
    spec.documents = documents;
    spec.window = window;
    const Plan plan = build_plan(spec);
    REQUIRE(check_plan(plan).ok());
    double most = 0, sum = 0;
    for (int64_t r = 0; r < P; ++r) {
      const double flops = rank_work(plan, r, expand(plan, r)).flops;
      most = std::max(most, flops), sum += flops;
    }
    return most * P / sum;
  };
  const std::vector<int64_t> documents = layout_documents("random:8", S, 3, LayoutKind::zigzag, P, 0);
  const double contiguous = imbalance(LayoutKind::contiguous, documents, 0);
  INFO("documents " << documents_string(documents) << ": contiguous " << contiguous);
  CHECK(contiguous > 1.3);
  CHECK(imbalance(LayoutKind::zigzag, documents, 0) <= 1.05);
  CHECK(imbalance(LayoutKind::balanced, documents, 0) <= 1.02);
  CHECK(imbalance(LayoutKind::balanced, {}, 700) <= 1.02);
  // The per-document zig-zag: chunks i and 2P-1-i of every document on rank i.
  PlanSpec spec = spec_of(Algorithm::ring, LayoutKind::zigzag, P, true, true, false);
  spec.dims.seq = S;
  spec.documents = documents;
  const Plan plan = build_plan(spec);
  int64_t start = 0;
  for (int64_t length : documents) {
    const int64_t chunk = length / (2 * P);
    for (int64_t c = 0; c < 2 * P; ++c)
      for (int64_t t = 0; t < chunk; ++t)
        REQUIRE(plan.layout().rank_of(start + c * chunk + t) == (c < P ? c : 2 * P - 1 - c));
    start += length;
  }
}

TEST_CASE("a window bounds the ring to the hops it needs", "[plans][mask]") {
  const int64_t P = GENERATE(3, 4, 8), window = GENERATE(1, 2, 100, 257, 1000);
  PlanSpec spec = spec_of(Algorithm::ring, LayoutKind::contiguous, P, true, true, true);
  spec.dims.seq = 256 * P;
  spec.window = window;
  const Plan plan = build_plan(spec);
  // Contiguous blocks of n = 256 tokens: a query sees back W-1 tokens, so ceil((W-1)/n) blocks back.
  const int64_t hops = std::min<int64_t>(P - 1, (window - 1 + 255) / 256);
  CHECK(ring_hops(plan.spec()) == hops);
  CHECK(plan.phases().front().steps == hops + 1);
  const PlanCheck check = check_plan(plan);
  INFO(findings_text(check));
  CHECK(check.ok());
}

TEST_CASE("an untrimmed ring under a mask runs as many steps as its farthest-travelling block needs", "[plans][mask]") {
  // Padding, --no-skip and the erratum leave the ring untrimmed: its loops run max_b T(b) + 1 steps,
  // T(b) the farthest hop at which rank b + h still sees block b. ring_travel finds only that
  // largest one (probing each block above the largest so far); here every T(b) is found the long way,
  // one probe per hop, and its largest must be every entry of ring_travel.
  const int64_t P = GENERATE(3, 4, 5, 8);
  // S = a P + extra tokens, padded to what the layout needs.
  const auto [layout, causal, a, extra, skip] =
      GENERATE(std::tuple{LayoutKind::zigzag, true, int64_t{1}, int64_t{0}, true},  // S = P: half the tokens padding
               std::tuple{LayoutKind::zigzag, true, int64_t{3}, int64_t{0}, true},
               std::tuple{LayoutKind::contiguous, true, int64_t{1}, int64_t{1}, true},
               std::tuple{LayoutKind::contiguous, false, int64_t{5}, int64_t{2}, true},
               std::tuple{LayoutKind::zigzag, true, int64_t{1}, int64_t{0}, false});  // --no-skip
  PlanSpec spec = spec_of(Algorithm::ring, layout, P, causal, skip, true);
  spec.dims.seq = a * P + extra;
  pad_to_layout(spec);
  REQUIRE(spec.mask().general());
  const Plan plan = build_plan(spec);
  int64_t most = 0;
  for (int64_t block = 0; block < P; ++block) {
    int64_t hops = P - 1;
    while (hops > 0 && block_mask_pairs(plan, (block + hops) % P, block) == 0) --hops;
    most = std::max(most, hops);
  }
  const std::vector<int64_t> travel = ring_travel(spec);
  CHECK(travel == std::vector<int64_t>(static_cast<size_t>(P), most));
  CHECK(plan.phases().front().steps == most + 1);
  const PlanCheck check = check_plan(plan);
  INFO(findings_text(check));
  CHECK(check.ok());
}

TEST_CASE("the trimmed ring forwards a block only as far as the last rank that needs it", "[plans][mask]") {
  const int64_t P = GENERATE(3, 4, 5, 8);
  const auto [causal, window, documents] = GENERATE(
      std::tuple{true, int64_t{0}, std::vector<int64_t>{100, 7, 300, 50, 0}},  // the last length fills S
      std::tuple{true, int64_t{90}, std::vector<int64_t>{}}, std::tuple{false, int64_t{150}, std::vector<int64_t>{}},
      std::tuple{false, int64_t{40}, std::vector<int64_t>{250, 0}},
      std::tuple{true, int64_t{70}, std::vector<int64_t>{33, 0}});
  const bool backward = GENERATE(false, true);
  const int64_t n = 64, S = n * P;
  PlanSpec spec = spec_of(Algorithm::ring, LayoutKind::contiguous, P, causal, true, backward);
  spec.dims.seq = S;
  spec.window = window;
  std::vector<int64_t> docs;
  for (int64_t length : documents) {
    const int64_t used = std::accumulate(docs.begin(), docs.end(), int64_t{0});
    if (used >= S) break;
    docs.push_back(length == 0 || used + length > S ? S - used : length);
  }
  spec.documents = docs;
  const Plan plan = build_plan(spec);
  INFO(plan.spec().describe());
  const PlanCheck check = check_plan(plan);
  INFO(findings_text(check));
  REQUIRE(check.ok());
  // From the mask alone: block b (tokens [b n, b n + n)) must reach rank b + h iff some query of
  // that rank sees some key of b; it travels to the farthest such h (never wrapping past it).
  const Mask mask = spec.mask();
  auto sees = [&](int64_t q_block, int64_t k_block) {
    return mask.range_pairs(q_block * n, q_block * n + n - 1, k_block * n, k_block * n + n - 1) > 0;
  };
  const int64_t block = payload_bytes(plan, Payload::kv);
  int64_t expected_received = 0, expected_unused = 0, plain_unused = 0;
  for (int64_t b = 0; b < P; ++b) {
    int64_t travel = 0;
    for (int64_t h = 1; h < P; ++h)
      if (sees((b + h) % P, b)) travel = h;
    expected_received += travel * block;
    for (int64_t h = 1; h <= travel; ++h) expected_unused += sees((b + h) % P, b) ? 0 : block;  // relays
    for (int64_t r = 0; r < P; ++r) plain_unused += r != b && !sees(r, b) ? block : 0;
  }
  int64_t received = 0, unused = 0;
  for (int64_t r = 0; r < P; ++r) {
    const RankWork w = rank_work(plan, r, expand(plan, r));
    received += w.kv_bytes_received, unused += w.kv_bytes_unused;
  }
  const int64_t passes = backward ? 2 : 1;  // the backward fetches K/V again, along the same route
  CHECK(received == passes * expected_received);
  CHECK(unused == expected_unused);
  // Causal and contiguous: the ranks that need a block are consecutive after it, so none relays.
  // (Without causality a block is needed on both sides, and a one-way ring passes it through the rest.)
  if (causal) CHECK(unused == 0);
  // --full-ring: the plain ring, every block to every rank, with the unused bytes that brings.
  spec.full_ring = true;
  const Plan full = build_plan(spec);
  REQUIRE(check_plan(full).ok());
  int64_t full_received = 0, full_unused = 0;
  for (int64_t r = 0; r < P; ++r) {
    const RankWork w = rank_work(full, r, expand(full, r));
    full_received += w.kv_bytes_received, full_unused += w.kv_bytes_unused;
  }
  CHECK(full_received == passes * P * (P - 1) * block);
  CHECK(full_unused == plain_unused);
}

TEST_CASE("block_mask_pairs counts what the mask shows position by position, on every layout", "[plans][mask]") {
  // Blocks of one unit are paired unit by unit; blocks of many (balanced, striped, zig-zag per
  // document, hybrid rings) by runs, counting the keys every query row sees. Both against
  // Mask::pairs over the blocks' positions.
  const int64_t R = GENERATE(3, 5);
  const auto [layout, U, docs, padded] = GENERATE(
      std::tuple{LayoutKind::contiguous, int64_t{1}, false, false},
      std::tuple{LayoutKind::contiguous, int64_t{2}, true, false},
      std::tuple{LayoutKind::zigzag, int64_t{1}, false, true}, std::tuple{LayoutKind::zigzag, int64_t{1}, true, false},
      std::tuple{LayoutKind::striped, int64_t{1}, false, false},
      std::tuple{LayoutKind::striped, int64_t{2}, true, false},
      std::tuple{LayoutKind::balanced, int64_t{1}, false, false},
      std::tuple{LayoutKind::balanced, int64_t{1}, true, false}, std::tuple{LayoutKind::zigzag, int64_t{1}, true, true},
      std::tuple{LayoutKind::striped, int64_t{1}, true, true});
  const auto [causal, window] =
      GENERATE(std::tuple{true, int64_t{0}}, std::tuple{true, int64_t{37}}, std::tuple{false, int64_t{0}},
               std::tuple{false, int64_t{90}}, std::tuple{true, int64_t{1}});
  const int64_t P = R * U, S = 2 * P * 4 * 16;
  PlanSpec spec = spec_of(U > 1 ? Algorithm::hybrid : Algorithm::ring, layout, P, causal, true, false);
  spec.ulysses = U;
  spec.dims.seq = padded ? S - 5 : S;
  spec.dims.heads = spec.dims.kv_heads = 2 * U;
  spec.window = window;
  if (docs) spec.documents = {2 * P * 4, 2 * P * 4 * 5, 2 * P * 4 * 2, S - 2 * P * 4 * 8};
  if (docs && padded) {  // lengths the layout does not divide: each document padded at its end
    spec.documents = {2 * P * 4 - 3, 2 * P * 4 * 5 + 1, 2 * P * 4 * 2 - 7};
    spec.dims.seq = std::accumulate(spec.documents.begin(), spec.documents.end(), int64_t{0});
  }
  if (padded) pad_to_layout(spec);
  INFO(spec.describe());
  REQUIRE(padded == (spec.padding_tokens() > 0));
  const Plan plan(spec, {});
  for (int64_t q = 0; q < R; ++q)
    for (int64_t k = 0; k < R; ++k) {
      std::vector<int64_t> keys = plan.block_positions(k);
      std::sort(keys.begin(), keys.end());
      INFO("q block " << q << ", kv block " << k);
      REQUIRE(block_mask_pairs(plan, q, k) == plan.mask().pairs(plan.block_positions(q), keys));
    }
}

TEST_CASE("the trimmed ring's travel is each block's farthest seeing hop, as a hop-by-hop walk finds it",
          "[plans][mask]") {
  // ring_travel looks only where the units allow a position to see a block; the walk probes every
  // hop from R - 1 down. They must agree block by block, on every layout and mask that trims.
  const int64_t R = GENERATE(3, 5, 8);
  const auto [layout, U, causal, window, docs] =
      GENERATE(std::tuple{LayoutKind::contiguous, int64_t{1}, true, int64_t{100}, false},
               std::tuple{LayoutKind::contiguous, int64_t{1}, false, int64_t{100}, false},  // reaches back: hop R - 1
               std::tuple{LayoutKind::contiguous, int64_t{1}, false, int64_t{2}, false},    // back by one token
               std::tuple{LayoutKind::balanced, int64_t{1}, false, int64_t{2}, false},
               std::tuple{LayoutKind::contiguous, int64_t{1}, true, int64_t{0}, true},
               std::tuple{LayoutKind::zigzag, int64_t{1}, true, int64_t{70}, false},
               std::tuple{LayoutKind::zigzag, int64_t{1}, true, int64_t{0}, true},  // per document
               std::tuple{LayoutKind::striped, int64_t{1}, true, int64_t{5}, false},
               std::tuple{LayoutKind::striped, int64_t{1}, false, int64_t{0}, true},
               std::tuple{LayoutKind::balanced, int64_t{1}, true, int64_t{0}, true},
               std::tuple{LayoutKind::balanced, int64_t{1}, true, int64_t{300}, true},
               std::tuple{LayoutKind::contiguous, int64_t{2}, true, int64_t{150}, false},  // hybrid: a ring of R
               std::tuple{LayoutKind::zigzag, int64_t{2}, false, int64_t{40}, true});
  const int64_t P = R * U, S = 64 * 2 * P * 4;
  PlanSpec spec = spec_of(U > 1 ? Algorithm::hybrid : Algorithm::ring, layout, P, causal, true, false);
  spec.ulysses = U;
  spec.dims.seq = S;
  spec.dims.heads = spec.dims.kv_heads = 2 * U;
  spec.window = window;
  // Documents in whole multiples of 2P * 4 tokens (a per-document zig-zag's chunks of 4), short
  // and long, the last filling S.
  if (docs) spec.documents = {2 * P * 4, 2 * P * 4 * 5, 2 * P * 4 * 2, S - 2 * P * 4 * 8};
  INFO(spec.describe());
  REQUIRE(spec.ring_degree() == R);
  const Plan plan(spec, {});
  std::vector<int64_t> walked;
  for (int64_t b = 0; b < R; ++b) {
    int64_t hops = R - 1;
    while (hops > 0 && block_mask_pairs(plan, (b + hops) % R, b) == 0) --hops;
    walked.push_back(hops);
  }
  CHECK(ring_travel(spec) == walked);
}

TEST_CASE("the reverse-dkv erratum is caught at P >= 3 and invisible at P = 2", "[plans][checker][errata]") {
  const int64_t P = GENERATE(2, 3, 4, 8);
  const PlanCheck check = erratum_check(P, Erratum::reverse_dkv, true);
  if (P == 2) {
    CHECK(check.ok());
  } else {
    REQUIRE_FALSE(check.ok());
    CHECK(check.findings.front().message.find("adds dK/dV of block") != std::string::npos);
    CHECK(check.findings.front().rank >= 0);
    CHECK(check.findings.front().step >= 1);
  }
}

TEST_CASE("the kv-offset-mask erratum is caught on every rank, rank 0 included", "[plans][checker][errata]") {
  const int64_t P = GENERATE(2, 3, 4, 8);
  const PlanCheck check = erratum_check(P, Erratum::kv_offset_mask, false);
  REQUIRE_FALSE(check.ok());
  std::set<int64_t> ranks;
  for (const PlanFinding& f : check.findings)
    if (f.message.find("erratum kv-offset-mask") != std::string::npos) ranks.insert(f.rank);
  for (int64_t r = 0; r < P; ++r) CHECK(ranks.count(r) == 1);
}

TEST_CASE("broken plans are refused naming the rank and step", "[plans][checker]") {
  PlanSpec spec = spec_of(Algorithm::ring, LayoutKind::zigzag, 4, true, true, true);
  const Plan good = build_plan(spec);
  REQUIRE(check_plan(good).ok());

  SECTION("a missing send deadlocks") {
    std::vector<Phase> phases = good.phases();
    std::get<ExchangeT>(phases[0].body[1].op).sends = false;
    const PlanCheck check = check_plan(Plan(spec, phases));
    REQUIRE_FALSE(check.ok());
    CHECK(findings_text(check).find("deadlock") != std::string::npos);
  }
  SECTION("K/V sent the wrong way round computes with the wrong block") {
    std::vector<Phase> phases = good.phases();
    auto& exchange = std::get<ExchangeT>(phases[0].body[1].op);
    exchange.send_to = Shift{-1, 0};
    exchange.recv_from = Shift{1, 0};
    const PlanCheck check = check_plan(Plan(spec, phases));
    REQUIRE_FALSE(check.ok());
    CHECK(findings_text(check).find("computes with block") != std::string::npos);
  }
  SECTION("computing before the wait uses a buffer still being received") {
    std::vector<Phase> phases = good.phases();
    std::swap(phases[0].body[2],
              phases[0].body[3]);  // wait before compute: fine, so move the wait after the next step's compute
    phases[0].body[2].when = Steps{0, 1};
    std::vector<TemplateEntry> body = phases[0].body;
    // Drop the wait entirely: step 1 computes on kv1 whose receive was never waited for.
    body.erase(body.begin() + 2);
    phases[0].body = body;
    const PlanCheck check = check_plan(Plan(spec, phases));
    REQUIRE_FALSE(check.ok());
    CHECK(findings_text(check).find("before waiting for its receive") != std::string::npos);
  }
  SECTION("a compute done twice breaks coverage") {
    std::vector<Phase> phases = good.phases();
    phases[0].body.push_back(phases[0].body[2]);
    const PlanCheck check = check_plan(Plan(spec, phases));
    REQUIRE_FALSE(check.ok());
    CHECK(findings_text(check).find("computed 2 times") != std::string::npos);
  }
}

TEST_CASE("plan building refuses what does not fit, with a fix", "[plans]") {
  PlanSpec spec = spec_of(Algorithm::ulysses, LayoutKind::contiguous, 4, false, true, false);
  spec.dims.heads = 6;
  spec.dims.kv_heads = 6;
  CHECK_THROWS_WITH(build_plan(spec), Catch::Contains("H=6 is not divisible by the Ulysses degree 4"));
  spec.dims.heads = 8;
  spec.dims.kv_heads = 2;
  CHECK_THROWS_WITH(build_plan(spec), Catch::Contains("HKV=2 is not divisible"));
  PlanSpec hybrid = spec_of(Algorithm::hybrid, LayoutKind::zigzag, 6, true, true, false);
  hybrid.ulysses = 4;
  CHECK_THROWS_WITH(build_plan(hybrid), Catch::Contains("does not divide P=6"));
  PlanSpec zig = spec_of(Algorithm::ring, LayoutKind::zigzag, 4, true, true, false);
  zig.dims.seq = 100;
  CHECK_THROWS_AS(build_plan(zig), UsageError);
  PlanSpec erratum = spec_of(Algorithm::ring, LayoutKind::zigzag, 4, true, true, false);
  erratum.erratum = Erratum::reverse_dkv;
  CHECK_THROWS_WITH(build_plan(erratum), Catch::Contains("add --backward"));
}
