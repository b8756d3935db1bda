// Exercise attention-memory - the materialised attention scores: their bytes on one GPU and per
// ring step; the factor between them is P^2, not P.
#include "exercises/catalog/catalog.hpp"
#include "exercises/catalog/support.hpp"
#include "reference/formulas.hpp"

namespace ringlab::exercises::catalog {

namespace {

Exercise write(VariantDraw& draw) {
  struct Params {
    int64_t seq, heads, dim, ranks, batch, element;
    bool operator==(const Params&) const = default;
  };
  const Params p = variant_params(draw, Params{256 * 1024, 32, 128, 8, 1, 2}, [](VariantDraw& d) {
    return Params{d.pick<int64_t>({64 * 1024, 128 * 1024, 256 * 1024, 512 * 1024, 1024 * 1024}),
                  d.pick<int64_t>({16, 32, 40, 64}), 128, d.pick<int64_t>({4, 8, 16, 32}), d.pick<int64_t>({1, 2}),
                  d.pick<int64_t>({2, 2, 4})};
  });
  const Plan plan = build_plan(ring_spec(dims_of(p.batch, p.seq, p.heads, p.heads, p.dim), p.ranks));
  const int64_t n = plan.block_tokens();
  const double full = attention_matrix_bytes(p.batch, p.heads, p.seq, p.seq, p.element);
  const double ring = attention_matrix_bytes(p.batch, p.heads, n, n, p.element);

  Exercise e;
  e.numbers = {{"S", double(p.seq)}, {"heads", double(p.heads)}, {"dim", double(p.dim)}, {"P", double(p.ranks)}, {"batch", double(p.batch)}, {"element", double(p.element)}};
  e.parameters = {{"H", cat(p.heads * p.dim), "hidden size (n_h heads of d = " + std::to_string(p.dim) + ")"},
                  {"n_h", cat(p.heads), "attention heads"},
                  {"S", tokens_text(p.seq) + " tokens", "sequence length"},
                  {"b", cat(p.batch), "batch"},
                  {"P", cat(p.ranks), "GPUs in the ring"},
                  {"dtype", element_text(p.element), "of the stored scores"}};
  e.statement = cat(
      "Plain attention materialises one S x S matrix of scores softmax(Q K^T / sqrt(d)) per (batch, head).\n"
      "full: how many bytes do the scores of one layer take when a single GPU materialises all of them?\n"
      "ring: with Ring Attention over P = ", p.ranks, " GPUs, a GPU holds S/P queries and, at each step, one block of\n"
      "      S/P keys. How many bytes does the score block it materialises at one step take?\n"
      "reduction: by what factor is the per-GPU score memory smaller than the full matrix?");
  Part full_part = bytes_part("full", "bytes of the full S x S score matrices, all heads", full);
  Part ring_part = bytes_part("ring", cat("bytes of one GPU's score block at one ring step (P = ", p.ranks, ")"), ring);
  mistake(ring_part, full / double(p.ranks), "a common slip",
          "dividing by P counts S/P queries against all S keys; a ring step holds one block of S/P keys, so both "
          "sides shrink and the scores shrink by P^2");
  Part reduction = ratio_part("reduction", "full / ring", full / ring);
  mistake(reduction, double(p.ranks), "a common slip", "the factor is P^2, not P: queries and keys are both cut by P");
  e.parts = {full_part, ring_part, reduction};
  e.solution = cat(
      "full = b n_h S^2 e = ", p.batch, " x ", p.heads, " x ", group_thousands(p.seq), "^2 x ", p.element, " B = ",
      bytes_text(full), " (", num(full / 0x1p40), " TiB).\n"
      "ring: the ring plan gives each GPU a block of S/P = ", group_thousands(n), " tokens, and at each step it scores\n"
      "      those queries against one block of as many keys: b n_h (S/P)^2 e = ", bytes_text(ring), " (",
      num(ring / 0x1p30), " GiB).\n"
      "reduction = S^2 / (S/P)^2 = P^2 = ", num(full / ring), "x. Every score is still computed, just never all at once;\n"
      "a flash kernel inside each step removes even the block (exercise flash-ring-memory).");
  e.command = cat("ringlab plan --ranks ", p.ranks, " --seq ", p.seq, " --heads ", p.heads, " --dim ", p.dim,
                  "    # every cell scores one S/P block of queries against one S/P block of keys");
  return e;
}

}  // namespace

constexpr CatalogEntry kAttentionMemory{
    .id = "attention-memory",
    .title = "Memory of the materialised attention scores",
    .source = "source material 000, exercise 1",
    .source_short = "000 ex. 1",
    .lab = "",
    .write = write,
};

}  // namespace ringlab::exercises::catalog
