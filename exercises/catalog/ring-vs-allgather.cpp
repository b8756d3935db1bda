// Exercise ring-vs-allgather - all-gather vs ring: the same bytes sent, P times the K/V memory
// held, from the two plans.
#include "exercises/catalog/catalog.hpp"
#include "exercises/catalog/support.hpp"

namespace ringlab::exercises::catalog {

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
  const double gather_memory = double(gather.ring()) * double(payload_bytes(gather, Payload::kv));

  e.numbers = {{"S", p.seq}, {"heads", p.heads}, {"kv_heads", p.kv_heads}, {"dim", 128}, {"P", p.ranks}};
  e.parameters = {seq_parameter(p.seq),
                  {"n_h / HKV", cat(p.heads, " / ", p.kv_heads), "query / key-value heads of d = 128"},
                  ranks_parameter(p.ranks),
                  {"dtype", element_text(ring.spec().element_bytes), "batch 1"}};
  e.statement =
      "Two ways to give every GPU all K/V for one attention forward: all-gather them first, or pass blocks\n"
      "around a ring.\n"
      "ring_total / allgather_total: bytes one GPU sends with each.\n"
      "allgather_memory: K/V bytes a GPU holds at once with the all-gather.\n"
      "ring_memory: extra K/V bytes a GPU holds with the ring (beyond its own block).   ratio: allgather_memory / "
      "ring_memory.";
  e.parts = {bytes_part("ring_total", "bytes one GPU sends in the ring", ring_total)
                 .mistake(block * double(p.ranks), "the notes' formula (section 4.4)",
                          "it counts a send at each of the P steps (2 s d b n_h in total); the last step sends "
                          "nothing and step 0 uses the GPU's own block, so P - 1 blocks travel"),
             bytes_part("allgather_total", "bytes one GPU sends in the all-gather", gather_total),
             bytes_part("allgather_memory", "K/V held at once with the all-gather", gather_memory),
             bytes_part("ring_memory", "extra K/V held at once with the ring (the receive buffer)", block),
             ratio_part("ratio", "allgather_memory / ring_memory", gather_memory / block)};
  e.solution = lines({
      cat("One K/V block: 2 (S/P) HKV d e = ", bytes_text(block), "."),
      cat("ring_total = (P-1) blocks = ", bytes_text(ring_total),
          "; allgather_total = (P-1) blocks too (a ring all-gather) = ", bytes_text(gather_total), "."),
      cat("allgather_memory = all P blocks = 2 S HKV d e = ", bytes_text(gather_memory),
          "; ring_memory = one receive buffer = ", bytes_text(block), "."),
      cat("ratio = P = ", num(gather_memory / block),
          "x: same traffic, but the ring never holds more than two blocks and can"),
      "overlap each hop with compute; the all-gather must finish before its compute starts.",
  });
  e.command =
      "ringlab run --algo allgather --ranks 4 --seq 1024 --heads 8 --kv-heads 2 ; ringlab run --algo ring --ranks "
      "4 --seq 1024 --heads 8 --kv-heads 2    # equal MB sent";
}

constexpr CatalogEntry kRingVsAllgather{"ring-vs-allgather", "All-gather vs ring: the same bytes, different memory",
                                        "context-parallelism notes, sections 3.2, 4.4 and 7", "notes §3.2, §4.4, §7",
                                        write};

}  // namespace ringlab::exercises::catalog
