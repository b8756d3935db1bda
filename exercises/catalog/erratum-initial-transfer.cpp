// Exercise erratum-initial-transfer - Erratum 5: the ring has no initial transfer - P - 1
// transfers, (P-1)(t - c) exposed, from the ring plan and the dry executor (step_timing.hpp).
#include "exercises/catalog/catalog.hpp"
#include "exercises/catalog/support.hpp"
#include "exercises/step_timing.hpp"

namespace ringlab::exercises::catalog {

namespace {

Exercise write(VariantDraw& draw) {
  struct Params {
    int64_t ranks, compute_ms, transfer_ms;
    bool operator==(const Params&) const = default;
  };
  const Params p = variant_params(draw, Params{8, 2, 3}, [](VariantDraw& d) {
    const int64_t c = d.pick<int64_t>({1, 2, 4});
    return Params{d.pick<int64_t>({4, 8, 16}), c, c + d.integer(1, 3)};
  });
  const Plan plan = build_plan(ring_spec(dims_of(1, 16 * p.ranks, 1, 1, 8), p.ranks));
  const int64_t transfers = exchange_sends(plan, 0, Payload::kv, Pass::forward);
  const double c = double(p.compute_ms) * 1e-3, t = double(p.transfer_ms) * 1e-3;
  const RingTimes times = ring_times(p.ranks, c, t);
  const double P = double(p.ranks);

  Exercise e;
  e.numbers = {{"P", P}, {"compute", c}, {"transfer", t}};
  e.parameters = {{"P", cat(p.ranks), "GPUs"}, {"c", cat(p.compute_ms, " ms"), "compute per ring step"},
                  {"t", cat(p.transfer_ms, " ms"), "K/V transfer per ring step (slower than compute here)"}};
  e.statement =
      "The source adds an unoverlappable 'initial transfer' to the ring and, when transfers are slower than\n"
      "compute, says P (t - c) of communication is exposed.\n"
      "transfers: how many K/V transfers does one GPU wait for in the forward?\n"
      "exposed: how much communication time is exposed (not hidden by compute)?\n"
      "total: the forward's time with overlap.";
  e.model = "ring timing as in exercise overlap-time: total = c + (P-1) max(c, t)";
  Part transfers_part = number_part("transfers", "K/V transfers per GPU in the forward", double(transfers), 0, 0);
  mistake(transfers_part, P, "the source material's model (000, exercise 3)",
          "step 0 computes on the GPU's own K/V: there is no transfer before it");
  Part exposed = seconds_part("exposed", "exposed communication time", times.exposed);
  mistake(exposed, P * (t - c), "the source material's formula (000, exercise 3)", "there are P - 1 transfers, not P");
  Part total = seconds_part("total", "forward time with overlap", times.with_overlap);
  mistake(total, P * t, "the source material's formula (000, exercise 3)", "P c + P (t - c) counts one transfer too many");
  mistake(total, t + P * c + P * (t - c), "the source material's model (000, exercise 3)",
          "an initial transfer plus P exposed gaps: two transfers too many");
  e.parts = {transfers_part, exposed, total};
  e.solution = cat(
      "The ring plan posts ", transfers, " K/V exchanges per GPU: at steps 0..P-2, each bringing the next step's block.\n"
      "Step 0 needs nothing from outside. Each later step waits max(c, t) after the previous one started:\n"
      "total = c + (P-1) max(c, t) = ", seconds_text(times.with_overlap), "; compute alone is P c = ", seconds_text(P * c),
      ", so exposed = (P-1)(t - c) = ", seconds_text(times.exposed), ".");
  e.command = cat("ringlab plan --ranks ", p.ranks, " --seq ", 16 * p.ranks, "    # kv> cells at steps 0..P-2 only");
  return e;
}

}  // namespace

constexpr CatalogEntry kErratumInitialTransfer{
    .id = "erratum-initial-transfer",
    .title = "Erratum 5: there is no initial transfer",
    .source = "DESIGN.md erratum 5 (source material 000, exercise 3)",
    .source_short = "DESIGN erratum 5",
    .lab = "",
    .write = write,
};

}  // namespace ringlab::exercises::catalog
