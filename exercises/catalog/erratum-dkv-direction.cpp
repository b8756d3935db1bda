// Exercise erratum-dkv-direction - Erratum 1: dK/dV accumulators sent against the K/V direction -
// where a gradient lands, from the erratum plan, and the smallest P at which the plan checker
// catches it.
#include "exercises/catalog/catalog.hpp"
#include "exercises/catalog/support.hpp"
#include "sim/plan/check.hpp"

namespace ringlab::exercises::catalog::erratum_dkv_direction {

namespace {

// The block whose dK/dV accumulator rank `rank` adds its step-`step` contribution into: the one its
// backward phase receives before that step, i.e. the block the sending peer held at step - 1.
int64_t accumulator_block(const Plan& plan, int64_t rank, int64_t step) {
  for (const Phase& phase : plan.phases()) {
    if (phase.pass != Pass::backward) continue;
    for (const TemplateEntry& entry : phase.body)
      if (const auto* x = std::get_if<ExchangeT>(&entry.op))
        if (x->payload == Payload::dkv) {
          const int64_t peer = plan.ring_peer(rank, x->recv_from, step - 1);
          return plan.ring_position_at(peer, Shift{0, -1}, step - 1);
        }
  }
  return -1;
}

PlanSpec backward_spec(int64_t ranks, Erratum erratum) {
  PlanSpec spec = ring_spec(dims_of(1, 16 * ranks, 2, 2, 8), ranks, LayoutKind::contiguous, true);
  spec.backward = true;
  spec.erratum = erratum;
  return spec;
}

}  // namespace

static void write(VariantDraw& draw, Exercise& e) {
  struct Params {
    int64_t ranks = 4, rank = 2, step = 1;

    static Params drawn(VariantDraw& d) {
      const int64_t ranks = d.pick<int64_t>({3, 4, 5, 6, 8});
      return {ranks, d.integer(0, ranks - 1), d.integer(1, ranks - 1)};
    }
  };
  const Params p = variant_params<Params>(draw);
  const Plan wrong = build_plan(backward_spec(p.ranks, Erratum::reverse_dkv));
  const Plan right = build_plan(backward_spec(p.ranks, Erratum::none));
  const int64_t held = right.ring_position_at(p.rank, Shift{0, -1}, p.step);
  const int64_t into = accumulator_block(wrong, p.rank, p.step);
  const int64_t into_right = accumulator_block(right, p.rank, p.step);
  int64_t smallest = 0;  // the smallest P at which the plan checker finds the reverse direction wrong
  for (int64_t ranks = 2; ranks <= 16 && smallest == 0; ++ranks)
    if (!check_plan(build_plan(backward_spec(ranks, Erratum::reverse_dkv))).ok()) smallest = ranks;

  e.numbers = {{"P", p.ranks}, {"rank", p.rank}, {"step", p.step}};
  e.parameters = {ranks_parameter(p.ranks, "GPUs in the ring"),
                  {"g", cat(p.rank), "the GPU asked about"},
                  {"t", cat(p.step), "the backward step asked about"}};
  e.statement =
      "In the ring backward K/V rotate forward (GPU g receives from g-1), so at step t GPU g holds block g-t\n"
      "(mod P). The notes send the dK/dV accumulators the other way: GPU g sends its accumulator to g-1 and\n"
      "receives one from g+1, adding its step-t contribution to the accumulator it received.\n"
      "accumulator: with the notes' direction, into which block's accumulator does GPU g add block (g-t)'s\n"
      "             gradient at step t?\n"
      "correct: the same with the accumulators travelling with their K/V block.\n"
      "smallest_p: the smallest P at which the notes' direction gives wrong gradients.";
  e.parts = {
      count_part("accumulator", "block whose accumulator receives the gradient (notes' direction)", into)
          .mistake(double(held), "a common slip",
                   "that is the block GPU g holds; but the accumulator it received came from g+1, which held block "
                   "(g+1)-(t-1) = g-t+2 one step earlier"),
      count_part("correct", "the same with dK/dV travelling with K/V", into_right),
      count_part("smallest_p", "smallest P where the reverse direction is wrong", smallest)
          .mistake(2, "a common slip", "at P = 2, g+1 and g-1 are the same GPU, so both directions agree")};
  e.solution = lines({
      cat("GPU g = ", p.rank, " holds block g-t = ", held, " at step t = ", p.step, "."),
      "Notes' direction: the accumulator it adds to came from g+1, which at step t-1 held block (g+1)-(t-1) = g-t+2",
      cat("  -> block ", into, " (mod ", p.ranks, "): the gradient of block ", held, " lands in block ", into,
          "'s accumulator."),
      cat("Travelling with K/V: it comes from g-1, which held (g-1)-(t-1) = g-t -> block ", into_right,
          ", the right one; after P - 1 steps"),
      "  one extra hop brings each accumulator home.",
      cat("g-t+2 = g-t (mod P) only when P divides 2: the bug is invisible at P = 2 and shows from P = ", smallest,
          " (ringlab's plan checker flags the erratum plan from there). Test ring backward code at P >= 3."),
  });
  e.command =
      "ringlab run --ranks 3 --seq 96 --causal --backward --erratum reverse-dkv    # exit 1: dk, dv wrong; "
      "--ranks 2 passes";
}

constexpr CatalogEntry kEntry{"erratum-dkv-direction",
                              "Erratum 1: dK/dV sent against the K/V direction",
                              "the book's erratum 1 (the backward pass of notes, section 8)",
                              "erratum 1",
                              write,
                              "04-ring-backward"};

}  // namespace ringlab::exercises::catalog::erratum_dkv_direction
