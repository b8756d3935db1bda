// The general mask (documents, sliding window, causal): the predicate against its definition
// written out naively here, the interval arithmetic (pairs, range_pairs, cover) against brute
// force, the command-line forms, and the oracle and blockwise kernel under it: packed documents
// must equal each document's attention computed alone, and the kernel (forward and backward, any
// position order) must match the oracle.
#include <catch2/catch.hpp>

#include <numeric>
#include <random>

#include "reference/compare.hpp"
#include "reference/error.hpp"
#include "reference/exact_attention.hpp"
#include "reference/flash_attention.hpp"
#include "reference/inputs.hpp"
#include "reference/layout.hpp"
#include "reference/mask.hpp"

using namespace ringlab;

namespace {

// The definition, spelled out without intervals. padding (empty or one per document): positions
// after each document that see nothing and are seen by nothing.
bool naive_visible(const std::vector<int64_t>& lengths, bool causal, int64_t window, int64_t i, int64_t j,
                   const std::vector<int64_t>& padding = {}) {
  auto span = [&](size_t d) { return lengths[d] + (padding.empty() ? 0 : padding[d]); };
  auto doc = [&](int64_t p) {
    int64_t d = 0, start = 0, end = lengths.empty() ? INT64_MAX : span(0);
    while (p >= end) start = end, end += span(static_cast<size_t>(++d));
    const bool pad = !lengths.empty() && p >= start + lengths[static_cast<size_t>(d)];
    return pad ? -1 : d;
  };
  if (doc(i) < 0 || doc(j) < 0) return false;
  if (!lengths.empty() && doc(i) != doc(j)) return false;
  if (causal && j > i) return false;
  if (window > 0) {
    if (causal) return i - window < j;
    return std::abs(i - j) < window;
  }
  return true;
}

struct MaskCase {
  std::vector<int64_t> lengths;
  bool causal;
  int64_t window;
  std::vector<int64_t> padding = {};  // per-document padding (how per-document layouts take any length)
};

std::vector<MaskCase> mask_cases() {
  std::vector<MaskCase> cases;
  for (const std::vector<int64_t>& lengths : {std::vector<int64_t>{}, std::vector<int64_t>{13, 1, 30, 20},
                                              std::vector<int64_t>{1, 1, 62}, std::vector<int64_t>{32, 32}})
    for (bool causal : {false, true})
      for (int64_t window : {0, 1, 5, 17, 100}) cases.push_back({lengths, causal, window});
  for (bool causal : {false, true})
    for (int64_t window : {0, 5, 17}) {
      cases.push_back({{13, 1, 30, 20}, causal, window, {3, 7, 0, 2}});
      cases.push_back({{1, 1, 62}, causal, window, {5, 0, 1}});
    }
  return cases;
}

constexpr int64_t kS = 64;

}  // namespace

TEST_CASE("the mask's intervals, pair counts and tile covers equal the definition", "[mask]") {
  const MaskCase c = GENERATE(from_range(mask_cases()));
  const Mask mask(c.causal, c.window, c.lengths, 0, c.padding);
  INFO(mask.describe() << " docs " << documents_string(c.lengths) << " padding " << documents_string(c.padding));
  if (!c.padding.empty()) {
    CHECK(mask.documents_padded());
    CHECK(mask.document_tokens() == c.lengths);
    CHECK(mask.document_padding() == c.padding);
    CHECK(mask.bounds().document_padding() == c.padding);
    CHECK_FALSE(mask.bounds().causal());
    CHECK_FALSE(mask == Mask(c.causal, c.window, c.lengths));  // the padding is part of the mask
  }
  for (int64_t i = 0; i < kS; ++i)
    for (int64_t j = 0; j < kS; ++j)
      REQUIRE(mask.visible(i, j) == naive_visible(c.lengths, c.causal, c.window, i, j, c.padding));
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 300; ++trial) {
    int64_t qa = static_cast<int64_t>(rng() % kS), qb = static_cast<int64_t>(rng() % kS);
    int64_t ka = static_cast<int64_t>(rng() % kS), kb = static_cast<int64_t>(rng() % kS);
    if (qa > qb) std::swap(qa, qb);
    if (ka > kb) std::swap(ka, kb);
    int64_t brute = 0;
    bool any = false, all = true;
    for (int64_t i = qa; i <= qb; ++i)
      for (int64_t j = ka; j <= kb; ++j) {
        const bool v = naive_visible(c.lengths, c.causal, c.window, i, j, c.padding);
        brute += v, any |= v, all &= v;
      }
    INFO("queries [" << qa << ", " << qb << "] keys [" << ka << ", " << kb << "]");
    REQUIRE(mask.range_pairs(qa, qb, ka, kb) == brute);
    std::vector<int64_t> queries(static_cast<size_t>(qb - qa + 1)), keys(static_cast<size_t>(kb - ka + 1));
    std::iota(queries.begin(), queries.end(), qa);
    std::iota(keys.begin(), keys.end(), ka);
    REQUIRE(mask.pairs(queries, keys) == brute);
    const Cover expected = all ? Cover::all : (any ? Cover::some : Cover::none);
    REQUIRE(mask.cover(queries, ka, kb) == expected);
    // The reaches hold every key these queries see, and every query that sees one of these keys.
    const KeyRange reached = mask.keys_reached(qa, qb), reaching = mask.queries_reaching(ka, kb);
    for (int64_t i = 0; i < kS; ++i)
      for (int64_t j = 0; j < kS; ++j) {
        if (!naive_visible(c.lengths, c.causal, c.window, i, j, c.padding)) continue;
        if (qa <= i && i <= qb) REQUIRE(reached.contains(j));
        if (ka <= j && j <= kb) REQUIRE(reaching.contains(i));
      }
  }
}

TEST_CASE("document and window flags: forms, random lengths and one-line errors", "[mask][cli]") {
  CHECK(parse_documents("10,20,34", 64, 0) == std::vector<int64_t>{10, 20, 34});
  CHECK_THROWS_WITH(parse_documents("10,20,30", 64, 0), Catch::Contains("sum to 60, not S=64"));
  CHECK_THROWS_WITH(parse_documents("10,0,54", 64, 0), Catch::Contains("at least 1, got 0"));
  CHECK_THROWS_WITH(parse_documents("10,-4,58", 64, 0), Catch::Contains("at least 1, got -4"));
  CHECK_THROWS_WITH(parse_documents("10,x", 64, 0), Catch::Contains("'x' is not a document length"));
  CHECK_THROWS_WITH(parse_documents("random:0", 64, 0), Catch::Contains("N >= 1"));
  CHECK_THROWS_WITH(parse_documents("random:65", 64, 0), Catch::Contains("more documents than S=64"));
  CHECK_THROWS_WITH(parse_documents("random:4", 100, 0, 8), Catch::Contains("multiples of 8"));
  CHECK_THROWS_WITH(validate_window(-3), Catch::Contains("--window"));
  for (uint64_t seed : {0, 1, 2}) {
    const std::vector<int64_t> lengths = parse_documents("random:16", 65536, seed, 16);
    REQUIRE(lengths.size() == 16);
    CHECK(std::accumulate(lengths.begin(), lengths.end(), int64_t{0}) == 65536);
    for (int64_t length : lengths) CHECK((length >= 16 && length % 16 == 0));
    CHECK(parse_documents("random:16", 65536, seed, 16) == lengths);  // the seed decides
    // Long-tailed: the longest document is several times the mean.
    CHECK(*std::max_element(lengths.begin(), lengths.end()) > 2 * 65536 / 16);
  }
  CHECK(parse_documents("random:16", 65536, 0, 16) != parse_documents("random:16", 65536, 1, 16));
  CHECK(parse_documents("random:64", 64, 3) == std::vector<int64_t>(64, 1));
}

TEST_CASE("packed documents attend exactly as each document alone", "[mask][exact]") {
  const std::vector<int64_t> lengths{40, 7, 81};
  const bool causal = GENERATE(false, true);
  const AttentionDims dims{2, 128, 4, 2, 16};
  const AttentionInputs<double> x = make_inputs(dims, 3, true).cast<double>();
  const Mask mask(causal, 0, lengths);
  const AttentionOutput<double> packed = exact_attention(x.q, x.k, x.v, mask);
  const AttentionGrads<double> grads = exact_attention_backward(x.q, x.k, x.v, x.dout, mask);
  int64_t start = 0;
  for (int64_t length : lengths) {
    const std::vector<int64_t> rows = iota_positions(length, start);
    auto part = [&](const Tensor<double>& t, int axis = 1) { return gather_rows(t, rows, axis); };
    const AttentionOutput<double> alone =
        exact_attention(part(x.q), part(x.k), part(x.v), causal ? MaskKind::causal : MaskKind::none);
    const AttentionGrads<double> alone_grads = exact_attention_backward(part(x.q), part(x.k), part(x.v), part(x.dout),
                                                                        causal ? MaskKind::causal : MaskKind::none);
    const Tolerance exact{1e-12, 1e-12};
    CHECK(compare(part(packed.out), alone.out, exact).ok);
    CHECK(compare(part(packed.lse, 2), alone.lse, exact).ok);
    CHECK(compare(part(grads.dq), alone_grads.dq, exact).ok);
    CHECK(compare(part(grads.dk), alone_grads.dk, exact).ok);
    CHECK(compare(part(grads.dv), alone_grads.dv, exact).ok);
    start += length;
  }
}

TEST_CASE("the blockwise kernel matches the oracle under windows and documents", "[mask][kernel]") {
  const MaskCase c = GENERATE(MaskCase{{100, 3, 200, 97}, true, 0}, MaskCase{{}, true, 37}, MaskCase{{}, false, 70},
                              MaskCase{{150, 150, 100}, true, 90}, MaskCase{{1, 399}, false, 0},
                              MaskCase{{64, 64, 64, 64, 64, 80}, false, 1});
  const bool shuffled = GENERATE(false, true);  // positions in an arbitrary order, as a striped rank's
  const Mask mask(c.causal, c.window, c.lengths);
  const AttentionDims dims{1, 400, 4, 2, 32};
  INFO(mask.describe() << (shuffled ? ", shuffled positions" : ""));
  const AttentionInputs<float> x = make_inputs(dims, 5, true);
  std::vector<int64_t> positions = iota_positions(dims.seq);
  if (shuffled) std::shuffle(positions.begin(), positions.end(), std::mt19937_64(11));
  const AttentionInputs<double> xd = x.cast<double>();
  const AttentionOutput<float> flash = flash_attention(x.q, x.k, x.v, mask, positions, positions);
  const AttentionOutput<double> exact = exact_attention(xd.q, xd.k, xd.v, mask, positions, positions);
  const CompareResult out = compare(flash.out, exact.out, fp32_tolerance("out"));
  const CompareResult lse = compare(flash.lse, exact.lse, fp32_tolerance("lse"));
  INFO("out " << out.describe() << ", lse " << lse.describe());
  CHECK(out.ok);
  CHECK(lse.ok);
  const AttentionGrads<float> g = flash_attention_backward(x.q, x.k, x.v, flash, x.dout, mask, positions, positions);
  const AttentionGrads<double> ge = exact_attention_backward(xd.q, xd.k, xd.v, xd.dout, mask, positions, positions);
  for (auto [name, a, e] :
       {std::tuple{"dq", &g.dq, &ge.dq}, std::tuple{"dk", &g.dk, &ge.dk}, std::tuple{"dv", &g.dv, &ge.dv}}) {
    const CompareResult r = compare(*a, *e, fp32_tolerance(name));
    INFO(name << " " << r.describe());
    CHECK(r.ok);
  }
  // The window mask changes the answer: the same inputs without it differ well beyond tolerance.
  const AttentionOutput<double> unmasked =
      exact_attention(xd.q, xd.k, xd.v, c.causal ? MaskKind::causal : MaskKind::none, positions, positions);
  CHECK_FALSE(compare(exact.out, unmasked.out, fp32_tolerance("out")).ok);
}
