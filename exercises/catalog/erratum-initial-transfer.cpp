// Exercise erratum-initial-transfer - Erratum 5: the ring has no initial transfer - P - 1
// transfers, (P-1)(t - c) exposed, from the ring plan and the dry executor (step_timing.hpp).
#include "exercises/catalog/catalog.hpp"
#include "exercises/catalog/support.hpp"
#include "exercises/step_timing.hpp"

namespace ringlab::exercises::catalog::erratum_initial_transfer {

static void write(VariantDraw& draw, Exercise& e) {
  struct Params {
    int64_t ranks = 8, compute_ms = 2, transfer_ms = 3;

    static Params drawn(VariantDraw& d) {
      const int64_t c = d.pick<int64_t>({1, 2, 4});
      return {d.pick<int64_t>({4, 8, 16}), c, c + d.integer(1, 3)};
    }
  };
  const Params p = variant_params<Params>(draw);
  const Plan plan = build_plan(ring_spec(dims_of(1, 16 * p.ranks, 1, 1, 8), p.ranks));
  const int64_t transfers = exchange_sends(plan, 0, Payload::kv, Pass::forward);
  const double c = double(p.compute_ms) * 1e-3, t = double(p.transfer_ms) * 1e-3;
  const RingTimes times = ring_times(p.ranks, c, t);
  const double P = double(p.ranks);

  e.numbers = {{"P", P}, {"compute", c}, {"transfer", t}};
  e.parameters = {ranks_parameter(p.ranks),
                  {"c", cat(p.compute_ms, " ms"), "compute per ring step"},
                  {"t", cat(p.transfer_ms, " ms"), "K/V transfer per ring step (slower than compute here)"}};
  e.statement =
      "The source adds an unoverlappable 'initial transfer' to the ring and, when transfers are slower than\n"
      "compute, says P (t - c) of communication is exposed.\n"
      "transfers: how many K/V transfers does one GPU wait for in the forward?\n"
      "exposed: how much communication time is exposed (not hidden by compute)?\n"
      "total: the forward's time with overlap.";
  e.model = "ring timing as in exercise overlap-time: total = c + (P-1) max(c, t)";
  e.parts = {
      count_part("transfers", "K/V transfers per GPU in the forward", transfers)
          .mistake(P, "the source material's model (exercise 3)",
                   "step 0 computes on the GPU's own K/V: there is no transfer before it"),
      seconds_part("exposed", "exposed communication time", times.exposed)
          .mistake(P * (t - c), "the source material's formula (exercise 3)", "there are P - 1 transfers, not P"),
      seconds_part("total", "forward time with overlap", times.with_overlap)
          .mistake(P * t, "the source material's formula (exercise 3)", "P c + P (t - c) counts one transfer too many")
          .mistake(t + P * c + P * (t - c), "the source material's model (exercise 3)",
                   "an initial transfer plus P exposed gaps: two transfers too many")};
  e.solution = lines({
      cat("The ring plan posts ", transfers,
          " K/V exchanges per GPU: at steps 0..P-2, each bringing the next step's block."),
      "Step 0 needs nothing from outside. Each later step waits max(c, t) after the previous one started:",
      cat("total = c + (P-1) max(c, t) = ", seconds_text(times.with_overlap), "; compute alone is P c = ",
          seconds_text(P * c), ", so exposed = (P-1)(t - c) = ", seconds_text(times.exposed), "."),
  });
  e.command = demo_command("plan", p.ranks, 16 * p.ranks, "", "kv> cells at steps 0..P-2 only");
}

constexpr CatalogEntry kEntry{"erratum-initial-transfer", "Erratum 5: there is no initial transfer",
                              "the book's erratum 5 (the source material, exercise 3)", "erratum 5", write};

}  // namespace ringlab::exercises::catalog::erratum_initial_transfer
