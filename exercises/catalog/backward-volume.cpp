// Exercise backward-volume - the ring backward's sends: K/V blocks and dK/dV accumulators (P hops,
// not P - 1), from the backward plan.
#include "exercises/catalog/catalog.hpp"
#include "exercises/catalog/support.hpp"

namespace ringlab::exercises::catalog::backward_volume {

static void write(VariantDraw& draw, Exercise& e) {
  struct Params {
    int64_t seq = 128 * 1024, heads = 32, kv_heads = 8, ranks = 8;

    static Params drawn(VariantDraw& d) {
      const int64_t ranks = d.pick<int64_t>({3, 4, 8, 16});
      return {ranks * d.pick<int64_t>({8192, 16384, 32768}), 32, d.pick<int64_t>({8, 32}), ranks};
    }
  };
  const Params p = variant_params<Params>(draw);
  const AttentionDims dims = dims_of(1, p.seq, p.heads, p.kv_heads, 128);
  PlanSpec spec = ring_spec(dims, p.ranks);
  spec.backward = true;
  const Plan plan = build_plan(spec);
  const int64_t kv_sends = exchange_sends(plan, 0, Payload::kv, Pass::backward);
  const int64_t dkv_sends = exchange_sends(plan, 0, Payload::dkv, Pass::backward);
  const double kv = double(exchange_send_bytes(plan, 0, Payload::kv, Pass::backward));
  const double dkv = double(exchange_send_bytes(plan, 0, Payload::dkv, Pass::backward));
  const double dkv_block = double(payload_bytes(plan, Payload::dkv));

  e.numbers = {{"S", p.seq}, {"heads", p.heads}, {"kv_heads", p.kv_heads}, {"dim", 128}, {"P", p.ranks}};
  e.parameters = {seq_parameter(p.seq),
                  {"n_h / HKV", cat(p.heads, " / ", p.kv_heads), "heads of d = 128, batch 1"},
                  ranks_parameter(p.ranks),
                  {"dtypes", "K/V bf16, dK/dV fp32", "gradient accumulators travel in fp32"}};
  e.statement =
      "The ring backward passes K/V around the ring again, and each block's dK/dV accumulator collects every\n"
      "GPU's contribution until it is back with the block's owner (it travels with its K/V block).\n"
      "kv_sends / dkv_sends: how many K/V blocks and how many dK/dV accumulators does one GPU send?\n"
      "bytes: all bytes one GPU sends in the backward.";
  e.parts = {
      count_part("kv_sends", "K/V block sends per GPU", kv_sends),
      count_part("dkv_sends", "dK/dV accumulator sends per GPU", dkv_sends)
          .mistake(
              double(p.ranks - 1), kNotes,
              "P - 1 would leave each accumulator one hop short of home: it travels one step behind its K/V block, "
              "so it needs one extra hop (the notes' reverse-direction version also sends P - 1, and is wrong for "
              "P >= 3)"),
      bytes_part("bytes", "bytes one GPU sends in the backward", kv + dkv)
          .mistake(kv + double(p.ranks - 1) * dkv_block, kNotes, "one dK/dV hop short: the accumulators take P hops")};
  e.solution = lines({
      cat("K/V rotate exactly as in the forward: P - 1 = ", kv_sends, " sends of ", bytes_text(kv / double(kv_sends)),
          " = ", bytes_text(kv), "."),
      "The accumulator of the block a GPU holds at step t collects that step's dK/dV and moves on one step",
      cat("behind the block: ", dkv_sends, " sends of ", bytes_text(dkv_block), " (fp32) = ", bytes_text(dkv),
          ", the last one bringing it home."),
      cat("bytes = ", bytes_text(kv + dkv), ". Sending the accumulators the other way round (the notes' section 8) is"),
      "wrong for P >= 3: see exercise erratum-dkv-direction.",
  });
  e.command = "ringlab plan --ranks 4 --seq 1024 --causal --backward    # dkv> cells: P per rank, kv> cells: P - 1";
}

constexpr CatalogEntry kEntry{"backward-volume", "The ring backward's traffic: K/V and their gradients",
                              "context-parallelism notes, section 8 (and the book's erratum 1)", "notes §8", write};

}  // namespace ringlab::exercises::catalog::backward_volume
