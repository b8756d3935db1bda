// Backward: the blockwise kernel against the exact backward, and the exact backward against
// central finite differences in float64.
#include <catch2/catch.hpp>
#include <cmath>

#include "reference/compare.hpp"
#include "reference/exact_attention.hpp"
#include "reference/flash_attention.hpp"
#include "reference/inputs.hpp"

using namespace ringlab;

TEST_CASE("blockwise backward matches the exact backward", "[kernel][backward]") {
  struct Case {
    AttentionDims dims;
    bool causal;
  };
  const Case c =
      GENERATE(Case{{1, 97, 2, 2, 8}, true}, Case{{2, 300, 4, 2, 64}, true}, Case{{2, 300, 4, 2, 64}, false},
               Case{{1, 513, 3, 1, 128}, true}, Case{{1, 130, 6, 3, 16}, false}, Case{{1, 1000, 1, 1, 64}, true});
  INFO(c.dims.to_string() << (c.causal ? " causal" : " full"));
  const MaskKind mask = c.causal ? MaskKind::causal : MaskKind::none;
  const AttentionInputs<float> x = make_inputs(c.dims, 21, true);
  const AttentionOutput<float> forward = flash_attention(x.q, x.k, x.v, mask);
  const AttentionGrads<float> flash = flash_attention_backward(x.q, x.k, x.v, forward, x.dout, mask);
  const AttentionInputs<double> xd = x.cast<double>();
  const AttentionGrads<double> exact = exact_attention_backward(xd.q, xd.k, xd.v, xd.dout, mask);
  for (auto [name, a, r] : {std::tuple{"dq", &flash.dq, &exact.dq}, std::tuple{"dk", &flash.dk, &exact.dk},
                            std::tuple{"dv", &flash.dv, &exact.dv}}) {
    const CompareResult result = compare(*a, *r, fp32_tolerance(name));
    INFO(name << ": " << result.describe() << ", max abs " << result.max_abs_error);
    CHECK(result.ok);
  }
}

TEST_CASE("backward of queries that see no key is zero and finite", "[kernel][backward]") {
  const AttentionDims dims{1, 64, 2, 2, 8};
  const AttentionInputs<float> x = make_inputs(dims, 4, true);
  const std::vector<int64_t> q_pos = iota_positions(64, 0), k_pos = iota_positions(64, 20);
  const AttentionOutput<float> forward = flash_attention(x.q, x.k, x.v, MaskKind::causal, q_pos, k_pos);
  const AttentionGrads<float> grads =
      flash_attention_backward(x.q, x.k, x.v, forward, x.dout, MaskKind::causal, q_pos, k_pos);
  for (int64_t i = 0; i < grads.dq.size(); ++i) REQUIRE(std::isfinite(grads.dq[i]));
  for (int64_t i = 0; i < 20; ++i)
    for (int64_t d = 0; d < 8; ++d) REQUIRE(grads.dq(0, i, 0, d) == 0.0f);
  const AttentionInputs<double> xd = x.cast<double>();
  const AttentionGrads<double> exact =
      exact_attention_backward(xd.q, xd.k, xd.v, xd.dout, MaskKind::causal, q_pos, k_pos);
  CHECK(compare(grads.dk, exact.dk, fp32_tolerance("dk")).ok);
}

TEST_CASE("exact backward matches finite differences in float64", "[exact][backward]") {
  const bool causal = GENERATE(false, true);
  const MaskKind mask = causal ? MaskKind::causal : MaskKind::none;
  const AttentionDims dims{1, 7, 4, 2, 5};
  AttentionInputs<double> x = make_inputs(dims, 13, true).cast<double>();
  const AttentionGrads<double> grads = exact_attention_backward(x.q, x.k, x.v, x.dout, mask);
  // Loss L = sum(dout o out): its gradient is what the backward computes.
  auto loss = [&] {
    const AttentionOutput<double> f = exact_attention(x.q, x.k, x.v, mask);
    double sum = 0;
    for (int64_t i = 0; i < f.out.size(); ++i) sum += x.dout[i] * f.out[i];
    return sum;
  };
  const double h = 1e-6;
  double worst = 0;
  for (auto [tensor, grad] : {std::pair{&x.q, &grads.dq}, std::pair{&x.k, &grads.dk}, std::pair{&x.v, &grads.dv}}) {
    for (int64_t i = 0; i < tensor->size(); ++i) {
      const double saved = (*tensor)[i];
      (*tensor)[i] = saved + h;
      const double up = loss();
      (*tensor)[i] = saved - h;
      const double down = loss();
      (*tensor)[i] = saved;
      const double numeric = (up - down) / (2 * h);
      const double error = std::fabs(numeric - (*grad)[i]);
      worst = std::max(worst, error);
      REQUIRE(error <= 1e-7 + 1e-6 * std::fabs(numeric));
    }
  }
  INFO("worst |finite difference - analytic| = " << worst);
  CHECK(worst < 1e-7);
}
