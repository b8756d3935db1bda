// Exercise hybrid-plan - a Ulysses x ring plan over nodes: tokens, all-to-all and ring bytes from
// the hybrid plan, the ring's time over InfiniBand, and the score block a step would materialise.
#include "exercises/catalog/catalog.hpp"
#include "exercises/catalog/support.hpp"
#include "exercises/step_timing.hpp"
#include "reference/formulas.hpp"
#include "sim/cost/memory_model.hpp"

namespace ringlab::exercises::catalog::hybrid_plan {

static void write(VariantDraw& draw, Exercise& e) {
  struct Params {
    int64_t nodes = 8, gpus_per_node = 8, seq = 2048 * 1024, heads = 64, kv_heads = 64;

    static Params drawn(VariantDraw& d) {
      const int64_t heads = d.pick<int64_t>({32, 64});
      return {d.pick<int64_t>({4, 8, 16}), d.pick<int64_t>({4, 8}),
              d.pick<int64_t>({1024 * 1024, 2048 * 1024, 4096 * 1024}), heads, d.pick<int64_t>({heads, 8})};
    }
  };
  const Params p = variant_params<Params>(draw);
  const int64_t dim = 128, e_bytes = 2, ranks = p.nodes * p.gpus_per_node, U = p.gpus_per_node, R = p.nodes;
  const double ib_bandwidth = 50e9;  // 400 Gb/s InfiniBand, one direction
  const AttentionDims dims = dims_of(1, p.seq, p.heads, p.kv_heads, dim);
  PlanSpec spec = ring_spec(dims, ranks);
  spec.algo = Algorithm::hybrid;
  spec.ulysses = U;
  const Plan plan = build_plan(spec);
  const int64_t tokens = plan.layout().tokens_per_rank();
  const double qkv = q_bytes(tokens, dims, e_bytes) + kv_bytes(tokens, dims, e_bytes);
  const double step = double(payload_bytes(plan, Payload::kv));
  const double alltoall = double(collective_send_bytes(plan, 0, Collective::all_to_all_qkv));
  const double scores =
      attention_matrix_bytes(1, plan.heads_per_rank(), plan.block_tokens(), plan.block_tokens(), e_bytes);
  const LinkClass infiniband{"InfiniBand", 0, ib_bandwidth, false, 0};
  const RingTimes ring = ring_times(R, 0, infiniband.seconds(step));  // the R - 1 transfers, nothing to hide them
  const int64_t hidden = p.heads * dim;
  // The memory model's peak per GPU (the dry run's "memory per rank by phase"), by category.
  const MemoryReport memory = memory_per_rank(plan);
  const PhaseMemory& peak = memory.phases[static_cast<size_t>(memory.peak_phase)];
  const auto at_peak = [&](MemoryCategory c) { return double(peak.bytes[static_cast<size_t>(c)]); };
  const double total = double(memory.peak_bytes);
  std::string breakdown;
  for (size_t c = 0; c < kMemoryCategories; ++c)
    if (peak.bytes[c] > 0)
      breakdown += cat(breakdown.empty() ? "" : " + ", memory_category_name(static_cast<MemoryCategory>(c)), " ",
                       bytes_text(double(peak.bytes[c])));

  e.numbers = {{"S", p.seq}, {"heads", p.heads}, {"kv_heads", p.kv_heads}, {"dim", dim},        {"P", ranks},
               {"U", U},     {"R", R},           {"element", e_bytes},     {"ib", ib_bandwidth}};
  e.parameters = {
      {"GPUs", cat(ranks, " = ", p.nodes, " nodes x ", p.gpus_per_node), "NVLink inside a node, InfiniBand between"},
      seq_parameter(p.seq),
      {"n_h", cat(p.heads), cat("query heads of d = ", dim, " (H = ", hidden, ")")},
      {"HKV", cat(p.kv_heads), "key/value heads"},
      {"U x R", cat(U, " x ", R), "Ulysses degree inside a node x ring degree across nodes"},
      {"dtype", element_text(e_bytes), "q, k, v, out"},
      {"IB", bandwidth_text(ib_bandwidth), "InfiniBand, one direction per GPU (400 Gb/s)"}};
  e.statement = lines({
      cat("Ulysses inside each node (U = ", U, "), a ring across nodes (R = ", R,
          "): after the all-to-all a GPU holds its node's S/R tokens"),
      "for n_h/U heads, and the GPUs with the same index in their node form a ring over the nodes' blocks.",
      "tokens_per_gpu: tokens a GPU owns before the all-to-all.",
      "qkv_bytes: bytes of a GPU's own q, k, v (its tokens, all heads).",
      "alltoall_bytes: bytes a GPU sends in the all-to-all of q, k, v.",
      "ring_step_bytes: bytes of K/V a GPU sends per ring step.",
      "ring_comm_time: time of a GPU's R - 1 ring transfers over InfiniBand (none hidden).",
      "scores_bytes: the score block a GPU would materialise per ring step without a flash kernel.",
      "memory_total: with a flash kernel (no score block), the most memory a GPU holds at once during this",
      "attention forward, counted as ringlab's memory model counts it (chapter 8): its own q, k, v; their",
      "copy after the all-to-all; the all-to-all's send and receive staging (twice the shard); two K/V blocks",
      "(the double buffer); the online softmax's fp32 accumulators (o, m, l); the outputs.",
  });
  const int64_t tokens_per_position = p.seq / R;  // R divides S
  e.parts = {
      tokens_part("tokens_per_gpu", "tokens per GPU before the all-to-all", double(tokens), 0),
      bytes_part("qkv_bytes", "a GPU's own q, k, v", qkv),
      bytes_part("alltoall_bytes", "bytes one GPU sends in the all-to-all of q, k, v", alltoall),
      bytes_part("ring_step_bytes", "K/V bytes one GPU sends per ring step", step)
          .mistake(double(tokens_per_position) * double(hidden) * double(e_bytes),
                   "the source material's answer (exercise 5)",
                   "4.3 GB is (S/R) H e: one tensor over the full hidden size. A GPU sends K and V, but only for "
                   "its n_h/U heads: 2 (S/R)(HKV/U) d e")
          .mistake(2.0 * double(tokens_per_position) * double(hidden) * double(e_bytes), "a common slip",
                   "K and V over the full hidden size; after the all-to-all a GPU holds only n_h/U heads"),
      seconds_part("ring_comm_time", "time of the R - 1 ring transfers at the IB bandwidth", ring.with_overlap)
          .mistake(double(R - 1) * double(tokens_per_position) * double(hidden) * double(e_bytes) / ib_bandwidth,
                   "the source material's answer (exercise 5)",
                   "built on the 4.3 GB step, which counts the full hidden size"),
      bytes_part("scores_bytes", "one GPU's score block per ring step, no flash kernel", scores)
          .mistake(
              attention_matrix_bytes(1, p.heads, tokens, tokens, e_bytes), "the source material's answer (exercise 5)",
              "n_h (S/P)^2 e scores all heads against S/P tokens; after the all-to-all a GPU scores n_h/U heads of "
              "its node's S/R tokens against S/R keys per step - even more, "
              "which is why a flash kernel is a must"),
      bytes_part("memory_total", "a GPU's peak memory during the forward, flash kernel", total)
          .mistake(total - at_peak(MemoryCategory::working), "leaving out the all-to-all's copy",
                   "after the all-to-all a GPU holds its node's tokens for its heads, next to its own q, k, v: "
                   "both are held until the outputs go back")
          .mistake(total - at_peak(MemoryCategory::kv_slots) / 2, "counting one K/V buffer",
                   "the ring overlaps each hop with compute: the block computed on and the next one arriving "
                   "are held together")
          .mistake(qkv + scores, "the scores instead of the flash kernel's state",
                   "with a flash kernel no score block is held; the fp32 accumulators (o, m, l) are")};
  e.solution = lines({
      cat("tokens_per_gpu = S/P = ", group_thousands(tokens),
          ".  qkv_bytes = (S/P)(n_h + 2 HKV) d e = ", bytes_text(qkv), "."),
      cat("alltoall_bytes: a GPU keeps 1/U of its shard and sends (U-1)/U of it: ", bytes_text(alltoall), "."),
      cat("After the all-to-all a GPU holds S/R = ", group_thousands(plan.block_tokens()),
          " tokens for n_h/U = ", plan.heads_per_rank(), " heads (HKV/U = ", plan.kv_heads_per_rank(), " K/V heads)."),
      cat("ring_step_bytes = 2 (S/R)(HKV/U) d e = ", bytes_text(step), " (the hybrid plan's K/V payload)."),
      cat("ring_comm_time = (R-1) x ", bytes_text(step), " / ", bandwidth_text(ib_bandwidth), " = ",
          seconds_text(ring.with_overlap),
          "; the ring overlaps it with compute, so it costs only what compute does not cover."),
      cat("scores_bytes = (n_h/U)(S/R)^2 e = ", bytes_text(scores),
          ": the materialised block is hopeless; a flash kernel keeps only O(S/R) per head."),
      cat("memory_total = the memory model's peak, in phase \"", peak.phase, "\": ", breakdown, " = ",
          bytes_text(total), " (see it with the dry run's memory table)."),
      "The source material's exercise 5 lists what a GPU holds but never asks for this total.",
  });
  e.command =
      "ringlab plan --algo hybrid --ranks 8 --ulysses 4 --seq 4096 --heads 8 --dim 64    # the same phases, small";
}

constexpr CatalogEntry kEntry{"hybrid-plan", "A hybrid Ulysses x ring plan for many nodes",
                              "the source material, exercise 5", "source ex. 5", write};

}  // namespace ringlab::exercises::catalog::hybrid_plan
