// Exercise ring-vs-allgather - all-gather vs ring: the same bytes sent, P times the K/V memory
// held, from the two plans.
#include "exercises/catalog/catalog.hpp"
#include "exercises/catalog/support.hpp"

namespace ringlab::exercises::catalog {

namespace {

Exercise write(VariantDraw& draw) {
  struct Params {
    int64_t seq, heads, kv_heads, ranks;
    bool operator==(const Params&) const = default;
  };
  const Params p = variant_params(draw, Params{128 * 1024, 32, 8, 8}, [](VariantDraw& d) {
    const int64_t heads = d.pick<int64_t>({32, 64});
    return Params{d.pick<int64_t>({64 * 1024, 128 * 1024, 256 * 1024}), heads, d.pick<int64_t>({8, heads}),
                  d.pick<int64_t>({4, 8, 16})};
  });
  const AttentionDims dims = dims_of(1, p.seq, p.heads, p.kv_heads, 128);
  const Plan ring = build_plan(ring_spec(dims, p.ranks));
  PlanSpec gather_spec = ring_spec(dims, p.ranks);
  gather_spec.algo = Algorithm::allgather;
  const Plan gather = build_plan(gather_spec);
  const double ring_total = double(exchange_send_bytes(ring, 0, Payload::kv, Pass::forward));
  const double gather_total = double(collective_send_bytes(gather, 0, Collective::all_gather_kv));
  const double block = double(payload_bytes(ring, Payload::kv));
  const double gather_memory = double(gather.ring()) * double(payload_bytes(gather, Payload::kv));

  Exercise e;
  e.numbers = {{"S", double(p.seq)}, {"heads", double(p.heads)}, {"kv_heads", double(p.kv_heads)}, {"dim", 128}, {"P", double(p.ranks)}};
  e.parameters = {{"S", tokens_text(p.seq) + " tokens", "sequence length"},
                  {"n_h / HKV", cat(p.heads, " / ", p.kv_heads), "query / key-value heads of d = 128"},
                  {"P", cat(p.ranks), "GPUs"},
                  {"dtype", "bf16 (2 bytes)", "batch 1"}};
  e.statement =
      "Two ways to give every GPU all K/V for one attention forward: all-gather them first, or pass blocks\n"
      "around a ring.\n"
      "ring_total / allgather_total: bytes one GPU sends with each.\n"
      "allgather_memory: K/V bytes a GPU holds at once with the all-gather.\n"
      "ring_memory: extra K/V bytes a GPU holds with the ring (beyond its own block).   ratio: allgather_memory / ring_memory.";
  Part ring_part = bytes_part("ring_total", "bytes one GPU sends in the ring", ring_total);
  mistake(ring_part, block * double(p.ranks), "the notes' formula (001, section 4.4)",
          "it counts a send at each of the P steps (2 s d b n_h in total); the last step sends nothing and step 0 "
          "uses the GPU's own block, so P - 1 blocks travel");
  e.parts = {ring_part, bytes_part("allgather_total", "bytes one GPU sends in the all-gather", gather_total),
             bytes_part("allgather_memory", "K/V held at once with the all-gather", gather_memory),
             bytes_part("ring_memory", "extra K/V held at once with the ring (the receive buffer)", block),
             ratio_part("ratio", "allgather_memory / ring_memory", gather_memory / block)};
  e.solution = cat(
      "One K/V block: 2 (S/P) HKV d e = ", bytes_text(block), ".\n"
      "ring_total = (P-1) blocks = ", bytes_text(ring_total), "; allgather_total = (P-1) blocks too (a ring all-gather) = ",
      bytes_text(gather_total), ".\n"
      "allgather_memory = all P blocks = 2 S HKV d e = ", bytes_text(gather_memory), "; ring_memory = one receive buffer = ",
      bytes_text(block), ".\n"
      "ratio = P = ", num(gather_memory / block), "x: same traffic, but the ring never holds more than two blocks and can\n"
      "overlap each hop with compute; the all-gather must finish before its compute starts.");
  e.command = cat("ringlab run --algo allgather --ranks 4 --seq 1024 --heads 8 --kv-heads 2 ; ringlab run --algo ring --ranks 4 "
                  "--seq 1024 --heads 8 --kv-heads 2    # equal MB sent");
  return e;
}

}  // namespace

constexpr CatalogEntry kRingVsAllgather{
    .id = "ring-vs-allgather",
    .title = "All-gather vs ring: the same bytes, different memory",
    .source = "context-parallelism notes 001, sections 3.2, 4.4 and 7",
    .source_short = "001 §3.2, §4.4, §7",
    .lab = "",
    .write = write,
};

}  // namespace ringlab::exercises::catalog
