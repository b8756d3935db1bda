// Exercise redundant-bytes - the K/V a plain ring sends to ranks that never use it, under a
// packed-document causal mask with the contiguous layout.
#include <vector>

#include "exercises/catalog/catalog.hpp"
#include "exercises/catalog/support.hpp"

namespace ringlab::exercises::catalog::redundant_bytes {

static void write(VariantDraw& draw, Exercise& e) {
  int64_t P = 4, seq = 8192, kv_heads = 8, dim = 128;
  std::vector<int64_t> documents{3072, 1024, 512, 2560, 1024};
  if (!draw.source()) {
    P = draw.pick<int64_t>({4, 8});
    seq = P * draw.pick<int64_t>({1024, 2048});
    kv_heads = draw.pick<int64_t>({4, 8});
    const int64_t count = draw.pick<int64_t>({3, 5, 8});
    documents = layout_documents("random:" + std::to_string(count), seq, draw.next(), LayoutKind::contiguous, P, 0);
  }
  PlanSpec spec = ring_spec(dims_of(1, seq, kv_heads, kv_heads, dim), P, LayoutKind::contiguous, true);
  spec.documents = documents;
  const Plan plan = build_plan(spec);
  // A plain ring: every rank receives the other P-1 blocks; count those none of whose keys it sees.
  const double block = double(payload_bytes(plan, Payload::kv));
  double unused = 0;
  for (int64_t r = 0; r < P; ++r)
    for (int64_t g = 0; g < P; ++g)
      if (g != r && resolve_compute(plan, r, g, Pass::forward).pairs == 0) unused += block;
  const double total = double(P) * double(P - 1) * block;

  e.numbers = {{"P", P},     {"S", seq},     {"kv_heads", kv_heads},
               {"dim", dim}, {"element", 2}, {"documents", documents.size()}};
  for (size_t d = 0; d < documents.size(); ++d) e.numbers.push_back({"doc" + std::to_string(d), documents[d]});
  e.parameters = {ranks_parameter(P),
                  seq_parameter(seq, "tokens, packed"),
                  {"documents", documents_string(documents, 32), "lengths in packing order"},
                  {"K/V", cat(kv_heads, " heads of d = ", dim, ", bf16"), "one batch row"}};
  e.statement =
      "A plain ring (every K/V block visits every rank, P-1 hops) runs causal attention over packed documents,\n"
      "contiguous layout. A rank uses a block only if some of its queries see some of the block's keys.\n"
      "unused: how many bytes of K/V, summed over all ranks, arrive at a rank that never uses them?\n"
      "share: what fraction of all K/V bytes the ranks receive is that?";
  e.parts = {bytes_part("unused", "K/V bytes received and never used, all ranks", unused, 0.005)
                 .mistake(0, "a ring sends only what is needed",
                          "a plain ring forwards every block to every rank; under a document mask most ranks only "
                          "pass most blocks on"),
             fraction_part("share", "unused / all K/V received", unused / total, 0.0005)};
  e.solution = lines({
      cat("One block of K and V: 2 x (S/P) x HKV x d x 2 bytes = ", bytes_text(block),
          "; the ring delivers P(P-1) = ", P * (P - 1), " of them."),
      "Rank r needs block g (g != r) only if a document spans both: for a causal mask also g < r.",
      cat("Unused: ", bytes_text(unused), " = ", percent_text(unused / total),
          " of the traffic. The per-document zig-zag layout brings it to zero (every rank then holds a piece of every",
          " document); ringlab's ring (without --full-ring) forwards a block only as far as the last rank that needs",
          " it."),
  });
  e.command = "ringlab plan --ranks " + std::to_string(P) + " --seq " + std::to_string(seq) + " --heads " +
              std::to_string(kv_heads) + " --dim " + std::to_string(dim) + " --causal --full-ring --docs " +
              documents_string(documents, 64) +
              "    # the never-used K/V column (the simulator plans in fp32: twice the bf16 bytes)";
}

constexpr CatalogEntry kEntry{"redundant-bytes", "K/V that a plain ring sends for nothing",
                              "ringlab's chapter on documents and windows", "ringlab", write};

}  // namespace ringlab::exercises::catalog::redundant_bytes
