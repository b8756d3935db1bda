// Exercise backward-volume - the ring backward's sends: K/V blocks and dK/dV accumulators (P hops,
// not P - 1), from the backward plan.
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
    const int64_t ranks = d.pick<int64_t>({3, 4, 8, 16});
    return Params{ranks * d.pick<int64_t>({8192, 16384, 32768}), 32, d.pick<int64_t>({8, 32}), ranks};
  });
  const AttentionDims dims = dims_of(1, p.seq, p.heads, p.kv_heads, 128);
  PlanSpec spec = ring_spec(dims, p.ranks);
  spec.backward = true;
  const Plan plan = build_plan(spec);
  const int64_t kv_sends = exchange_sends(plan, 0, Payload::kv, Pass::backward);
  const int64_t dkv_sends = exchange_sends(plan, 0, Payload::dkv, Pass::backward);
  const double kv = double(exchange_send_bytes(plan, 0, Payload::kv, Pass::backward));
  const double dkv = double(exchange_send_bytes(plan, 0, Payload::dkv, Pass::backward));
  const double dkv_block = double(payload_bytes(plan, Payload::dkv));

  Exercise e;
  e.numbers = {{"S", double(p.seq)}, {"heads", double(p.heads)}, {"kv_heads", double(p.kv_heads)}, {"dim", 128}, {"P", double(p.ranks)}};
  e.parameters = {{"S", tokens_text(p.seq) + " tokens", "sequence length"},
                  {"n_h / HKV", cat(p.heads, " / ", p.kv_heads), "heads of d = 128, batch 1"},
                  {"P", cat(p.ranks), "GPUs"},
                  {"dtypes", "K/V bf16, dK/dV fp32", "gradient accumulators travel in fp32"}};
  e.statement =
      "The ring backward passes K/V around the ring again, and each block's dK/dV accumulator collects every\n"
      "GPU's contribution until it is back with the block's owner (it travels with its K/V block).\n"
      "kv_sends / dkv_sends: how many K/V blocks and how many dK/dV accumulators does one GPU send?\n"
      "bytes: all bytes one GPU sends in the backward.";
  Part dkv_part = number_part("dkv_sends", "dK/dV accumulator sends per GPU", double(dkv_sends), 0, 0);
  mistake(dkv_part, double(p.ranks - 1), kNotes,
          "P - 1 would leave each accumulator one hop short of home: it travels one step behind its K/V block, so it "
          "needs one extra hop (the notes' reverse-direction version also sends P - 1, and is wrong for P >= 3)");
  Part bytes = bytes_part("bytes", "bytes one GPU sends in the backward", kv + dkv);
  mistake(bytes, kv + double(p.ranks - 1) * dkv_block, kNotes, "one dK/dV hop short: the accumulators take P hops");
  e.parts = {number_part("kv_sends", "K/V block sends per GPU", double(kv_sends), 0, 0), dkv_part, bytes};
  e.solution = cat(
      "K/V rotate exactly as in the forward: P - 1 = ", kv_sends, " sends of ", bytes_text(kv / double(kv_sends)), " = ",
      bytes_text(kv), ".\n"
      "The accumulator of the block a GPU holds at step t collects that step's dK/dV and moves on one step\n"
      "behind the block: ", dkv_sends, " sends of ", bytes_text(dkv_block), " (fp32) = ", bytes_text(dkv),
      ", the last one bringing it home.\n"
      "bytes = ", bytes_text(kv + dkv), ". Sending the accumulators the other way round (the notes' section 8) is\n"
      "wrong for P >= 3: see exercise erratum-dkv-direction.");
  e.command = cat("ringlab plan --ranks 4 --seq 1024 --causal --backward    # dkv> cells: P per rank, kv> cells: P - 1");
  return e;
}

}  // namespace

constexpr CatalogEntry kBackwardVolume{
    .id = "backward-volume",
    .title = "The ring backward's traffic: K/V and their gradients",
    .source = "context-parallelism notes 001, section 8 (and DESIGN.md erratum 1)",
    .source_short = "001 §8",
    .lab = "",
    .write = write,
};

}  // namespace ringlab::exercises::catalog
