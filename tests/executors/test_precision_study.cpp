// Low-precision emulation in the sim executor and the precision study: one rank's error is the
// same whichever accumulator, fp32 accumulation keeps the error of every P near P = 1's, rounding
// the accumulators after every merge makes it grow with P, and every algorithm still verifies in
// bf16 against the precision's tolerances.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <string>

#include "executors/sim/precision_study.hpp"
#include "executors/sim/sim_executor.hpp"
#include "reference/error.hpp"
#include "reference/inputs.hpp"
#include "sim/pipeline/problem.hpp"

using namespace ringlab;

namespace {

RunConfig small_problem() {
  RunConfig config;
  config.layout = "zigzag";
  config.dims = {1, 256, 2, 0, 32};
  config.causal = true;
  config.precision = "bf16";
  return config;
}

}  // namespace

TEST_CASE("precision study: flat with fp32 accumulation, growing with storage accumulation", "[precision]") {
  const PrecisionStudy study = run_precision_study(small_problem(), {8, 2, 4});
  REQUIRE(study.ranks == std::vector<int64_t>{1, 2, 4, 8});  // P = 1 added, sorted
  REQUIRE(study.rows.size() == 4 * 3 * 5);
  for (const char* tensor : {"out", "lse", "dq", "dk", "dv"}) {
    INFO(tensor);
    const PrecisionStudyRow &one32 = study.row("fp32", 1, tensor), &one16 = study.row("storage", 1, tensor);
    CHECK(one32.rms_error == one16.rms_error);  // one step: nothing merged
    CHECK(one32.rms_error == study.row("fused", 1, tensor).rms_error);
    CHECK(one32.rms_error > 0);
    for (const int64_t p : {2, 4, 8}) {
      const PrecisionStudyRow& row = study.row("fp32", p, tensor);
      CHECK(row.rms_ratio == Approx(row.rms_error / one32.rms_error));
      CHECK(row.rms_ratio < 1.5);  // the double rounding of partials and output: at most about sqrt(2)
    }
  }
  // dK/dV travel P hops: rounded at each, they lose most; the forward's running output less so.
  for (const char* tensor : {"dk", "dv"}) {
    INFO(tensor);
    CHECK(study.row("storage", 8, tensor).rms_error > 1.5 * study.row("fp32", 8, tensor).rms_error);
    CHECK(study.row("storage", 8, tensor).rms_error > study.row("storage", 4, tensor).rms_error);
  }
  CHECK(study.row("storage", 8, "out").rms_error > study.row("fp32", 8, "out").rms_error);
  // Fused accumulation rounds nothing but the inputs and the final outputs: every P's max and RMS
  // errors stay within 1.5x of one rank's (the fp32 sums differ only in order), while storing each
  // step's result in bf16 (fp32) costs the gradients a visible share at every P >= 2. (The LSE is
  // fp32 in every mode: its error, about 1e-6, is fp32 merging's own and grows slowly with the number
  // of merges; only its RMS is held to the 1.5x here.)
  for (const char* tensor : {"out", "lse", "dq", "dk", "dv"}) {
    INFO(tensor);
    for (const int64_t p : {2, 4, 8}) {
      if (std::string(tensor) != "lse") CHECK(study.row("fused", p, tensor).max_ratio < 1.5);
      CHECK(study.row("fused", p, tensor).rms_ratio < 1.5);
    }
  }
  for (const char* tensor : {"dk", "dv"}) {
    INFO(tensor);
    CHECK(study.row("fp32", 8, tensor).rms_error > 1.1 * study.row("fused", 8, tensor).rms_error);
  }
  const nlohmann::json json = to_json(study);
  CHECK(json["rows"].size() == study.rows.size());
  CHECK(json["precision"] == "bf16");
}

TEST_CASE("precision study refuses fp32 storage, a P the layout cannot split, and too many ranks", "[precision]") {
  RunConfig config = small_problem();
  config.precision = "fp32";
  CHECK_THROWS_AS(run_precision_study(config, {2}), UsageError);
  CHECK_THROWS_WITH(run_precision_study(small_problem(), {1, 256}), Catch::Contains("does not pad"));
  // Three runs per P, each slower as P^2: refused before any runs, however well S splits.
  RunConfig many = small_problem();
  many.dims.seq = 4096;
  CHECK_THROWS_WITH(run_precision_study(many, {1, 512}),
                    Catch::Contains("--ranks 512 is too many for the precision study") &&
                        Catch::Contains("use at most --ranks 256, or ringlab run -P 512 --precision bf16 --backward"));
}

TEST_CASE("precision study: --docs random:N runs the same documents at every P", "[precision]") {
  // Zig-zag draws random documents in multiples of 2P tokens, coarsened while they stay short:
  // at S = 256 that is 32-token multiples at P = 16 but 16-token ones at P <= 8. Every P must run
  // the oracle's documents, or its "error" is that of another mask (order 1, not 1e-3).
  RunConfig config = small_problem();
  config.docs = "random:3";
  const PrecisionStudy study = run_precision_study(config, {2, 4, 8, 16});
  for (const int64_t p : study.ranks) {
    INFO("P=" << p);
    CHECK(study.row("fp32", p, "out").max_error < 0.05);
    CHECK(study.row("fp32", p, "out").rms_ratio < 1.5);
  }
  // Rank counts that do not divide the largest may not split its documents: refused by name.
  config.dims.seq = 384;
  config.layout = "striped";
  CHECK_THROWS_WITH(run_precision_study(config, {3, 4}),
                    Catch::Contains("--docs random:3 draws its documents (") &&
                        Catch::Contains("cannot split them at P=3; list rank counts that divide the largest"));
}

TEST_CASE("precision study runs a hybrid (its P = 1 is one rank, whatever U)", "[precision]") {
  RunConfig config = small_problem();
  config.algo = "hybrid";
  config.ulysses = 2;
  const PrecisionStudy study = run_precision_study(config, {2, 4});
  REQUIRE(study.ranks == std::vector<int64_t>{1, 2, 4});
  CHECK(study.config.rfind("hybrid(U=2, R=2)", 0) == 0);
  CHECK(study.row("fp32", 4, "dv").rms_ratio < 1.5);
}

TEST_CASE("bf16 and fp16 emulation verify every algorithm, both accumulators, both merges", "[precision]") {
  for (const auto& [algo, layout, ulysses] :
       {std::tuple{"ring", "zigzag", 0}, std::tuple{"allgather", "striped", 0}, std::tuple{"ulysses", "contiguous", 0},
        std::tuple{"hybrid", "zigzag", 2}}) {
    for (const char* precision : {"bf16", "fp16"}) {
      RunConfig config = small_problem();
      config.algo = algo, config.layout = layout, config.ulysses = ulysses, config.ranks = 4;
      config.dims.heads = 4;
      config.backward = true, config.precision = precision;
      config.accumulate = ulysses ? "storage" : "fp32";
      config.merge = algo[0] == 'r' ? "logsigmoid" : "exp";
      config = resolve_problem(config).config;
      SimExecutor sim;
      sim.configure(config);
      AttentionInputs<double> x = make_inputs(config.dims, 5, true).cast<double>();
      sim.prepare_inputs(x);
      for (int64_t i = 0; i < x.q.size(); ++i)
        REQUIRE(static_cast<float>(x.q[i]) == round_to(parse_precision(precision), static_cast<float>(x.q[i])));
      const ExecutionResult result = sim.execute(build_plan(plan_spec(config)), x.cast<float>(), {});
      REQUIRE(result.ok());
      const Verification v =
          verify(result.outputs, compute_reference(x, config.mask(), true), result.executor, sim.needs().tolerance);
      INFO(algo << " " << precision);
      CHECK(v.ok());
      CHECK(v.checks[0].tolerance.abs == 8 * unit_roundoff(parse_precision(precision)));
    }
  }
}
