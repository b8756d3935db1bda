// The blockwise kernel (float32) against exact attention (float64), forward, over shapes that
// include S not a power of two, D in {8, 64, 128}, GQA, causal and not, batch > 1, rows that see
// no key, arbitrary position lists, and split calls that must equal one call.
#include <catch2/catch.hpp>
#include <cmath>

#include "reference/compare.hpp"
#include "reference/exact_attention.hpp"
#include "reference/flash_attention.hpp"
#include "reference/inputs.hpp"

using namespace ringlab;

namespace {

struct Case {
  AttentionDims dims;
  bool causal;
};

void check_forward(const AttentionInputs<float>& x, MaskKind mask, std::span<const int64_t> q_pos,
                   std::span<const int64_t> k_pos) {
  const AttentionOutput<float> flash = flash_attention(x.q, x.k, x.v, mask, q_pos, k_pos);
  const AttentionInputs<double> xd = x.cast<double>();
  const AttentionOutput<double> exact = exact_attention(xd.q, xd.k, xd.v, mask, q_pos, k_pos);
  const CompareResult out = compare(flash.out, exact.out, fp32_tolerance("out"));
  const CompareResult lse = compare(flash.lse, exact.lse, fp32_tolerance("lse"));
  INFO("out: " << out.describe() << " max abs " << out.max_abs_error);
  INFO("lse: " << lse.describe() << " max abs " << lse.max_abs_error);
  CHECK(out.ok);
  CHECK(lse.ok);
}

}  // namespace

TEST_CASE("blockwise forward matches exact attention over shapes", "[kernel][forward]") {
  const Case c = GENERATE(Case{{1, 97, 2, 2, 8}, false}, Case{{1, 97, 2, 2, 8}, true}, Case{{2, 300, 4, 2, 64}, true},
                          Case{{2, 300, 4, 2, 64}, false}, Case{{1, 513, 3, 1, 128}, true},
                          Case{{1, 256, 8, 8, 64}, false}, Case{{3, 130, 6, 3, 16}, true}, Case{{1, 1, 1, 1, 8}, true});
  INFO(c.dims.to_string() << (c.causal ? " causal" : " full"));
  const AttentionInputs<float> x = make_inputs(c.dims, 7, false);
  check_forward(x, c.causal ? MaskKind::causal : MaskKind::none, {}, {});
}

TEST_CASE("queries that see no key get out 0 and lse -inf, never NaN", "[kernel][forward]") {
  // Keys sit at positions 40..139, queries at 0..99: the first 40 queries see nothing.
  const AttentionDims dims{2, 100, 2, 1, 16};
  const AttentionInputs<float> x = make_inputs(dims, 3, false);
  const std::vector<int64_t> q_pos = iota_positions(100, 0), k_pos = iota_positions(100, 40);
  const AttentionOutput<float> flash = flash_attention(x.q, x.k, x.v, MaskKind::causal, q_pos, k_pos);
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t h = 0; h < 2; ++h)
      for (int64_t i = 0; i < 100; ++i) {
        if (i < 40) {
          REQUIRE(flash.lse(b, h, i) == -INFINITY);
          for (int64_t d = 0; d < 16; ++d) REQUIRE(flash.out(b, i, h, d) == 0.0f);
        } else {
          REQUIRE(std::isfinite(flash.lse(b, h, i)));
        }
      }
  check_forward(x, MaskKind::causal, q_pos, k_pos);
}

TEST_CASE("a block whose queries all precede its keys gives empty rows", "[kernel][forward]") {
  // Every key is in every query's future: whole query tiles see nothing, in both kernels.
  const AttentionDims dims{1, 130, 2, 2, 8};
  const AttentionInputs<float> x = make_inputs(dims, 6, true);
  const std::vector<int64_t> q_pos = iota_positions(130, 0), k_pos = iota_positions(130, 500);
  check_forward(x, MaskKind::causal, q_pos, k_pos);
  const AttentionInputs<double> xd = x.cast<double>();
  const AttentionGrads<double> grads =
      exact_attention_backward(xd.q, xd.k, xd.v, xd.dout, MaskKind::causal, q_pos, k_pos);
  for (int64_t i = 0; i < grads.dk.size(); ++i) REQUIRE(grads.dk[i] == 0.0);
}

TEST_CASE("arbitrary, unsorted position lists are masked by position", "[kernel][forward]") {
  // A zig-zag-like interleaving: the kernel must mask by the positions given, not by row index.
  const AttentionDims dims{1, 192, 2, 2, 32};
  const AttentionInputs<float> x = make_inputs(dims, 11, false);
  std::vector<int64_t> positions;
  for (int64_t i = 0; i < 96; ++i) {
    positions.push_back(i);
    positions.push_back(191 - i);
  }
  check_forward(x, MaskKind::causal, positions, positions);
}

TEST_CASE("accumulating key blocks one call at a time equals one call", "[kernel][forward]") {
  // Ring steps merge block after block into the running accumulator: the result must match exact
  // attention whatever the split, and be bitwise identical run to run.
  const AttentionDims dims{1, 384, 4, 2, 64};
  const AttentionInputs<float> x = make_inputs(dims, 5, false);
  const std::vector<int64_t> pos = iota_positions(384);
  const int64_t cuts[] = {0, 37, 128, 200, 384};
  auto run = [&](int threads) {
    SoftmaxState<float> acc = make_accumulator(1, 4, 384, 64);
    for (int i = 3; i >= 0; --i)  // reverse order on purpose: the merge is order-free
      flash_forward_accumulate(x.q, x.k, x.v, pos, pos, {0, 384}, {cuts[i], cuts[i + 1]}, MaskKind::causal, acc,
                               {threads});
    return finalize_accumulator(acc, 1, 4, 384, 64);
  };
  const AttentionOutput<float> split = run(2);
  const AttentionInputs<double> xd = x.cast<double>();
  const AttentionOutput<double> exact = exact_attention(xd.q, xd.k, xd.v, MaskKind::causal);
  CHECK(compare(split.out, exact.out, fp32_tolerance("out")).ok);
  CHECK(compare(split.lse, exact.lse, fp32_tolerance("lse")).ok);
  // Determinism across runs and thread counts.
  const AttentionOutput<float> again = run(1);
  CHECK(split.out == again.out);
  CHECK(split.lse == again.lse);
}

TEST_CASE("query row ranges only touch their own rows", "[kernel][forward]") {
  const AttentionDims dims{1, 200, 2, 2, 8};
  const AttentionInputs<float> x = make_inputs(dims, 9, false);
  const std::vector<int64_t> pos = iota_positions(200);
  SoftmaxState<float> acc = make_accumulator(1, 2, 200, 8);
  flash_forward_accumulate(x.q, x.k, x.v, pos, pos, {100, 200}, {0, 200}, MaskKind::none, acc);
  const AttentionOutput<float> result = finalize_accumulator(acc, 1, 2, 200, 8);
  for (int64_t h = 0; h < 2; ++h) {
    for (int64_t i = 0; i < 100; ++i) REQUIRE(result.lse(0, h, i) == -INFINITY);
    for (int64_t i = 100; i < 200; ++i) REQUIRE(std::isfinite(result.lse(0, h, i)));
  }
}
