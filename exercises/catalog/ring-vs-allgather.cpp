// Exercise ring-vs-allgather - all-gather vs ring: the same bytes sent, P/2 times the K/V memory
// held, from the two plans. The ring's K/V memory is its two slots of the double buffer (the block
// computed on and the one arriving), as the plan places them and the memory model counts them.
#include <algorithm>

#include "exercises/catalog/catalog.hpp"
#include "exercises/catalog/support.hpp"
#include "sim/cost/memory_model.hpp"

namespace ringlab::exercises::catalog::ring_vs_allgather {

static void write(VariantDraw& draw, Exercise& e) {
  struct Params {
    int64_t seq = 128 * 1024, heads = 32, kv_heads = 8, ranks = 8;

    static Params drawn(VariantDraw& d) {
      const int64_t heads = d.pick<int64_t>({32, 64});
      return {d.pick<int64_t>({64 * 1024, 128 * 1024, 256 * 1024}), heads, d.pick<int64_t>({8, heads}),
              d.pick<int64_t>({4, 8, 16})};
    }
  };
  const Params p = variant_params<Params>(draw);
  const AttentionDims dims = dims_of(1, p.seq, p.heads, p.kv_heads, 128);
  const Plan ring = build_plan(ring_spec(dims, p.ranks));
  PlanSpec gather_spec = ring_spec(dims, p.ranks);
  gather_spec.algo = Algorithm::allgather;
  const Plan gather = build_plan(gather_spec);
  const double ring_total = double(exchange_send_bytes(ring, 0, Payload::kv, Pass::forward));
  const double gather_total = double(collective_send_bytes(gather, 0, Collective::all_gather_kv));
  const double block = double(payload_bytes(ring, Payload::kv));
  // Memory from the memory model (the dry run's "memory per rank by phase" table): the ring's kv
  // slots in its forward phase, the all-gather's gathered K/V in its compute phase.
  const auto held = [](const Plan& plan, MemoryCategory category) {
    int64_t most = 0;
    for (const PhaseMemory& phase : memory_per_rank(plan).phases)
      most = std::max(most, phase.bytes[static_cast<size_t>(category)]);
    return double(most);
  };
  const double gather_memory = held(gather, MemoryCategory::gathered_kv);
  const double ring_memory = held(ring, MemoryCategory::kv_slots);  // the double buffer: two blocks

  e.numbers = {{"S", p.seq}, {"heads", p.heads}, {"kv_heads", p.kv_heads}, {"dim", 128}, {"P", p.ranks}};
  e.parameters = {seq_parameter(p.seq),
                  {"n_h / HKV", cat(p.heads, " / ", p.kv_heads), "query / key-value heads of d = 128"},
                  ranks_parameter(p.ranks),
                  {"dtype", element_text(ring.spec().element_bytes), "batch 1"}};
  e.statement =
      "Two ways to give every GPU all K/V for one attention forward: all-gather them first, or pass blocks\n"
      "around a ring.\n"
      "ring_total / allgather_total: bytes one GPU sends with each.\n"
      "allgather_memory: K/V bytes a GPU holds at once in the all-gather's buffer (every block, its own included).\n"
      "ring_memory: K/V bytes a GPU holds at once in the ring's buffers, beyond its own block: the ring overlaps\n"
      "each hop with compute (double buffering).   ratio: allgather_memory / ring_memory.";
  e.parts = {bytes_part("ring_total", "bytes one GPU sends in the ring", ring_total)
                 .mistake(block * double(p.ranks), "the notes' formula (section 4.4)",
                          "it counts a send at each of the P steps (2 s d b n_h in total); the last step sends "
                          "nothing and step 0 uses the GPU's own block, so P - 1 blocks travel"),
             bytes_part("allgather_total", "bytes one GPU sends in the all-gather", gather_total),
             bytes_part("allgather_memory", "K/V held at once with the all-gather", gather_memory),
             bytes_part("ring_memory", "K/V held at once in the ring's buffers (double buffering)", ring_memory)
                 .mistake(block, "counting one receive buffer",
                          "with the hop overlapped, a GPU computes on one received block while the next one "
                          "arrives: two buffers, as the memory model's kv slots hold"),
             ratio_part("ratio", "allgather_memory / ring_memory", gather_memory / ring_memory)
                 .mistake(gather_memory / block, "counting one receive buffer",
                          "the ring holds two blocks beyond its own (double buffering): the ratio is P/2, not P")};
  e.solution = lines({
      cat("One K/V block: 2 (S/P) HKV d e = ", bytes_text(block), "."),
      cat("ring_total = (P-1) blocks = ", bytes_text(ring_total),
          "; allgather_total = (P-1) blocks too (a ring all-gather) = ", bytes_text(gather_total), "."),
      cat("allgather_memory = all P blocks = 2 S HKV d e = ", bytes_text(gather_memory),
          "; ring_memory = two blocks (the double buffer: the block computed on and the next one arriving) = ",
          bytes_text(ring_memory), "."),
      cat("ratio = P/2 = ", num(gather_memory / ring_memory),
          "x: same traffic, but the ring never holds more than two blocks beyond its own and can"),
      "overlap each hop with compute; the all-gather must finish before its compute starts.",
  });
  e.command =
      "ringlab run --algo allgather --ranks 4 --seq 1024 --heads 8 --kv-heads 2 ; ringlab run --algo ring --ranks "
      "4 --seq 1024 --heads 8 --kv-heads 2    # equal MB sent";
}

constexpr CatalogEntry kEntry{"ring-vs-allgather", "All-gather vs ring: the same bytes, different memory",
                              "context-parallelism notes, sections 3.2, 4.4 and 7", "notes §3.2, §4.4, §7", write};

}  // namespace ringlab::exercises::catalog::ring_vs_allgather
