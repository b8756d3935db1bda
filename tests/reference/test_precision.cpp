// The bf16 / fp16 rounding of reference/precision.hpp against the IEEE 754 definitions: known bit
// patterns, every one of the 65536 values of each format round-tripping, and every midpoint
// between neighbouring values rounding to the even one (and a float ulp either side to the nearer).
#include <algorithm>
#include <bit>
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>

#include "reference/error.hpp"
#include "reference/flash_attention.hpp"
#include "reference/inputs.hpp"
#include "reference/precision.hpp"

using namespace ringlab;

namespace {

bool is_nan16(uint16_t bits, int exponent_mask, int fraction_mask) {
  return (bits & exponent_mask) == exponent_mask && (bits & fraction_mask) != 0;
}

// For every pair of neighbouring finite positive values a < b of a 16-bit format (from_bits), the
// midpoint rounds to the one with an even last bit, and one float ulp either side of it to the
// nearer. Midpoints of 16-bit formats have at most 12 significant bits: exact in float.
template <class To, class From>
void check_midpoints(To to_bits, From from_bits, uint16_t largest_finite) {
  for (uint16_t bits = 0; bits < largest_finite; ++bits) {
    const float a = from_bits(bits), b = from_bits(static_cast<uint16_t>(bits + 1));
    const float mid = static_cast<float>((static_cast<double>(a) + static_cast<double>(b)) / 2);
    REQUIRE(static_cast<double>(mid) == (static_cast<double>(a) + static_cast<double>(b)) / 2);
    const uint16_t even = (bits & 1U) ? static_cast<uint16_t>(bits + 1) : bits;
    REQUIRE(to_bits(mid) == even);
    REQUIRE(to_bits(std::nextafter(mid, 0.0f)) == bits);
    REQUIRE(to_bits(std::nextafter(mid, INFINITY)) == static_cast<uint16_t>(bits + 1));
    REQUIRE(to_bits(-mid) == static_cast<uint16_t>(even | 0x8000U));
  }
}

}  // namespace

TEST_CASE("bf16 and fp16 bit patterns from the IEEE definitions", "[precision]") {
  CHECK(bf16_bits(1.0f) == 0x3F80);
  CHECK(bf16_bits(-2.0f) == 0xC000);
  CHECK(bf16_bits(0.0f) == 0x0000);
  CHECK(bf16_bits(-0.0f) == 0x8000);
  CHECK(bf16_bits(1.0f + std::ldexp(1.0f, -8)) == 0x3F80);        // the tie 1 + 2^-8: down to even
  CHECK(bf16_bits(1.0f + 3 * std::ldexp(1.0f, -8)) == 0x3F82);    // the tie 1 + 3 2^-8: up to even
  CHECK(bf16_bits(std::numeric_limits<float>::max()) == 0x7F80);  // beyond the largest bf16: infinity
  CHECK(bf16_bits(INFINITY) == 0x7F80);
  CHECK(bf16_bits(std::numeric_limits<float>::denorm_min()) == 0x0000);
  CHECK(bf16_bits(std::bit_cast<float>(0x00018000U)) == 0x0002);  // a float subnormal tie, up to even
  CHECK(is_nan16(bf16_bits(NAN), 0x7F80, 0x7F));
  CHECK(is_nan16(bf16_bits(std::bit_cast<float>(0x7F800001U)), 0x7F80, 0x7F));  // a signalling NaN stays NaN

  CHECK(fp16_bits(1.0f) == 0x3C00);
  CHECK(fp16_bits(-2.0f) == 0xC000);
  CHECK(fp16_bits(65504.0f) == 0x7BFF);
  CHECK(fp16_bits(65519.0f) == 0x7BFF);
  CHECK(fp16_bits(65520.0f) == 0x7C00);  // the tie above the largest half rounds to infinity
  CHECK(fp16_bits(-1e6f) == 0xFC00);
  CHECK(fp16_bits(std::ldexp(1.0f, -14)) == 0x0400);  // the smallest normal
  CHECK(fp16_bits(std::ldexp(1.0f, -24)) == 0x0001);  // the smallest subnormal
  CHECK(fp16_bits(std::ldexp(1.0f, -25)) == 0x0000);  // the tie to it: down to zero (even)
  CHECK(fp16_bits(std::ldexp(1.5f, -25)) == 0x0001);
  CHECK(fp16_bits(std::ldexp(3.0f, -25)) == 0x0002);     // 1.5 units: the tie goes to 2 (even)
  CHECK(fp16_bits(std::ldexp(1023.5f, -24)) == 0x0400);  // the largest subnormal's tie carries into normal
  CHECK(fp16_bits(std::numeric_limits<float>::denorm_min()) == 0x0000);
  CHECK(is_nan16(fp16_bits(NAN), 0x7C00, 0x3FF));
  CHECK(is_nan16(fp16_bits(std::bit_cast<float>(0x7F800001U)), 0x7C00, 0x3FF));

  CHECK(unit_roundoff(Precision::bf16) == std::ldexp(1.0, -8));
  CHECK(unit_roundoff(Precision::fp16) == std::ldexp(1.0, -11));
  CHECK(round_to(Precision::fp32, 0.1f) == 0.1f);
}

TEST_CASE("every bf16 and fp16 value round-trips through float", "[precision]") {
  for (uint32_t i = 0; i < 65536; ++i) {
    const auto bits = static_cast<uint16_t>(i);
    const float b = from_bf16_bits(bits);
    if (std::isnan(b)) {
      REQUIRE(is_nan16(bits, 0x7F80, 0x7F));
      REQUIRE(std::isnan(from_bf16_bits(bf16_bits(b))));
    } else {
      REQUIRE(bf16_bits(b) == bits);
    }
    const float h = from_fp16_bits(bits);
    if (is_nan16(bits, 0x7C00, 0x3FF)) {
      REQUIRE(std::isnan(h));
      REQUIRE(is_nan16(fp16_bits(h), 0x7C00, 0x3FF));
    } else {
      REQUIRE(fp16_bits(h) == bits);
      // fp16's value from its definition: (-1)^s 2^(e-15) (1 + f/1024), subnormals 2^-14 f/1024.
      const int e = (bits >> 10) & 0x1F, f = bits & 0x3FF;
      const double magnitude = e == 31 ? INFINITY : e == 0 ? std::ldexp(f, -24) : std::ldexp(1024 + f, e - 25);
      REQUIRE(static_cast<double>(h) == ((bits & 0x8000U) ? -magnitude : magnitude));
    }
  }
}

TEST_CASE("midpoints between neighbouring bf16 and fp16 values round to even", "[precision]") {
  check_midpoints(bf16_bits, from_bf16_bits, 0x7F7F);
  check_midpoints(fp16_bits, from_fp16_bits, 0x7BFF);
}

TEST_CASE("round_tensor reports an fp16 overflow with the tensor and the element", "[precision]") {
  Tensor<float> t({2, 3}, 1.0f);
  t[5] = 70000.0f;  // element (1, 2)
  try {
    round_tensor(t, Precision::fp16, "k");
    FAIL("no overflow reported");
  } catch (const PrecisionOverflow& overflow) {
    CHECK(overflow.tensor == "k");
    CHECK(overflow.index == Shape{1, 2});
    CHECK_THAT(overflow.what(), Catch::Contains("k(1, 2) = 70000") && Catch::Contains("65504"));
  }
  Tensor<float> fine({2}, 0.1f);
  round_tensor(fine, Precision::bf16, "q");
  CHECK(fine[0] == from_bf16_bits(bf16_bits(0.1f)));
  CHECK(fine[0] != 0.1f);
  CHECK_THROWS_AS(parse_precision("fp8"), UsageError);
  CHECK(parse_precision("fp16") == Precision::fp16);
}

TEST_CASE("the exp and logsigmoid LSE merges agree in float64 and are exact", "[precision]") {
  // Two states over disjoint key sets, built from their definition; merged both ways, against the
  // state of the union computed directly.
  const int64_t width = 3;
  const std::vector<double> scores_a{0.3, -1.2, 2.5}, scores_b{-0.7, 1.9};
  const std::vector<double> v_a{0.1, -0.4, 0.9, 1.3, 0.2, -0.8, -0.6, 0.7, 0.05}, v_b{0.4, -1.1, 0.3, -0.2, 0.6, 0.8};
  auto state = [&](const std::vector<double>& scores, const std::vector<double>& values) {
    double lse = -INFINITY;
    for (double s : scores) lse = std::max(lse, s);
    double sum = 0;
    std::vector<double> out(width, 0.0);
    for (size_t j = 0; j < scores.size(); ++j) {
      const double p = std::exp(scores[j] - lse);
      sum += p;
      for (int64_t d = 0; d < width; ++d) out[d] += p * values[j * width + d];
    }
    for (double& o : out) o /= sum;
    return std::pair{out, lse + std::log(sum)};
  };
  std::vector<double> all_scores = scores_a, all_values = v_a;
  all_scores.insert(all_scores.end(), scores_b.begin(), scores_b.end());
  all_values.insert(all_values.end(), v_b.begin(), v_b.end());
  const auto [out_all, lse_all] = state(all_scores, all_values);
  for (const double shift : {0.0, 500.0, -700.0}) {  // LSEs far beyond e^x's double range: no overflow
    auto [out_a, lse_a] = state(scores_a, v_a);
    const auto [out_b, lse_b] = state(scores_b, v_b);
    auto out_s = out_a;
    double lse_e = lse_a + shift, lse_s = lse_a + shift;
    merge_lse_row(out_a.data(), lse_e, out_b.data(), lse_b + shift, width, MergeForm::exp);
    merge_lse_row(out_s.data(), lse_s, out_b.data(), lse_b + shift, width, MergeForm::logsigmoid);
    CHECK(lse_e - shift == Approx(lse_all).epsilon(1e-14));
    CHECK(lse_s - shift == Approx(lse_all).epsilon(1e-14));
    for (int64_t d = 0; d < width; ++d) {
      CHECK(out_a[d] == Approx(out_all[d]).epsilon(1e-13));
      CHECK(out_s[d] == Approx(out_all[d]).epsilon(1e-13));
      CHECK(std::abs(out_a[d] - out_s[d]) <= 1e-14);  // a few ulps of values of order 1
    }
  }
  // The identity: a -inf LSE on either side.
  std::vector<double> out{1, 2, 3}, other{4, 5, 6};
  double lse = -INFINITY;
  merge_lse_row(out.data(), lse, other.data(), 0.5, width, MergeForm::logsigmoid);
  CHECK(out == other);
  CHECK(lse == 0.5);
  merge_lse_row(out.data(), lse, other.data(), -std::numeric_limits<double>::infinity(), width, MergeForm::logsigmoid);
  CHECK(lse == 0.5);
  CHECK(parse_merge_form("logsigmoid") == MergeForm::logsigmoid);
  CHECK_THROWS_AS(parse_merge_form("log"), UsageError);
}

namespace {

// The blockwise kernel with low-precision operands (KernelOptions::operands) against the same
// rounding points written out directly in float64: forward P = exp(s - m) rounded to the
// precision before P V, l summing the unrounded P; backward dS = P (dP - delta) from the unrounded
// P, then P rounded before dV and dS before dK and dQ. Causal, GQA (2 query heads per kv head).
struct LowPrecisionDirect {
  Tensor<double> out, dq, dk, dv;
};

LowPrecisionDirect direct_low_precision(const AttentionInputs<float>& x, const Tensor<float>& lse,
                                        const Tensor<float>& delta, Precision precision) {
  const int64_t S = x.q.dim(1), H = x.q.dim(2), D = x.q.dim(3), group = H / x.k.dim(2);
  const double scale = 1 / std::sqrt(static_cast<double>(D));
  LowPrecisionDirect r{Tensor<double>(x.q.shape()), Tensor<double>(x.q.shape()), Tensor<double>(x.k.shape()),
                       Tensor<double>(x.k.shape())};
  auto score = [&](int64_t i, int64_t j, int64_t h) {
    double dot = 0;
    for (int64_t d = 0; d < D; ++d) dot += double(x.q(0, i, h, d)) * x.k(0, j, h / group, d);
    return dot * scale;
  };
  auto rounded = [&](double value) { return double(round_to(precision, static_cast<float>(value))); };
  for (int64_t h = 0; h < H; ++h)
    for (int64_t i = 0; i < S; ++i) {
      double m = -INFINITY, l = 0;
      for (int64_t j = 0; j <= i; ++j) m = std::max(m, score(i, j, h));
      for (int64_t j = 0; j <= i; ++j) {
        const double p = std::exp(score(i, j, h) - m);
        l += p;
        for (int64_t d = 0; d < D; ++d) r.out(0, i, h, d) += rounded(p) * x.v(0, j, h / group, d);
      }
      for (int64_t d = 0; d < D; ++d) r.out(0, i, h, d) /= l;
      for (int64_t j = 0; j <= i; ++j) {
        const double p = std::exp(score(i, j, h) - lse(0, h, i));
        double dp = 0;
        for (int64_t d = 0; d < D; ++d) dp += double(x.dout(0, i, h, d)) * x.v(0, j, h / group, d);
        const double ds = rounded(p * (dp - delta(0, h, i)));
        for (int64_t d = 0; d < D; ++d) {
          r.dv(0, j, h / group, d) += rounded(p) * x.dout(0, i, h, d);
          r.dk(0, j, h / group, d) += ds * scale * x.q(0, i, h, d);
          r.dq(0, i, h, d) += ds * scale * x.k(0, j, h / group, d);
        }
      }
    }
  return r;
}

// RMS of a - b over RMS of b.
double relative_rms(const Tensor<float>& a, const Tensor<double>& b) {
  double diff = 0, norm = 0;
  for (int64_t i = 0; i < a.size(); ++i) {
    diff += (a[i] - b[i]) * (a[i] - b[i]);
    norm += b[i] * b[i];
  }
  return std::sqrt(diff / norm);
}

}  // namespace

// What is left between the kernel and the direct form is fp32 arithmetic and the rare P or dS that
// the two round to neighbouring values (an fp32 exp a few ulps from the float64 one): far below
// u/32 in RMS. The kernel without the rounding (operands fp32) is about u/4 away, over u/8.
TEST_CASE("blockwise kernel with bf16 / fp16 operands rounds P and dS where the GPU kernels do", "[precision]") {
  AttentionDims dims;
  dims.seq = 200, dims.heads = 2, dims.kv_heads = 1, dims.dim = 32;
  for (const Precision precision : {Precision::bf16, Precision::fp16}) {
    AttentionInputs<float> x = make_inputs(dims, 9, true);
    for (Tensor<float>* t : {&x.q, &x.k, &x.v, &x.dout}) round_tensor(*t, precision, "input");
    const Mask causal(MaskKind::causal);
    const AttentionOutput<float> forward = flash_attention(x.q, x.k, x.v, causal);
    const Tensor<float> delta = softmax_delta(x.dout, forward.out);
    const LowPrecisionDirect direct = direct_low_precision(x, forward.lse, delta, precision);
    const double u = unit_roundoff(precision);
    for (const Precision operands : {precision, Precision::fp32}) {
      KernelOptions options;
      options.operands = operands;
      const AttentionOutput<float> out = flash_attention(x.q, x.k, x.v, causal, {}, {}, options);
      AttentionGrads<float> grads = flash_attention_backward(x.q, x.k, x.v, forward, x.dout, causal, {}, {}, options);
      const double distances[] = {relative_rms(out.out, direct.out), relative_rms(grads.dq, direct.dq),
                                  relative_rms(grads.dk, direct.dk), relative_rms(grads.dv, direct.dv)};
      for (const double distance : distances) {
        INFO(precision_name(precision) << ", operands " << precision_name(operands) << ": RMS distance " << distance / u
                                       << " u (out, dq, dk, dv in turn)");
        if (operands == Precision::fp32) {
          CHECK(distance > u / 8);
        } else {
          CHECK(distance < u / 32);
        }
      }
    }
  }
}
