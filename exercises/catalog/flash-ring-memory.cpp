// Exercise flash-ring-memory - per-GPU memory of a ring whose step kernel is a flash kernel,
// against materialising a step's score block.
#include "exercises/catalog/catalog.hpp"
#include "exercises/catalog/support.hpp"
#include "reference/formulas.hpp"

namespace ringlab::exercises::catalog::flash_ring_memory {

static void write(VariantDraw& draw, Exercise& e) {
  struct Params {
    int64_t seq = 1024 * 1024, ranks = 8, dim = 128, tile = 256;

    static Params drawn(VariantDraw& d) {
      return {d.pick<int64_t>({256 * 1024, 512 * 1024, 1024 * 1024, 2048 * 1024}), d.pick<int64_t>({4, 8, 16}),
              d.pick<int64_t>({64, 128}), d.pick<int64_t>({128, 256})};
    }
  };
  const Params p = variant_params<Params>(draw);
  const int64_t e_bytes = 2;
  const AttentionDims dims = dims_of(1, p.seq, 1, 1, p.dim);
  const int64_t n = build_plan(ring_spec(dims, p.ranks)).block_tokens();
  const double qkv = q_bytes(n, dims, e_bytes) + kv_bytes(n, dims, e_bytes);
  const double receive = kv_bytes(n, dims, e_bytes);
  const double output = q_bytes(n, dims, e_bytes);
  const double stats = 2.0 * double(n) * 4;                                   // running max and sum per query row, fp32
  const double workspace = double(3 * p.tile * p.dim + p.tile * p.tile) * 4;  // q, k, v tiles and a score tile, fp32
  const double total = qkv + receive + output + stats + workspace;
  const double score_block = attention_matrix_bytes(1, 1, n, n, e_bytes);
  const double without_flash = qkv + receive + output + stats + score_block;

  e.numbers = {{"S", p.seq}, {"P", p.ranks}, {"dim", p.dim}, {"tile", p.tile}, {"element", e_bytes}};
  e.parameters = {seq_parameter(p.seq),
                  ranks_parameter(p.ranks),
                  {"d", cat(p.dim), "head dimension; one head, batch 1"},
                  {"tile", cat(p.tile), "flash tile: tile queries x tile keys"},
                  {"dtype", element_text(e_bytes), "q, k, v, out; the flash workspace and row statistics are fp32"}};
  e.statement =
      "Ring Attention whose per-step kernel is a flash kernel. Count per GPU: its q, k, v (S/P tokens), one more\n"
      "K/V block as the receive buffer, the output, the running max and sum of every query row (fp32), and one\n"
      "flash workspace: a q tile, a k and a v tile (tile x d each) and a tile x tile score tile (fp32).\n"
      "total: that memory per GPU.\n"
      "score_block: the (S/P) x (S/P) score block a ring step would materialise without the flash kernel.\n"
      "reduction: per-GPU memory without the flash kernel (the same buffers plus the score block) / total.";
  e.parts = {
      bytes_part("total", "per-GPU memory with the flash kernel", total, 0.02),
      bytes_part("score_block", "bytes of one step's (S/P) x (S/P) score block", score_block),
      ratio_part("reduction", "per-GPU memory without / with the flash kernel", without_flash / total, 0.02)
          .mistake(double(n) / double(p.dim), "the source material's answer (exercise 7)",
                   "(S/P)/d is the size of the score block over one (S/P) x d tensor; the GPU holds q, k, v, the "
                   "receive buffer and the output either way, so the memory shrinks by (buffers + scores) / "
                   "(buffers + workspace)")};
  e.solution = lines({
      cat("S/P = ", group_thousands(n), " tokens. q, k, v: 3 (S/P) d e = ", bytes_text(qkv),
          "; receive buffer (K and V): ", bytes_text(receive), "; output: ", bytes_text(output), ";"),
      cat("row statistics: 2 (S/P) x 4 B = ", bytes_text(stats),
          "; workspace: (3 tile d + tile^2) x 4 B = ", bytes_text(workspace), "."),
      cat("total = ", bytes_text(total), " (the source's ~200 MB)."),
      cat("score_block = (S/P)^2 e = ", bytes_text(score_block), " (", num(score_block / 0x1p30),
          " GiB: the source's '32 GB')."),
      cat("reduction = (", bytes_text(qkv + receive + output + stats), " + ", bytes_text(score_block), ") / ",
          bytes_text(total), " = ", ratio_text(without_flash / total),
          ". The source's 1024x is (S/P)/d, the score block over a single"),
      "(S/P) x d tensor - not the ratio of what the GPU holds.",
  });
  e.command = demo_command("run", p.ranks, 128 * p.ranks, cat("--heads 1 --dim ", p.dim),
                           "the sim's ring runs the blockwise (flash) kernel at every step");
}

constexpr CatalogEntry kEntry{"flash-ring-memory", "Flash attention inside the ring: memory per GPU",
                              "the source material, exercise 7", "source ex. 7", write};

}  // namespace ringlab::exercises::catalog::flash_ring_memory
