// Exercise comm-volume - bytes one GPU sends in a ring forward and in Ulysses' two all-to-alls,
// read off the plans.
#include "exercises/catalog/catalog.hpp"
#include "exercises/catalog/support.hpp"
#include "reference/formulas.hpp"

namespace ringlab::exercises::catalog::comm_volume {

static void write(VariantDraw& draw, Exercise& e) {
  struct Params {
    int64_t seq = 1024 * 1024, heads = 64, kv_heads = 64, dim = 128, ranks = 16;

    static Params drawn(VariantDraw& d) {
      // Ulysses splits whole heads: the K/V heads must divide by P.
      const int64_t seq = d.pick<int64_t>({256 * 1024, 512 * 1024, 1024 * 1024, 2048 * 1024});
      const int64_t heads = d.pick<int64_t>({32, 64}), ranks = d.pick<int64_t>({4, 8, 16, 32});
      return {seq, heads, ranks <= 8 ? d.pick<int64_t>({heads, 8}) : heads, 128, ranks};
    }
  };
  const Params p = variant_params<Params>(draw);
  const int64_t e_bytes = 2;
  const AttentionDims dims = dims_of(1, p.seq, p.heads, p.kv_heads, p.dim);
  const Plan ring_plan = build_plan(ring_spec(dims, p.ranks));
  const double ring = double(exchange_send_bytes(ring_plan, 0, Payload::kv, Pass::forward));
  const double ulysses = ulysses_forward_send_bytes(dims, p.ranks, e_bytes);
  PlanSpec uspec = ring_spec(dims, p.ranks);
  uspec.algo = Algorithm::ulysses;
  uspec.ulysses = p.ranks;
  const Plan ulysses_plan = build_plan(uspec);
  const double ulysses_plan_bytes = double(collective_send_bytes(ulysses_plan, 0, Collective::all_to_all_qkv) +
                                           collective_send_bytes(ulysses_plan, 0, Collective::all_to_all_out));
  const double hop = kv_bytes(p.seq / p.ranks, dims, e_bytes);
  // Ulysses' volume with the kept 1/P counted as sent: the whole shard of q, k, v and out.
  const double ulysses_with_kept = ulysses * double(p.ranks) / double(p.ranks - 1);

  e.numbers = {{"S", p.seq},   {"heads", p.heads}, {"kv_heads", p.kv_heads},
               {"dim", p.dim}, {"P", p.ranks},     {"element", e_bytes}};
  e.parameters = {
      seq_parameter(p.seq),
      {"n_h", cat(p.heads),
       "query heads of d = " + std::to_string(p.dim) + " (H = " + std::to_string(p.heads * p.dim) + ")"},
      {"HKV", cat(p.kv_heads), p.kv_heads == p.heads ? "key/value heads (no GQA)" : "key/value heads (GQA)"},
      ranks_parameter(p.ranks),
      {"dtype", element_text(e_bytes), "q, k, v, out on the wire"},
      {"b", "1", "batch"}};
  e.statement =
      "One attention forward, sequence-parallel over P GPUs (each starts with S/P tokens, all heads).\n"
      "ring: Ring Attention passes K/V blocks around the ring. How many bytes does one GPU send?\n"
      "ulysses: Ulysses does an all-to-all of q, k, v (to S tokens x n_h/P heads per GPU), attends, and an\n"
      "         all-to-all of out back. How many bytes does one GPU send (count q, k, v and out)? What an\n"
      "         all-to-all keeps (the 1/P of each tensor that stays on its own GPU) is not sent: do not count it.\n"
      "ratio: ring / ulysses.";
  e.parts = {
      bytes_part("ring", "bytes one GPU sends in the ring forward", ring)
          .mistake(hop * double(p.ranks), kNotes,
                   "counts P sends; step 0 computes on the GPU's own block, so only P - 1 blocks travel "
                   "(the notes' section 4.4 makes this slip)"),
      bytes_part("ulysses", "bytes one GPU sends in Ulysses' two all-to-alls (the 1/P kept is not sent)", ulysses)
          .mistake(ulysses_with_kept, "a common slip",
                   "counts the 1/P of q, k, v and out that each all-to-all keeps on its own GPU; only the "
                   "other (P - 1)/P leaves it"),
      ratio_part("ratio", "ring / ulysses", ring / ulysses, 0.01)
          .mistake(ring / ulysses_with_kept, "a common slip",
                   "divides by a Ulysses volume that counts the 1/P each all-to-all keeps on its own GPU; "
                   "only (P - 1)/P of each tensor is sent")};
  e.solution = lines({
      cat("ring: a K/V block is 2 (S/P) HKV d e = 2 x ", group_thousands(p.seq / p.ranks), " x ", p.kv_heads, " x ",
          p.dim, " x 2 B = ", bytes_text(hop), ". Step 0 uses the GPU's own block, so P - 1 = ", p.ranks - 1,
          " blocks travel:"),
      cat("      ", bytes_text(ring), " (the ring plan's exchanges of one rank add up to exactly this)."),
      "ulysses: an all-to-all keeps 1/P of a GPU's shard and sends the rest. In: q, k, v = (S/P)(n_h + 2 HKV) d e;",
      cat("      back: out = (S/P) n_h d e. Total (P-1)/P (S/P)(2 n_h + 2 HKV) d e = ", bytes_text(ulysses), "."),
      cat("      (ringlab's Ulysses plan also sends the fp32 LSE back with out: ", bytes_text(ulysses_plan_bytes),
          ".)"),
      cat("ratio = P HKV / (n_h + HKV) = ", num(ring / ulysses), "x. Per GPU the ring's volume stays near 2 S HKV d e"),
      "whatever P is, while Ulysses' falls as 1/P; but the ring's transfers hide behind compute and the",
      "all-to-alls do not, and Ulysses needs n_h and HKV divisible by P (exercise ulysses-degree).",
  });
  e.command =
      "ringlab run --algo ring --ranks 4 --seq 1024 --heads 8 --dim 64 ; ringlab run --algo ulysses --ranks 4 "
      "--seq 1024 --heads 8 --dim 64    # compare the MB sent columns (the simulator sends fp32)";
}

constexpr CatalogEntry kEntry{"comm-volume", "Ring vs Ulysses: bytes each GPU sends", "the source material, exercise 2",
                              "source ex. 2", write};

}  // namespace ringlab::exercises::catalog::comm_volume
