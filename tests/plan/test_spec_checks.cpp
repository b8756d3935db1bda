// Specs that do not make a plan — as a trace file can hold them — are refused with one UsageError
// by build_plan, validate_plan_spec and describe() alike; none of them writes outside a buffer.
// The layout table refuses units without a rank instead of indexing with them.
#include <catch2/catch.hpp>
#include <stdexcept>

#include "reference/error.hpp"
#include "sim/plan/plan.hpp"
#include "tests/plan/plan_cases.hpp"

using namespace ringlab;

namespace {

// The spec a trace held when describe() corrupted the heap: striped per document, P=8, block 2,
// documents {480, 496} = 976 tokens, and S=1008 with the last 32 tail padding, which a
// per-document layout has no rank for.
PlanSpec tail_padded_documents() {
  PlanSpec spec = test::every_field_spec();
  spec.dims.seq = 1008;
  spec.padding = 32;
  return spec;
}

}  // namespace

TEST_CASE("documents that leave tail padding on a per-document layout are refused, never laid out", "[plans][spec]") {
  PlanSpec spec = tail_padded_documents();
  const std::string span = "the documents span 976 positions, not S=1008";
  CHECK_THROWS_WITH(spec.describe(), Catch::Contains(span) && Catch::Contains("--layout contiguous"));
  CHECK_THROWS_WITH(validate_plan_spec(spec), Catch::Contains(span));
  CHECK_THROWS_WITH(build_plan(spec), Catch::Contains(span));
  CHECK_THROWS_WITH(make_layout(spec.layout, spec.dims.seq, spec.ranks, spec.block, spec.mask()),
                    Catch::Contains(span));
  // zig-zag per document has the same hole.
  spec.layout = LayoutKind::zigzag;
  CHECK_THROWS_WITH(spec.describe(), Catch::Contains(span));
  CHECK_THROWS_WITH(build_plan(spec), Catch::Contains(span));
  // As the other helper found it, with the reverse-dkv erratum: build_plan names the erratum first.
  spec.layout = LayoutKind::striped;
  spec.erratum = Erratum::reverse_dkv;
  CHECK_THROWS_WITH(validate_plan_spec(spec), Catch::Contains("--erratum reverse-dkv is a variant of the ring plan"));
  CHECK_THROWS_WITH(spec.describe(), Catch::Contains(span));
  // Documents longer than S (the other direction: units past the end of S).
  spec = tail_padded_documents();
  spec.padding = 0;
  spec.dims.seq = 960;
  CHECK_THROWS_WITH(validate_plan_spec(spec), Catch::Contains("--docs lengths sum to 976, not S=960"));
  CHECK_THROWS_WITH(make_layout(spec.layout, spec.dims.seq, spec.ranks, spec.block, spec.mask()),
                    Catch::Contains("the documents span 976 positions, not S=960"));
  CHECK_THROWS_WITH(spec.describe(), Catch::Contains("the documents span 976 positions, not S=960"));
  // The control: the same documents filling S plan, describe and lay out.
  spec.dims.seq = 976;
  CHECK_NOTHROW(validate_plan_spec(spec));
  const Plan plan = build_plan(spec);
  CHECK(spec.describe().find("striped per document(block=2)") != std::string::npos);
  CHECK(plan.layout().to_string() == "striped per document(block=2)");
  // Tail padding on a layout that does not cut documents is fine.
  spec.layout = LayoutKind::contiguous;
  spec.dims.seq = 1008;
  spec.padding = 32;
  CHECK_NOTHROW(validate_plan_spec(spec));
  CHECK(build_plan(spec).spec().describe() == spec.describe());
}

TEST_CASE("check_layout names the layout make_layout builds, with the same errors", "[plans][spec]") {
  struct Case {
    LayoutKind kind;
    int64_t seq, ranks, block;
    std::vector<int64_t> documents, padding;
  };
  const std::vector<Case> cases = {
      {LayoutKind::contiguous, 96, 4, 0, {}, {}},
      {LayoutKind::zigzag, 96, 4, 0, {}, {}},
      {LayoutKind::zigzag, 96, 3, 2, {}, {}},
      {LayoutKind::striped, 96, 4, 0, {}, {}},
      {LayoutKind::balanced, 96, 4, 0, {}, {}},
      {LayoutKind::balanced, 96, 4, 0, {32, 64}, {}},
      {LayoutKind::zigzag, 96, 3, 0, {36, 60}, {}},
      {LayoutKind::zigzag, 96, 4, 0, {32, 64}, {}},
      {LayoutKind::zigzag, 96, 4, 2, {32, 64}, {}},
      {LayoutKind::striped, 96, 4, 0, {32, 64}, {}},
      {LayoutKind::striped, 96, 3, 4, {24, 72}, {}},
      {LayoutKind::zigzag, 96, 4, 0, {30, 60}, {2, 4}},  // documents padded to multiples of 2P
      {LayoutKind::zigzag, 96, 4, 0, {30, 66}, {}},      // 30 not a multiple of 8
      {LayoutKind::striped, 96, 4, 0, {32, 60}, {}},     // 92 of 96 positions
      {LayoutKind::striped, 96, 4, 0, {32, 68}, {}},     // 100 of 96
      {LayoutKind::contiguous, 96, 5, 0, {}, {}},        // 5 does not divide 96
      {LayoutKind::striped, 96, 0, 0, {32, 64}, {}},     // no ranks
      {LayoutKind::striped, 96, 4, -1, {32, 64}, {}},    // negative block
  };
  int refused = 0;
  for (const Case& c : cases) {
    const Mask mask(false, 0, c.documents, 0, c.padding);
    INFO(layout_name(c.kind) << " S=" << c.seq << " P=" << c.ranks << " block=" << c.block << " documents "
                             << c.documents.size());
    std::string built, checked;
    try {
      built = make_layout(c.kind, c.seq, c.ranks, c.block, mask).to_string();
    } catch (const UsageError& error) {
      built = std::string("error: ") + error.what();
    }
    try {
      checked = check_layout(c.kind, c.seq, c.ranks, c.block, mask);
    } catch (const UsageError& error) {
      checked = std::string("error: ") + error.what();
    }
    CHECK(checked == built);
    refused += built.rfind("error: ", 0) == 0 ? 1 : 0;
  }
  CHECK(refused == 6);  // the last six
}

TEST_CASE("a layout table refuses units without a rank instead of indexing with them", "[plans][spec]") {
  const std::vector<int64_t> good = {0, 1, 2, 3, 3, 2, 1, 0};
  CHECK(Layout(LayoutKind::zigzag, 16, 4, 2, good).rank_of(15) == 0);
  std::vector<int64_t> bad = good;
  bad[5] = -1;  // what the per-document layout left for tail padding
  CHECK_THROWS_WITH(Layout(LayoutKind::zigzag, 16, 4, 2, bad), Catch::Contains("unit 5 has rank -1"));
  bad[5] = 4;
  CHECK_THROWS_WITH(Layout(LayoutKind::zigzag, 16, 4, 2, bad), Catch::Contains("unit 5 has rank 4"));
  bad = good;
  bad.pop_back();
  CHECK_THROWS_AS(Layout(LayoutKind::zigzag, 16, 4, 2, bad), std::logic_error);
}

TEST_CASE("padding and padding heads a spec cannot have are usage errors", "[plans][spec]") {
  PlanSpec spec = tail_padded_documents();
  spec.layout = LayoutKind::contiguous;
  REQUIRE_NOTHROW(validate_plan_spec(spec));
  PlanSpec bad = spec;
  bad.padding = 1008;
  CHECK_THROWS_WITH(validate_plan_spec(bad), Catch::Contains("padding 1008 tokens of S=1008"));
  bad = spec;
  bad.padding_heads = 8;
  CHECK_THROWS_WITH(validate_plan_spec(bad), Catch::Contains("padding heads 8 of H=8"));
  bad.dims.kv_heads = 4;  // groups of 2 query heads: 3 padding heads split one
  bad.padding_heads = 3;
  CHECK_THROWS_WITH(validate_plan_spec(bad), Catch::Contains("H/HKV=2"));
  bad.padding_heads = 2;
  CHECK_NOTHROW(validate_plan_spec(bad));
  bad = spec;
  bad.document_padding = {0};
  CHECK_THROWS_WITH(validate_plan_spec(bad), Catch::Contains("1 counts for 2 documents"));
  bad.document_padding = {0, -4};
  CHECK_THROWS_WITH(validate_plan_spec(bad), Catch::Contains("a count is -4"));
  // Where the user's tokens sit: refused (never written) when the spec puts them past S.
  bad = spec;
  bad.padding = 0;
  bad.dims.seq = 960;
  bad.document_padding = {0, 8};
  CHECK_THROWS_WITH(bad.user_positions(), Catch::Contains("token 960 at position 960, outside S=960"));
  bad.dims.seq = 984;  // the control: 480 + 496 + 8
  CHECK(bad.user_positions()[975] == 975);
  CHECK(bad.user_positions()[976] == -1);
}

// A spec padded for one layout and U, its layout or U changed, and padded again: the padding is
// the new layout's alone, as if the user's sizes had been given with it (ringlab compare's rows).
TEST_CASE("repadded pads the user's sizes for the spec's own layout and Ulysses degree", "[plans][spec]") {
  PlanSpec spec;
  spec.ranks = 4;
  spec.dims = {1, 1000, 6, 6, 64};
  spec.causal = true;
  spec.documents = {300, 400, 300};
  spec.layout = LayoutKind::zigzag;
  pad_to_layout(spec);
  REQUIRE(spec.dims.seq == 1008);  // 300 and 300 padded to multiples of 2P = 8
  REQUIRE(spec.real_dims().seq == 1000);
  PlanSpec striped = spec;
  striped.layout = LayoutKind::striped;  // documents to multiples of P = 4: none needed
  striped = repadded(striped);
  CHECK(striped.dims.seq == 1000);
  CHECK(striped.padding_tokens() == 0);
  PlanSpec ulysses = spec;
  ulysses.algo = Algorithm::ulysses;
  ulysses.layout = LayoutKind::contiguous;
  ulysses = repadded(ulysses);
  CHECK(ulysses.dims.seq == 1000);
  CHECK(ulysses.dims.heads == 8);  // HKV = 6 over U = 4: padded to 8, two zero heads
  CHECK(ulysses.padding_heads == 2);
  CHECK(ulysses.real_dims().heads == 6);
  CHECK(ulysses.real_dims().kv_heads == 6);
  PlanSpec back = repadded(ulysses);  // idempotent, and back to zig-zag gives the first spec's padding
  CHECK(back.dims.heads == 8);
  back.algo = Algorithm::ring;
  back.layout = LayoutKind::zigzag;
  back = repadded(back);
  CHECK(back.dims.seq == spec.dims.seq);
  CHECK(back.document_padding == spec.document_padding);
  CHECK(back.dims.heads == 6);
  CHECK(back.padding_heads == 0);
}
