// Shapes from peers' test suites (zhuzilin/ring-flash-attention, yunchang) against exact
// attention. Large: run by the default test stage, not under the sanitizers (label "peers").
#include <catch2/catch.hpp>

#include "executors/sim/sim_executor.hpp"
#include "reference/inputs.hpp"
#include "tests/plan/plan_cases.hpp"

using namespace ringlab;

TEST_CASE("shapes from peers' test suites", "[sim][peers]") {
  struct Shape {
    Algorithm algo;
    LayoutKind layout;
    int64_t P, U;
    AttentionDims dims;
  };
  // zhuzilin/ring-flash-attention and yunchang test shapes.
  const Shape s = GENERATE(Shape{Algorithm::ring, LayoutKind::contiguous, 8, 1, {1, 3816, 5, 5, 128}},
                           Shape{Algorithm::ring, LayoutKind::zigzag, 8, 1, {1, 3824, 5, 5, 128}},
                           Shape{Algorithm::ring, LayoutKind::striped, 8, 1, {1, 3824, 5, 5, 128}},
                           Shape{Algorithm::ring, LayoutKind::zigzag, 4, 1, {2, 4096, 12, 12, 128}},
                           Shape{Algorithm::ring, LayoutKind::contiguous, 4, 1, {2, 4096, 32, 4, 128}},
                           Shape{Algorithm::hybrid, LayoutKind::zigzag, 4, 2, {1, 1024, 32, 32, 64}});
  const bool backward = s.dims.seq * s.dims.heads * s.dims.batch <= 40000;  // the larger two forward only
  const PlanSpec spec = test::spec_for(s.algo, s.layout, s.P, s.U, s.dims, true, backward);
  const Plan plan = build_plan(spec);
  INFO(plan.spec().describe());
  const AttentionInputs<float> x = make_inputs(spec.dims, 1, spec.backward);
  const ExecutionResult sim = SimExecutor().execute(plan, x, {});
  REQUIRE(sim.ok());
  const Verification verification =
      verify(sim.outputs, compute_reference(x.cast<double>(), MaskKind::causal, spec.backward), "sim");
  for (const TensorCheck& check : verification.checks) {
    INFO(check.name << ": " << check.result.describe() << ", max abs error " << check.result.max_abs_error);
    CHECK(check.result.ok);
  }
}
