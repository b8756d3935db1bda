// Exercise overlap-threshold - the smallest tokens per GPU for which a ring step's compute covers
// its K/V transfer, with and without GQA (step_timing.hpp's threshold on published GPUs and links).
#include "exercises/catalog/catalog.hpp"
#include "exercises/catalog/support.hpp"
#include "exercises/step_timing.hpp"

namespace ringlab::exercises::catalog::overlap_threshold {

static void write(VariantDraw& draw, Exercise& e) {
  struct Params {
    Machine machine = kA100;
    int64_t group = 4;  // query heads per K/V head in the GQA part

    static Params drawn(VariantDraw& d) { return {draw_machine(d), d.pick<int64_t>({2, 4, 8})}; }
  };
  const Params p = variant_params<Params>(draw);
  const StepCostModel model{p.machine.flops, p.machine.link, 0, 2};
  const AttentionDims mha = dims_of(1, 1, 32, 32, 128);
  const AttentionDims gqa = dims_of(1, 1, 32, 32 / p.group, 128);
  const int64_t tokens = overlap_threshold_tokens(model, mha);
  const int64_t gqa_tokens = overlap_threshold_tokens(model, gqa);

  e.numbers = {{"flops", p.machine.flops}, {"link", p.machine.link}, {"group", p.group}};
  e.parameters = {{"GPU", cat(p.machine.name), cat(flops_text(p.machine.flops), " bf16 dense")},
                  {"link", bandwidth_text(p.machine.link), cat("one direction (", p.machine.link_note, ")")},
                  {"dtype", "bf16", "K and V on the wire"},
                  {"heads", "n_h query heads of d dims", "the answer does not depend on n_h, d or the batch"}};
  e.statement = lines({
      "A ring step with c tokens per GPU computes a full c x c block (forward: q.k^T and p.v, 4 d FLOPs per",
      "(query, key) pair and head) while one K/V block of c tokens crosses the link.",
      "tokens: the smallest c for which the compute covers the transfer (no GQA: as many K/V heads as query heads).",
      cat("gqa_tokens: the same with ", p.group, " query heads per K/V head."),
  });
  e.model = "compute = 4 d c^2 n_h / F;  transfer = 2 c HKV d e / BW (K and V, one direction, no latency).";
  e.parts = {tokens_part("tokens", "smallest tokens per GPU with compute >= transfer", double(tokens), 0.025)
                 .mistake(double(tokens) / 2, "a common slip",
                          "that uses the link's bandwidth counting both directions; a ring GPU sends one way while "
                          "it receives the other")
                 .mistake(double(tokens) * 2, "a common slip",
                          "that counts only the q.k^T GEMM (2 d FLOPs per pair); p.v costs as much again"),
             tokens_part("gqa_tokens", "the same with GQA", double(gqa_tokens), 0.025)};
  e.solution = lines({
      "compute >= transfer  <=>  4 d c^2 n_h / F >= 2 c HKV d e / BW  <=>  c >= (HKV/n_h) e F / (2 BW).",
      cat("tokens = F / BW (e = 2, HKV = n_h) = ", flops_text(p.machine.flops), " / ", bandwidth_text(p.machine.link),
          " = ", group_thousands(tokens), " tokens per GPU."),
      cat("gqa_tokens = tokens / ", p.group, " = ", group_thousands(gqa_tokens),
          ": GQA shrinks the K/V that travel, not the compute."),
      "The notes reach about 1K for the A100 with 2 d FLOPs per pair (only q.k^T) and 600 GB/s (both directions):",
      "two factor-of-2 slips that cancel.",
  });
  e.command = "ringlab exercises show overlap-profile    # the same model on a concrete step";
}

constexpr CatalogEntry kEntry{
    "overlap-threshold", "How many tokens per GPU hide the ring's transfers?",
    "context-parallelism notes, section 7.1 (the Ring Attention paper's block-size condition)", "notes §7.1", write};

}  // namespace ringlab::exercises::catalog::overlap_threshold
