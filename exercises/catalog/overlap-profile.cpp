// Exercise overlap-profile - one ring step profiled on a published GPU and link: compute and
// transfer times, their ratio, and the share of the communication hidden (step_timing.hpp).
#include "exercises/catalog/catalog.hpp"
#include "exercises/catalog/support.hpp"
#include "exercises/step_timing.hpp"
#include "reference/formulas.hpp"

namespace ringlab::exercises::catalog {

namespace {

Exercise write(VariantDraw& draw) {
  struct Params {
    int64_t seq, ranks, heads;
    Machine machine;
    bool operator==(const Params&) const = default;
  };
  const Params p = variant_params(draw, Params{128 * 1024, 8, 32, kA100}, [](VariantDraw& d) {
    return Params{d.pick<int64_t>({8 * 1024, 32 * 1024, 128 * 1024, 256 * 1024}), d.pick<int64_t>({4, 8, 16}),
                  d.pick<int64_t>({8, 32}), draw_machine(d)};
  });
  const int64_t dim = 128;
  const StepCostModel model{p.machine.flops, p.machine.link, 0, 2};
  const AttentionDims dims = dims_of(1, p.seq, p.heads, p.heads, dim);
  const int64_t n = p.seq / p.ranks;
  const double compute = step_compute_seconds(model, dims, n), transfer = step_transfer_seconds(model, dims, n);
  const RingTimes times = ring_times(p.ranks, compute, transfer);

  Exercise e;
  e.numbers = {{"S", double(p.seq)}, {"P", double(p.ranks)}, {"heads", double(p.heads)}, {"dim", double(dim)}, {"flops", p.machine.flops}, {"link", p.machine.link}};
  e.parameters = {{"S", tokens_text(p.seq) + " tokens", "sequence length"},
                  {"P", cat(p.ranks), "GPUs"},
                  {"n_h", cat(p.heads), cat("heads of d = ", dim, ", batch 1, no GQA")},
                  {"GPU", p.machine.name, cat(flops_text(p.machine.flops), ", link ", bandwidth_text(p.machine.link), " one way")}};
  e.statement =
      "One step of the ring forward, non-causal.\n"
      "step_compute: the attention compute of one step (q.k^T and p.v at the peak rate).\n"
      "step_transfer: the transfer of one K/V block (bf16).   ratio: step_compute / step_transfer.\n"
      "hidden: the fraction of the forward's communication hidden behind compute.";
  e.model = "compute = 4 d (S/P)^2 n_h / F;  transfer = 2 (S/P) n_h d e / BW;  ring timing as in overlap-time.";
  Part compute_part = seconds_part("step_compute", "compute time of one ring step", compute);
  Part transfer_part = seconds_part("step_transfer", "transfer time of one K/V block", transfer);
  Part ratio = ratio_part("ratio", "step_compute / step_transfer", compute / transfer, 0.01);
  if (p == Params{128 * 1024, 8, 32, kA100}) {
    mistake(compute_part, 8.59e-3, "the notes' printed output (001, section 12.4)",
            "8.59 ms is not even what their own formula gives (7.05 ms, counting only q.k^T); with both GEMMs it is 14.1 ms");
    mistake(transfer_part, 0.22e-3, "the notes' printed output (001, section 12.4)",
            "0.22 ms does not follow from their formula either (0.447 ms at 600 GB/s); one way at 300 GB/s it is 0.895 ms");
    mistake(ratio, 39.3, "the notes' printed output (001, section 12.4)", "39.3x comes from the two misprinted times");
  }
  mistake(compute_part, compute / 2, "a common slip", "that counts only q.k^T; p.v is another 2 d FLOPs per pair");
  mistake(transfer_part, transfer / 2, "a common slip", "that uses the bandwidth of both directions; the ring sends one way");
  e.parts = {compute_part, transfer_part, ratio,
             fraction_part("hidden", "fraction of the communication hidden", times.hidden_fraction, 0.005)};
  e.solution = cat(
      "S/P = ", group_thousands(n), " tokens. step_compute = 4 x ", dim, " x ", group_thousands(n), "^2 x ", p.heads, " / ",
      flops_text(p.machine.flops), " = ", seconds_text(compute), ".\n"
      "step_transfer = 2 x ", group_thousands(n), " x ", p.heads, " x ", dim, " x 2 B / ", bandwidth_text(p.machine.link),
      " = ", bytes_text(kv_bytes(n, dims, 2)), " / ", bandwidth_text(p.machine.link), " = ", seconds_text(transfer), ".\n"
      "ratio = ", ratio_text(compute / transfer), " (= S/P over the overlap threshold of exercise overlap-threshold); hidden = ",
      percent_text(times.hidden_fraction), ".");
  e.command = "ringlab exercises show overlap-threshold";
  return e;
}

}  // namespace

constexpr CatalogEntry kOverlapProfile{
    .id = "overlap-profile",
    .title = "Profiling one ring step: compute vs transfer",
    .source = "context-parallelism notes 001, section 12.4",
    .source_short = "001 §12.4",
    .lab = "",
    .write = write,
};

}  // namespace ringlab::exercises::catalog
