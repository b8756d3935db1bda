// Exercise attention-memory - the materialised attention scores: their bytes on one GPU and per
// ring step; the factor between them is P^2, not P.
#include "exercises/catalog/catalog.hpp"
#include "exercises/catalog/support.hpp"
#include "reference/formulas.hpp"
#include "sim/plan/plan.hpp"

namespace ringlab::exercises::catalog::attention_memory {

static void write(VariantDraw& draw, Exercise& e) {
  struct Params {
    int64_t seq = 256 * 1024, heads = 32, dim = 128, ranks = 8, batch = 1, element = 2;

    static Params drawn(VariantDraw& d) {
      return {d.pick<int64_t>({64 * 1024, 128 * 1024, 256 * 1024, 512 * 1024, 1024 * 1024}),
              d.pick<int64_t>({16, 32, 40, 64}),
              128,
              d.pick<int64_t>({4, 8, 16, 32}),
              d.pick<int64_t>({1, 2}),
              d.pick<int64_t>({2, 2, 4})};
    }
  };
  const Params p = variant_params<Params>(draw);
  const Plan plan = build_plan(
      ring_spec(dims_of(p.batch, p.seq, p.heads, p.heads, p.dim), p.ranks, LayoutKind::contiguous, false, p.element));
  const int64_t n = plan.block_tokens();
  const double full = attention_matrix_bytes(p.batch, p.heads, p.seq, p.seq, p.element);
  const double ring = attention_matrix_bytes(p.batch, p.heads, n, n, p.element);
  // Two K/V blocks: the one being computed on and the one arriving (double buffering).
  const double kv_buffers = 2.0 * double(payload_bytes(plan, Payload::kv));

  e.numbers = {{"S", p.seq},   {"heads", p.heads}, {"dim", p.dim},
               {"P", p.ranks}, {"batch", p.batch}, {"element", p.element}};
  e.parameters = {{"H", cat(p.heads * p.dim), "hidden size (n_h heads of d = " + std::to_string(p.dim) + ")"},
                  {"n_h", cat(p.heads), "attention heads"},
                  seq_parameter(p.seq),
                  {"b", cat(p.batch), "batch"},
                  ranks_parameter(p.ranks, "GPUs in the ring"),
                  {"dtype", element_text(p.element), "of the stored scores"}};
  e.statement = lines({
      "Plain attention materialises one S x S matrix of scores softmax(Q K^T / sqrt(d)) per (batch, head).",
      "full: how many bytes do the scores of one layer take when a single GPU materialises all of them?",
      cat("ring: with Ring Attention over P = ", p.ranks,
          " GPUs, a GPU holds S/P queries and, at each step, one block of"),
      "      S/P keys. How many bytes does the score block it materialises at one step take?",
      "reduction: by what factor is the per-GPU score memory smaller than the full matrix?",
      "kv_buffers: the ring also holds K/V blocks - the one it computes on and the next one arriving (double",
      "      buffering). How many bytes do they take?",
  });
  e.parts = {
      bytes_part("full", "bytes of the full S x S score matrices, all heads", full),
      bytes_part("ring", cat("bytes of one GPU's score block at one ring step (P = ", p.ranks, ")"), ring)
          .mistake(full / double(p.ranks), "a common slip",
                   "dividing by P counts S/P queries against all S keys; a ring step holds one block of S/P keys, "
                   "so both sides shrink and the scores shrink by P^2"),
      ratio_part("reduction", "full / ring", full / ring)
          .mistake(double(p.ranks), "a common slip", "the factor is P^2, not P: queries and keys are both cut by P"),
      bytes_part("kv_buffers", "bytes of the two K/V blocks a GPU holds (double buffering)", kv_buffers)
          .mistake(draw.source() ? 2e9 : 2 * kv_buffers, draw.source() ? "the source's answer" : "a common slip",
                   cat("K and V for two blocks are 4 (S/P) H e = 4 x ", group_thousands(n), " x ", p.heads * p.dim,
                       " x ", p.element, " B = ", bytes_text(kv_buffers),
                       draw.source() ? "; the source's note writes that product and calls it 2 GB"
                                     : "; twice that counts each buffer twice"))};
  e.solution = lines({
      cat("full = b n_h S^2 e = ", p.batch, " x ", p.heads, " x ", group_thousands(p.seq), "^2 x ", p.element,
          " B = ", bytes_text(full), " (", num(full / 0x1p40), " TiB)."),
      cat("ring: the ring plan gives each GPU a block of S/P = ", group_thousands(n),
          " tokens, and at each step it scores"),
      cat("      those queries against one block of as many keys: b n_h (S/P)^2 e = ", bytes_text(ring), " (",
          num(ring / 0x1p30), " GiB)."),
      cat("reduction = S^2 / (S/P)^2 = P^2 = ", num(full / ring),
          "x. Every score is still computed, just never all at once;"),
      "a flash kernel inside each step removes even the block (exercise flash-ring-memory).",
      cat("kv_buffers = 2 blocks x (K and V) x b (S/P) H e = 4 x ", group_thousands(n), " x ", p.heads * p.dim, " x ",
          p.element, " B = ", bytes_text(kv_buffers), " - next to the score block, small."),
  });
  e.command = demo_command("plan", p.ranks, p.seq, cat("--heads ", p.heads, " --dim ", p.dim),
                           "every cell scores one S/P block of queries against one S/P block of keys");
}

constexpr CatalogEntry kEntry{"attention-memory", "Memory of the materialised attention scores",
                              "the source material, exercise 1", "source ex. 1", write};

}  // namespace ringlab::exercises::catalog::attention_memory
