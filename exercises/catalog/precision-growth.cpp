// Exercise precision-growth - the error of a bf16 (or fp16) ring against P: how much the dV error
// grows from one rank to P ranks when the travelling dK/dV are rounded after every hop, how much
// when they stay fp32, and which accumulator keeps the error independent of P. The answers are
// measured by the precision study (executors/sim/precision_study.hpp) on the exercise's problem.
#include "executors/sim/precision_study.hpp"
#include "exercises/catalog/catalog.hpp"
#include "exercises/catalog/support.hpp"

namespace ringlab::exercises::catalog {

// The exercise's problem: small enough that writing it runs the study in a fraction of a second.
RunConfig precision_growth_problem(int64_t ranks, bool fp16, int64_t seed) {
  RunConfig config;
  config.layout = "zigzag";
  config.ranks = ranks;
  config.dims = {1, 256, 2, 0, 32};
  config.causal = true;
  config.backward = true;
  config.precision = fp16 ? "fp16" : "bf16";
  config.seed = static_cast<uint64_t>(seed);
  return config;
}

}  // namespace ringlab::exercises::catalog

namespace ringlab::exercises::catalog::precision_growth {

namespace {

struct Growth {
  int64_t ranks = 8, fp16 = 0, seed = 0;
  static Growth drawn(VariantDraw& d) { return {d.pick<int64_t>({4, 8, 16}), d.integer(0, 1), d.integer(1, 99)}; }
};

}  // namespace

static void write(VariantDraw& draw, Exercise& e) {
  const Growth g = variant_params<Growth>(draw, Growth{}, &Growth::drawn);
  const RunConfig config = precision_growth_problem(g.ranks, g.fp16 != 0, g.seed);
  const PrecisionStudy study = run_precision_study(config, {1, g.ranks});
  const double storage = study.row("storage", g.ranks, "dv").rms_ratio;
  const double fp32 = study.row("fp32", g.ranks, "dv").rms_ratio;
  const char* precision = g.fp16 ? "fp16" : "bf16";

  e.numbers = {{"P", g.ranks}, {"fp16", g.fp16}, {"seed", g.seed}};
  e.parameters = {ranks_parameter(g.ranks, "ranks of the ring (zig-zag layout, causal)"),
                  {"problem", "B=1 S=256 H=2 D=32", cat("inputs from --seed ", g.seed, ", stored in ", precision)},
                  {"precision", precision, "storage: inputs, K/V on the wire, each step's partial results"}};
  e.statement = cat(
      "A ring attention forward and backward stores its inputs and each step's partial results in ", precision,
      ".\nIts dK/dV accumulators travel the ring: kept in fp32 (--accumulate fp32), or rounded to ", precision,
      " after every hop\n(--accumulate storage). Measure the RMS error of dV against float64, as a multiple of the "
      "same error on one rank.\nstorage: the ratio at P with storage accumulation.   fp32: the ratio at P with fp32 "
      "accumulation.\nindependent: the accumulator's width in bits (32 or 16) that keeps the error independent of P.");
  e.parts = {ratio_part("storage", "dV RMS error at P / at P = 1, accumulators rounded every hop", storage, 0.01),
             ratio_part("fp32", "dV RMS error at P / at P = 1, fp32 accumulators", fp32, 0.01)
                 .mistake(1.0, "no growth at all",
                          "the partial dV of each step is still rounded, and the sum again at the end: two roundings "
                          "where one rank has one, about sqrt(2) in RMS"),
             count_part("independent", "accumulator width in bits that keeps the error independent of P", 32)
                 .mistake(16.0, "the storage precision",
                          "rounded after every hop, the accumulator gains an error of up to u per hop: it grows with "
                          "P")};
  e.solution = lines({
      cat("The study at P = 1 and P = ", g.ranks, ": with ", precision, " accumulators dV's RMS error is ",
          ratio_text(storage), " P = 1's; with fp32 accumulators ", ratio_text(fp32), "."),
      "With fp32 accumulators only the extra rounding of each step's partial result remains (about sqrt(2) in RMS),",
      "whatever P: the 32-bit accumulator keeps the error independent of P.",
  });
  e.command = cat("ringlab study precision --layout zigzag --causal --seq 256 --heads 2 --dim 32 --precision ",
                  precision, " --seed ", g.seed, " --ranks 1,", g.ranks, "    # the dv rows, rms/P=1");
}

constexpr CatalogEntry kEntry{"precision-growth", "How does a bf16 ring's error grow with P?",
                              "ringlab's chapter on low precision", "ringlab", write};

}  // namespace ringlab::exercises::catalog::precision_growth
