// Exercise overlap-profile - one ring step profiled on a published GPU and link: compute and
// transfer times, their ratio, and the share of the communication hidden (step_timing.hpp).
#include "exercises/catalog/catalog.hpp"
#include "exercises/catalog/support.hpp"
#include "exercises/step_timing.hpp"
#include "reference/formulas.hpp"

namespace ringlab::exercises::catalog::overlap_profile {

static void write(VariantDraw& draw, Exercise& e) {
  struct Params {
    int64_t seq = 128 * 1024, ranks = 8, heads = 32;
    Machine machine = kA100;

    static Params drawn(VariantDraw& d) {
      return {d.pick<int64_t>({8 * 1024, 32 * 1024, 128 * 1024, 256 * 1024}), d.pick<int64_t>({4, 8, 16}),
              d.pick<int64_t>({8, 32}), draw_machine(d)};
    }
  };
  const Params p = variant_params<Params>(draw);
  const int64_t dim = 128;
  const StepCostModel model{p.machine.flops, p.machine.link, 0, 2};
  const AttentionDims dims = dims_of(1, p.seq, p.heads, p.heads, dim);
  const int64_t n = p.seq / p.ranks;
  const double compute = step_compute_seconds(model, dims, n), transfer = step_transfer_seconds(model, dims, n);
  const RingTimes times = ring_times(p.ranks, compute, transfer);

  e.numbers = {{"S", p.seq},
               {"P", p.ranks},
               {"heads", p.heads},
               {"dim", dim},
               {"flops", p.machine.flops},
               {"link", p.machine.link}};
  e.parameters = {seq_parameter(p.seq),
                  ranks_parameter(p.ranks),
                  {"n_h", cat(p.heads), cat("heads of d = ", dim, ", batch 1, no GQA")},
                  {"GPU", cat(p.machine.name),
                   cat(flops_text(p.machine.flops), ", link ", bandwidth_text(p.machine.link), " one way")}};
  e.statement =
      "One step of the ring forward, non-causal.\n"
      "step_compute: the attention compute of one step (q.k^T and p.v at the peak rate).\n"
      "step_transfer: the transfer of one K/V block (bf16).   ratio: step_compute / step_transfer.\n"
      "hidden: the fraction of the forward's communication hidden behind compute.";
  e.model = "compute = 4 d (S/P)^2 n_h / F;  transfer = 2 (S/P) n_h d e / BW;  ring timing as in overlap-time.";
  Part compute_part = seconds_part("step_compute", "compute time of one ring step", compute);
  Part transfer_part = seconds_part("step_transfer", "transfer time of one K/V block", transfer);
  Part ratio = ratio_part("ratio", "step_compute / step_transfer", compute / transfer, 0.01);
  if (same_params(p, Params{})) {
    compute_part.mistake(8.59e-3, "the notes' printed output (section 12.4)",
                         "8.59 ms is not even what their own formula gives (7.05 ms, counting only q.k^T); "
                         "with both GEMMs it is 14.1 ms");
    transfer_part.mistake(
        0.22e-3, "the notes' printed output (section 12.4)",
        "0.22 ms does not follow from their formula either (0.447 ms at 600 GB/s); one way at 300 GB/s it is 0.895 ms");
    ratio.mistake(39.3, "the notes' printed output (section 12.4)", "39.3x comes from the two misprinted times");
  }
  compute_part.mistake(compute / 2, "a common slip", "that counts only q.k^T; p.v is another 2 d FLOPs per pair");
  transfer_part.mistake(transfer / 2, "a common slip",
                        "that uses the bandwidth of both directions; the ring sends one way");
  e.parts = {compute_part, transfer_part, ratio,
             fraction_part("hidden", "fraction of the communication hidden", times.hidden_fraction, 0.005)};
  e.solution = lines({
      cat("S/P = ", group_thousands(n), " tokens. step_compute = 4 x ", dim, " x ", group_thousands(n), "^2 x ",
          p.heads, " / ", flops_text(p.machine.flops), " = ", seconds_text(compute), "."),
      cat("step_transfer = 2 x ", group_thousands(n), " x ", p.heads, " x ", dim, " x 2 B / ",
          bandwidth_text(p.machine.link), " = ", bytes_text(kv_bytes(n, dims, 2)), " / ",
          bandwidth_text(p.machine.link), " = ", seconds_text(transfer), "."),
      cat("ratio = ", ratio_text(compute / transfer),
          " (= S/P over the overlap threshold of exercise overlap-threshold); hidden = ",
          percent_text(times.hidden_fraction), "."),
  });
  e.command = "ringlab exercises show overlap-threshold";
}

constexpr CatalogEntry kEntry{"overlap-profile", "Profiling one ring step: compute vs transfer",
                              "context-parallelism notes, section 12.4", "notes §12.4", write};

}  // namespace ringlab::exercises::catalog::overlap_profile
