// Helpers the catalog's exercises share (support.hpp).
#include "exercises/catalog/support.hpp"

#include <algorithm>
#include <cmath>

namespace ringlab::exercises::catalog {

std::string lines(std::initializer_list<std::string> text_lines) {
  std::string text;
  for (const std::string& line : text_lines) {
    if (&line != text_lines.begin()) text += '\n';
    text += line;
  }
  return text;
}

std::string bytes_text(double bytes, int significant) {
  return format_quantity(bytes, Quantity::bytes, display_unit_for(Quantity::bytes, bytes), significant);
}
std::string seconds_text(double seconds, int significant) {
  return format_quantity(seconds, Quantity::seconds, display_unit_for(Quantity::seconds, seconds), significant);
}
std::string ratio_text(double ratio, int significant) { return format_number(ratio, significant) + "x"; }
std::string percent_text(double fraction, int significant) { return format_number(fraction * 100, significant) + "%"; }
std::string num(double value, int significant) { return format_number(value, significant); }
std::string flops_text(double flops_per_second) { return format_number(flops_per_second / 1e12, 4) + " TFLOP/s"; }
std::string bandwidth_text(double bytes_per_second) { return bytes_text(bytes_per_second) + "/s"; }

std::string element_text(int64_t element_bytes) {
  return element_bytes == 2   ? "bf16 (2 bytes)"
         : element_bytes == 4 ? "fp32 (4 bytes)"
                              : cat(element_bytes, "-byte elements");
}

Parameter ranks_parameter(int64_t ranks, std::string meaning) { return {"P", cat(ranks), std::move(meaning)}; }
Parameter seq_parameter(int64_t seq, std::string meaning) {
  return {"S", tokens_text(seq) + " tokens", std::move(meaning)};
}

std::string demo_command(const std::string& subcommand, int64_t ranks, int64_t seq, const std::string& flags,
                         const std::string& look_at) {
  return cat("ringlab ", subcommand, " --ranks ", ranks, " --seq ", seq, flags.empty() ? "" : " ", flags,
             look_at.empty() ? "" : "    # ", look_at);
}

namespace {

Part make_part(std::string name, std::string question, Quantity quantity, DisplayUnit unit, double expected,
               PartTolerance tolerance) {
  Part part;
  part.name = std::move(name);
  part.question = std::move(question);
  part.quantity = quantity;
  part.unit = std::move(unit);
  part.expected = expected;
  part.tolerance = tolerance;
  return part;
}

}  // namespace

Part bytes_part(std::string name, std::string question, double bytes, double rel) {
  return make_part(std::move(name), std::move(question), Quantity::bytes, display_unit_for(Quantity::bytes, bytes),
                   bytes, {rel, 0});
}
Part seconds_part(std::string name, std::string question, double seconds, double rel) {
  return make_part(std::move(name), std::move(question), Quantity::seconds,
                   display_unit_for(Quantity::seconds, seconds == 0 ? 1e-3 : seconds), seconds, {rel, 0});
}
Part ratio_part(std::string name, std::string question, double ratio, double rel) {
  return make_part(std::move(name), std::move(question), Quantity::ratio, {"x", 1}, ratio, {rel, 0});
}
Part fraction_part(std::string name, std::string question, double fraction, double abs) {
  return make_part(std::move(name), std::move(question), Quantity::fraction, {"%", 0.01}, fraction, {0, abs});
}
Part tokens_part(std::string name, std::string question, double tokens, double rel) {
  return make_part(std::move(name), std::move(question), Quantity::tokens, {"tokens", 1}, tokens, {rel, 0});
}
Part number_part(std::string name, std::string question, double value, double rel, double abs) {
  return make_part(std::move(name), std::move(question), Quantity::number, {"", 1}, value, {rel, abs});
}
double tolerance_rejecting(double expected, std::initializer_list<double> wrong, double rel) {
  double gap = 1e300;
  for (const double value : wrong) {
    const double relative = std::fabs(value - expected) / std::max(std::fabs(expected), 1e-300);
    if (relative > 1e-6) gap = std::min(gap, relative);
  }
  static constexpr double kSteps[] = {2, 2.5, 2};  // rel, rel/2, rel/5, rel/10, rel/20, ...
  for (size_t i = 0; rel >= gap / 2 && rel > 1e-9; ++i) rel /= kSteps[i % 3];
  return rel;
}

Part count_part(std::string name, std::string question, int64_t count) {
  return number_part(std::move(name), std::move(question), double(count), 0, 0);
}
Part list_part(std::string name, std::string question, std::vector<int64_t> list) {
  Part part = make_part(std::move(name), std::move(question), Quantity::list, {"", 1}, 0, {0, 0});
  part.expected_list = std::move(list);
  return part;
}

RanksTokens draw_ranks_tokens(VariantDraw& draw, const RanksTokens& source, std::initializer_list<int64_t> ranks,
                              std::initializer_list<int64_t> tokens) {
  return variant_params(draw, source, [&](VariantDraw& d) {
    const int64_t P = d.pick<int64_t>(ranks);
    return RanksTokens{P, d.pick<int64_t>(tokens)};
  });
}

void RanksTokens::write_parameters(Exercise& e, std::string seq_meaning) const {
  e.numbers = {{"P", ranks}, {"n", tokens_per_rank}};
  e.parameters = {ranks_parameter(ranks), seq_parameter(seq(), std::move(seq_meaning))};
}

Machine draw_machine(VariantDraw& draw) {
  switch (draw.integer(0, 3)) {
    case 0: return kA100;
    case 1: return kH100;
    case 2: return kH100Measured;
    default: return kA100Ib;
  }
}

AttentionDims dims_of(int64_t batch, int64_t seq, int64_t heads, int64_t kv_heads, int64_t dim) {
  return {.batch = batch, .seq = seq, .heads = heads, .kv_heads = kv_heads, .dim = dim};
}

PlanSpec ring_spec(const AttentionDims& dims, int64_t ranks, LayoutKind layout, bool causal, int64_t element_bytes) {
  return {.algo = Algorithm::ring,
          .layout = layout,
          .ranks = ranks,
          .dims = dims,
          .causal = causal,
          .element_bytes = element_bytes};
}

namespace {

template <class F>
void for_each_op(const Plan& plan, int64_t rank, F&& f) {
  for (const Op& op : expand(plan, rank)) f(op, plan.phases()[static_cast<size_t>(op.phase)]);
}

}  // namespace

int64_t exchange_send_bytes(const Plan& plan, int64_t rank, Payload payload, Pass pass) {
  int64_t bytes = 0;
  for_each_op(plan, rank, [&](const Op& op, const Phase& phase) {
    if (const auto* x = std::get_if<ExchangeOp>(&op.body))
      if (x->payload == payload && x->send_to >= 0 && phase.pass == pass) bytes += x->bytes;
  });
  return bytes;
}

int64_t exchange_sends(const Plan& plan, int64_t rank, Payload payload, Pass pass) {
  int64_t sends = 0;
  for_each_op(plan, rank, [&](const Op& op, const Phase& phase) {
    if (const auto* x = std::get_if<ExchangeOp>(&op.body))
      if (x->payload == payload && x->send_to >= 0 && phase.pass == pass) ++sends;
  });
  return sends;
}

int64_t collective_send_bytes(const Plan& plan, int64_t rank, Collective collective) {
  int64_t bytes = 0;
  for_each_op(plan, rank, [&](const Op& op, const Phase&) {
    if (const auto* c = std::get_if<CollectiveOp>(&op.body))
      if (c->collective == collective) bytes += c->send_bytes;
  });
  return bytes;
}

int64_t CausalWork::max_pairs() const { return *std::max_element(rank_pairs.begin(), rank_pairs.end()); }
int64_t CausalWork::max_pairs_no_skip() const {
  return *std::max_element(rank_pairs_no_skip.begin(), rank_pairs_no_skip.end());
}
double CausalWork::speedup() const { return double(max_pairs_no_skip()) / double(max_pairs()); }

CausalWork causal_work(const AttentionDims& dims, int64_t ranks, LayoutKind layout, int64_t block) {
  PlanSpec spec = ring_spec(dims, ranks, layout, true);
  spec.block = block;
  const Plan skip = build_plan(spec);
  spec.skip = false;
  const Plan no_skip = build_plan(spec);
  CausalWork work;
  for (int64_t r = 0; r < ranks; ++r) {
    int64_t pairs = 0, pairs_no_skip = 0, skipped = 0;
    for (int64_t kv = 0; kv < skip.ring(); ++kv) {
      const ComputeOp with = resolve_compute(skip, r, kv, Pass::forward);
      const ComputeOp without = resolve_compute(no_skip, r, kv, Pass::forward);
      pairs += with.pairs;
      pairs_no_skip += without.computed_pairs;
      skipped += with.shape == BlockShape::skipped ? 1 : 0;
    }
    work.rank_pairs.push_back(pairs);
    work.rank_pairs_no_skip.push_back(pairs_no_skip);
    work.rank_skipped.push_back(skipped);
  }
  work.slowest_rank = std::max_element(work.rank_pairs.begin(), work.rank_pairs.end()) - work.rank_pairs.begin();
  return work;
}

std::vector<int64_t> causal_pairs_per_rank(const Layout& layout) {
  std::vector<int64_t> pairs;
  for (int64_t q = 0; q < layout.ranks(); ++q) {
    int64_t sum = 0;
    for (int64_t k = 0; k < layout.ranks(); ++k) sum += layout.causal_pairs(q, k);
    pairs.push_back(sum);
  }
  return pairs;
}

}  // namespace ringlab::exercises::catalog
