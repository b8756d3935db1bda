// Exercise memory-table - per-GPU attention memory, one GPU or a ring, scores materialised or a
// flash kernel: a table.
#include "exercises/catalog/catalog.hpp"
#include "exercises/catalog/support.hpp"
#include "reference/formulas.hpp"

namespace ringlab::exercises::catalog::memory_table {

static void write(VariantDraw& draw, Exercise& e) {
  struct Params {
    int64_t seq = 128 * 1024, heads = 32, ranks = 8;

    static Params drawn(VariantDraw& d) {
      return {d.pick<int64_t>({32 * 1024, 128 * 1024, 512 * 1024}), d.pick<int64_t>({16, 32, 64}),
              d.pick<int64_t>({4, 8, 16})};
    }
  };
  const Params p = variant_params<Params>(draw);
  const int64_t e_bytes = 2, dim = 128;
  const AttentionDims dims = dims_of(1, p.seq, p.heads, p.heads, dim);
  const int64_t n = build_plan(ring_spec(dims, p.ranks)).block_tokens();
  auto tensors = [&](int64_t tokens) { return 2 * q_bytes(tokens, dims, e_bytes) + kv_bytes(tokens, dims, e_bytes); };
  auto stats = [&](int64_t tokens) { return 2.0 * double(tokens) * double(p.heads) * 4; };
  const double none = tensors(p.seq) + attention_matrix_bytes(1, p.heads, p.seq, p.seq, e_bytes);
  const double flash = tensors(p.seq) + stats(p.seq);
  const double ring =
      tensors(n) + kv_bytes(n, dims, e_bytes) + stats(n) + attention_matrix_bytes(1, p.heads, n, n, e_bytes);
  const double ring_flash = tensors(n) + kv_bytes(n, dims, e_bytes) + stats(n);

  e.numbers = {{"S", p.seq}, {"heads", p.heads}, {"dim", dim}, {"P", p.ranks}};
  e.parameters = {seq_parameter(p.seq),
                  {"n_h", cat(p.heads), "heads of d = 128, batch 1, no GQA"},
                  ranks_parameter(p.ranks, "GPUs for the ring rows"),
                  {"dtype", "bf16", "tensors and scores; row statistics fp32"}};
  e.statement =
      "Count one attention layer's working set per GPU: q, k, v and out of the tokens it holds, plus\n"
      "none:       one GPU, scores materialised (n_h S^2)\n"
      "flash:      one GPU, flash kernel (running max and sum per row, fp32; no scores)\n"
      "ring:       P GPUs, ring, one receive buffer for K/V, row statistics, one step's score block materialised\n"
      "ring_flash: P GPUs, ring with a flash kernel (receive buffer and row statistics, no scores)";
  e.parts = {bytes_part("none", "single GPU, scores materialised", none),
             bytes_part("flash", "single GPU, flash kernel", flash),
             bytes_part("ring", "per GPU, ring, score block materialised", ring),
             bytes_part("ring_flash", "per GPU, ring with a flash kernel", ring_flash)};
  e.solution = lines({
      "q, k, v, out of T tokens: 4 T n_h d e; a K/V receive buffer: 2 (S/P) n_h d e; row statistics: 2 T n_h x 4 B.",
      cat("none       = ", bytes_text(tensors(p.seq)), " + scores ",
          bytes_text(attention_matrix_bytes(1, p.heads, p.seq, p.seq, e_bytes)), " = ", bytes_text(none)),
      cat("flash      = ", bytes_text(tensors(p.seq)), " + stats ", bytes_text(stats(p.seq)), " = ", bytes_text(flash)),
      cat("ring       = ", bytes_text(tensors(n) + kv_bytes(n, dims, e_bytes) + stats(n)), " + block ",
          bytes_text(attention_matrix_bytes(1, p.heads, n, n, e_bytes)), " = ", bytes_text(ring)),
      cat("ring_flash = ", bytes_text(ring_flash),
          ": linear in S/P - the flash kernel removes the quadratic term, the ring"),
      "divides what is left by P.",
  });
  e.command = demo_command("run", p.ranks, 128 * p.ranks, "--heads 2 --dim 128", "per-rank MB in the table");
}

constexpr CatalogEntry kEntry{"memory-table", "Per-GPU attention memory: a table",
                              "context-parallelism notes, section 12.1 (and the source material's memory figures)",
                              "notes §12.1", write};

}  // namespace ringlab::exercises::catalog::memory_table
