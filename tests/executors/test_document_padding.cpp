// Packed documents of any length on every layout: the per-document layouts (zig-zag, striped) pad
// each document at its end to what they cut (PlanSpec::document_padding), the others take the
// lengths as they are. Forward and backward against the oracle for documents x layouts x P, with
// lengths that are no multiple of 2P, a 1-token document and documents shorter than P; the balance
// figures count real work only; and the negative control: the same run with each document's
// last token read as padding (the map TransformerEngine #1930 used) fails.
#include <catch2/catch.hpp>
#include <numeric>

#include "executors/sim/sim_executor.hpp"
#include "reference/inputs.hpp"
#include "sim/pipeline/config.hpp"
#include "sim/pipeline/problem.hpp"
#include "sim/pipeline/tables.hpp"

using namespace ringlab;

namespace {

RunConfig documents_config(const std::string& layout, int64_t P, const std::string& docs, int64_t seq, bool causal) {
  RunConfig config;
  config.layout = layout;
  config.ranks = P;
  config.dims = {2, seq, 2, 1, 8};  // B = 2, GQA
  config.causal = causal;
  config.docs = docs;
  config.backward = true;
  config.seed = 7;
  config.progress = false;
  return resolve_problem(config).config;  // --docs laid out for the layout, as a run does
}

// Runs `plan_spec_` on the sim executor with the user's tokens placed at `at` among its positions
// (zeros elsewhere) and returns the outputs read back from there, in the user's token order.
ExecutionResult run_placed(const PlanSpec& spec, const std::vector<int64_t>& at, const AttentionInputs<float>& x) {
  const Plan plan = build_plan(spec);
  auto place = [&](const Tensor<float>& t) {
    Shape shape = t.shape();
    shape[1] = spec.dims.seq;
    Tensor<float> result(shape);
    scatter_rows(t, at, 1, result);
    return result;
  };
  const AttentionInputs<float> placed{place(x.q), place(x.k), place(x.v), place(x.dout)};
  WorldOptions world;
  world.timeout_seconds = 30;
  SimExecutor sim(world);
  ExecutionResult result = sim.execute(plan, placed, {});
  REQUIRE(result.ok());
  RunOutputs& o = result.outputs;
  o.out = gather_rows(o.out, at, 1), o.lse = gather_rows(o.lse, at, 2);
  o.dq = gather_rows(o.dq, at, 1), o.dk = gather_rows(o.dk, at, 1), o.dv = gather_rows(o.dv, at, 1);
  return result;
}

std::string failures(const Verification& v) {
  std::string text;
  for (const TensorCheck& c : v.checks) text += c.name + ": " + c.result.describe() + "\n";
  return text;
}

}  // namespace

TEST_CASE("documents of any length verify on every layout, forward and backward, at P = 2, 3, 4", "[sim][documents]") {
  const int64_t P = GENERATE(2, 3, 4);
  const std::string layout = GENERATE("zigzag", "striped", "contiguous", "balanced");
  // Lengths no multiple of 2P (nor of P), a 1-token document, documents shorter than P.
  const auto [docs, causal] =
      GENERATE(std::pair{"13,1,2,25,7", true}, std::pair{"5,31,1,11", false}, std::pair{"47,1", true});
  const RunConfig config = documents_config(layout, P, docs, 48, causal);
  const PlanSpec spec = plan_spec(config);
  INFO(build_plan(spec).spec().describe());
  const bool per_document = layout == "zigzag" || layout == "striped";
  CHECK(spec.padded_documents() == per_document);  // every set has a length the per-document layouts must pad
  CHECK(spec.tokens() == 48);

  const AttentionInputs<float> x = make_inputs(config.dims, config.seed, true);
  const ReferenceOutputs reference = compute_reference(x.cast<double>(), config.mask(), true);
  const ExecutionResult run = run_placed(spec, spec.token_positions(), x);
  const Verification verification = verify(run.outputs, reference, "sim");
  INFO(failures(verification));
  CHECK(verification.ok());

  // The balance figures count real work: each rank's pairs are those of its real rows against the
  // whole problem under the user's mask, and they add up to the problem's visible pairs.
  const Plan plan = build_plan(spec);
  const std::vector<int64_t> user = spec.user_positions();
  const Mask mask = config.mask();
  const std::vector<int64_t> all = iota_positions(48);
  int64_t total = 0;
  for (int64_t r = 0; r < P; ++r) {
    std::vector<int64_t> rows;
    for (int64_t p : plan.layout().positions(r))
      if (user[static_cast<size_t>(p)] >= 0) rows.push_back(user[static_cast<size_t>(p)]);
    const int64_t pairs = mask.pairs(rows, all);
    CHECK(run.ranks[static_cast<size_t>(r)].pairs == 2 * pairs);  // forward and backward
    total += pairs;
  }
  CHECK(total == mask.pairs(all, all));

  // Negative control: the same plan with each document's last token taken for padding (a 7-token
  // document run as 6) on the same placement of the tokens.
  PlanSpec dropped = spec;
  if (dropped.document_padding.empty()) dropped.document_padding.assign(dropped.documents.size(), 0);
  int64_t cut = 0;
  for (size_t d = 0; d < dropped.documents.size(); ++d) {
    if (dropped.documents[d] < 2) continue;
    --dropped.documents[d], ++dropped.document_padding[d], ++cut;
  }
  REQUIRE(cut > 0);
  const Verification wrong = verify(run_placed(dropped, spec.token_positions(), x).outputs, reference, "sim");
  CHECK_FALSE(wrong.checks[0].result.ok);  // out of the dropped rows
  CHECK_FALSE(wrong.ok());
}

TEST_CASE("a per-document layout with any lengths: the padding is at each document's end, the map is exact",
          "[sim][documents]") {
  // The example: 300, 500 and 200 tokens at P = 4 (2P = 8): 300 and 500 gain 4 padding rows.
  const RunConfig config = documents_config("zigzag", 4, "300,500,200", 1000, true);
  const PlanSpec spec = plan_spec(config);
  CHECK(spec.document_padding == std::vector<int64_t>{4, 4, 0});
  CHECK(spec.dims.seq == 1008);
  CHECK(spec.padding == 0);
  const std::vector<int64_t> at = spec.token_positions();
  CHECK(at[299] == 299);
  CHECK(at[300] == 304);  // document 1 starts after document 0's padding
  CHECK(at[800] == 808);
  // Zig-zag per document: document 0 spans 304 positions, 8 chunks of 38; rank 0 holds chunks 0 and 7,
  // whose last 4 rows are the padding.
  const Plan plan = build_plan(spec);
  const std::vector<int64_t> user = spec.user_positions();
  const std::vector<int64_t> rank0 = plan.layout().positions(0);
  CHECK(user[static_cast<size_t>(rank0[0])] == 0);
  int64_t padding_rows = 0;
  for (int64_t r = 0; r < 4; ++r)
    for (int64_t p : plan.layout().positions(r)) padding_rows += user[static_cast<size_t>(p)] < 0 ? 1 : 0;
  CHECK(padding_rows == 8);
  for (int64_t p = 266; p < 304; ++p) CHECK(plan.layout().rank_of(p) == 0);  // chunk 7 of document 0
}
