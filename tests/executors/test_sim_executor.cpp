// The sim executor against exact attention: every algorithm x layout x mask x pass at
// P in {1, 2, 3, 4, 8}, with and without GQA; the load-imbalance figures; the erratum variants;
// determinism; and the shapes of peers' test suites.
#include <catch2/catch.hpp>
#include <tuple>

#include "executors/sim/sim_executor.hpp"
#include "reference/inputs.hpp"
#include "sim/pipeline/tables.hpp"
#include "tests/plan/plan_cases.hpp"

using namespace ringlab;

namespace {

struct Outcome {
  ExecutionResult sim;
  Verification verification;
};

Outcome run_and_verify(const PlanSpec& spec, uint64_t seed = 1) {
  const Plan plan = build_plan(spec);
  const AttentionInputs<float> x = make_inputs(spec.dims, seed, spec.backward);
  WorldOptions world;
  world.timeout_seconds = 30;
  SimExecutor sim(world);
  Outcome outcome{sim.execute(plan, x, {}), {}};
  INFO((outcome.sim.failure ? outcome.sim.failure->description : ""));
  REQUIRE(outcome.sim.ok());
  const ReferenceOutputs reference = compute_reference(x.cast<double>(), spec.mask(), spec.backward);
  outcome.verification = verify(outcome.sim.outputs, reference, "sim");
  return outcome;
}

std::string failures(const Verification& v) {
  std::string text;
  for (const TensorCheck& c : v.checks)
    if (!c.result.ok) text += c.name + ": " + c.result.describe() + "\n";
  return text;
}

// The matrix's problem: S = 24P, H = 2P (divisible by P for Ulysses), D = 16, batch 2; the hybrid
// at U = 2 where P is even.
PlanSpec matrix_spec(Algorithm algo, LayoutKind layout, int64_t P, int64_t kv_heads, bool causal, bool skip,
                     bool backward) {
  return test::matrix_spec(algo, layout, P, {2, 24 * P, 2 * P, kv_heads, 16}, causal, skip, backward);
}

void expect_verified(const PlanSpec& spec) {
  INFO(build_plan(spec).spec().describe());
  const Outcome outcome = run_and_verify(spec);
  INFO(failures(outcome.verification));
  CHECK(outcome.verification.ok());
}

}  // namespace

TEST_CASE("every algorithm, layout, mask and pass verifies against exact attention", "[sim][matrix]") {
  const auto [algo, layout, P] = GENERATE(from_range(test::plan_cases()));
  // (causal, skip): full attention; causal skipping masked blocks; causal computing them (--no-skip)
  const auto [causal, skip] = GENERATE(std::tuple{false, true}, std::tuple{true, true}, std::tuple{true, false});
  const bool gqa = GENERATE(false, true);
  const bool backward = GENERATE(false, true);
  expect_verified(matrix_spec(algo, layout, P, gqa ? P : 2 * P, causal, skip, backward));
}

TEST_CASE("windows and packed documents verify against exact attention", "[sim][matrix][mask]") {
  const auto [algo, layout, P] = GENERATE(from_range(test::plan_cases()));
  if (P == 1 || P == 8) return;  // the mask's block decisions differ from one rank at P = 2..4
  // (causal, window, documents, skip): documents; a window; both with causal; computing masked blocks
  const auto [causal, window, documents, skip] =
      GENERATE(std::tuple{true, int64_t{0}, true, true}, std::tuple{false, int64_t{9}, false, true},
               std::tuple{true, int64_t{13}, true, true}, std::tuple{true, int64_t{20}, false, false});
  const bool backward = GENERATE(false, true);
  PlanSpec spec = matrix_spec(algo, layout, P, P, causal, skip, backward);  // GQA
  spec.window = window;
  if (documents) spec.documents = test::test_documents(layout, 24 * P, P);
  expect_verified(spec);
}

TEST_CASE("load imbalance: zig-zag and striped balance causal work, contiguous does not", "[sim][balance]") {
  const int64_t P = GENERATE(2, 4, 8);
  auto imbalance = [&](LayoutKind layout) {
    PlanSpec spec;
    spec.layout = layout;
    spec.ranks = P;
    spec.dims = {1, 256 * P, 2, 2, 16};
    spec.causal = true;
    const Outcome outcome = run_and_verify(spec);
    REQUIRE(outcome.verification.ok());
    return std::pair{load_imbalance(outcome.sim.ranks), outcome.sim.ranks};
  };
  CHECK(imbalance(LayoutKind::zigzag).first.flops_max_over_mean <= 1.02);
  CHECK(imbalance(LayoutKind::striped).first.flops_max_over_mean <= 1.02);
  // Contiguous: rank r does (r + 1/2) blocks of work, so max/mean = (2P - 1)/P and the last rank
  // does 2P - 1 times the first rank's work (the source material's "about 2P").
  const auto [contiguous, ranks] = imbalance(LayoutKind::contiguous);
  CHECK(contiguous.flops_max_over_mean == Approx(double(2 * P - 1) / double(P)).epsilon(0.01));
  CHECK(ranks.back().flops / ranks.front().flops == Approx(double(2 * P - 1)).epsilon(0.01));
  // Skipping: rank r skips the P - 1 - r blocks of its future.
  for (int64_t r = 0; r < P; ++r) CHECK(ranks[r].blocks_skipped == P - 1 - r);
}

TEST_CASE("the reverse-dkv erratum gives wrong gradients at P >= 3 and is invisible at P = 2", "[sim][errata]") {
  const int64_t P = GENERATE(2, 3, 4, 8);
  PlanSpec spec;
  spec.ranks = P;
  spec.dims = {1, 32 * P, 2, 2, 16};
  spec.causal = true;
  spec.backward = true;
  spec.erratum = Erratum::reverse_dkv;
  const Outcome outcome = run_and_verify(spec);
  const auto& checks = outcome.verification.checks;
  CHECK(checks[0].result.ok);  // out: the forward is untouched
  CHECK(checks[2].result.ok);  // dq stays local
  if (P == 2) {
    CHECK(outcome.verification.ok());
  } else {
    CHECK_FALSE(checks[3].result.ok);  // dk
    CHECK_FALSE(checks[4].result.ok);  // dv
  }
}

TEST_CASE("the kv-offset-mask erratum is wrong on every rank, rank 0 included", "[sim][errata]") {
  const int64_t P = GENERATE(3, 4, 8);
  PlanSpec spec;
  spec.ranks = P;
  spec.dims = {1, 32 * P, 2, 2, 16};
  spec.causal = true;
  spec.erratum = Erratum::kv_offset_mask;
  const Plan plan = build_plan(spec);
  const AttentionInputs<float> x = make_inputs(spec.dims, 3, false);
  const ExecutionResult sim = SimExecutor().execute(plan, x, {});
  REQUIRE(sim.ok());
  const ReferenceOutputs reference = compute_reference(x.cast<double>(), MaskKind::causal, false);
  // Rank r holds rows [32 r, 32 (r + 1)); compare its slice of out.
  for (int64_t r = 0; r < P; ++r) {
    Tensor<float> got({1, 32, 2, 16});
    Tensor<double> want({1, 32, 2, 16});
    std::copy_n(&sim.outputs.out(0, 32 * r, 0, 0), 32 * 2 * 16, got.data());
    std::copy_n(&reference.forward.out(0, 32 * r, 0, 0), 32 * 2 * 16, want.data());
    INFO("rank " << r);
    CHECK_FALSE(compare(got, want, fp32_tolerance("out")).ok);  // rank 0: its own block unmasked
  }
}

TEST_CASE("results are bitwise identical from run to run and across kernel thread counts", "[sim]") {
  PlanSpec spec;
  spec.algo = Algorithm::hybrid;
  spec.ulysses = 2;
  spec.layout = LayoutKind::zigzag;
  spec.ranks = 4;
  spec.dims = {2, 256, 4, 2, 32};
  spec.causal = true;
  spec.backward = true;
  const Plan plan = build_plan(spec);
  const AttentionInputs<float> x = make_inputs(spec.dims, 9, true);
  SimExecutor one_thread({}, 1), two_threads({}, 2);
  const ExecutionResult a = one_thread.execute(plan, x, {}), b = one_thread.execute(plan, x, {}),
                        c = two_threads.execute(plan, x, {});
  REQUIRE(a.ok());
  CHECK(a.outputs.out == b.outputs.out);
  CHECK(a.outputs.dk == b.outputs.dk);
  CHECK(a.outputs.out == c.outputs.out);
  CHECK(a.outputs.lse == c.outputs.lse);
  CHECK(a.outputs.dq == c.outputs.dq);
  CHECK(a.outputs.dv == c.outputs.dv);
}

TEST_CASE("diagnosis names the first wrong block", "[sim][errata]") {
  PlanSpec spec;
  spec.ranks = 4;
  spec.dims = {1, 128, 2, 2, 16};
  spec.causal = true;
  spec.erratum = Erratum::kv_offset_mask;
  const Plan plan = build_plan(spec);
  const AttentionInputs<double> inputs = make_inputs(spec.dims, 2, false).cast<double>();
  const ReferenceOutputs reference = compute_reference(inputs, MaskKind::causal, false);
  ExecuteOptions options;
  options.diagnose_inputs = &inputs;
  options.diagnose_reference = &reference;
  const ExecutionResult sim = SimExecutor().execute(plan, inputs.cast<float>(), options);
  REQUIRE(sim.block_errors.size() == 16);  // 4 ranks x 4 steps
  const auto first =
      std::find_if(sim.block_errors.begin(), sim.block_errors.end(), [](const BlockError& e) { return !e.ok; });
  REQUIRE(first != sim.block_errors.end());
  CHECK(first->step == 0);
  CHECK(first->rank == 0);  // `if kv_offset > 0` leaves rank 0's own block unmasked
  // Wrong exactly where the source's mask differs from the causal one: rank 0's own block (offset
  // 0, unmasked) and, on every rank r > 0, the blocks 1..r (every key hidden from local indices).
  for (const BlockError& e : sim.block_errors) {
    const int64_t block = ((e.rank - e.step) % 4 + 4) % 4;
    INFO("rank " << e.rank << " step " << e.step << " block " << block);
    CHECK(e.ok == !((e.rank == 0 && block == 0) || (block > 0 && block <= e.rank)));
  }
}

TEST_CASE("the sim executor's cost: a thread per rank, P x R block computations, refused past this machine",
          "[sim][cost]") {
  PlanSpec spec;
  spec.dims = {1, 2048, 4, 4, 64};
  spec.ranks = 2048;  // the ring's 2048 x 2048 steps: about a GB, slow but it finishes
  const SimExecutor sim;
  const ExecutionCost feasible = sim.cost(spec);
  CHECK(feasible.threads == 2048);
  CHECK(feasible.block_computations == Approx(2048.0 * 2048.0));
  CHECK(feasible.bytes > 5e8);
  CHECK(feasible.refusal.empty());
  spec.backward = true;
  CHECK(sim.cost(spec).block_computations == Approx(2 * 2048.0 * 2048.0));
  spec.algo = Algorithm::ulysses;  // one step per rank: all-to-all, then local attention
  CHECK(sim.cost(spec).block_computations == Approx(2 * 2048.0));
  spec.algo = Algorithm::ring;
  spec.ranks = 100000;
  spec.dims.seq = 100000;
  const ExecutionCost refused = sim.cost(spec);
  CHECK(refused.bytes > 1e12);
  CHECK_THAT(refused.refusal, Catch::Contains("cannot finish P=100000") && Catch::Contains("use fewer --ranks"));
}
