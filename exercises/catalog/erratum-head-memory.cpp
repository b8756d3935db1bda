// Exercise erratum-head-memory - erratum 14 of the book: the memory of one head's Q, K, V and
// output at long context (a GPU course's "64 MB" for 128K tokens and d = 128 in bf16), and a layer's.
#include <cstdint>

#include "exercises/catalog/catalog.hpp"
#include "exercises/catalog/support.hpp"
#include "sim/plan/plan.hpp"

namespace ringlab::exercises::catalog::erratum_head_memory {

static void write(VariantDraw& draw, Exercise& e) {
  struct Params {
    int64_t seq = 128 * 1024, dim = 128, heads = 64, element = 2;

    static Params drawn(VariantDraw& d) {
      return {d.pick<int64_t>({32 * 1024, 64 * 1024, 128 * 1024, 256 * 1024}), d.pick<int64_t>({64, 128}),
              d.pick<int64_t>({32, 64, 96}), d.pick<int64_t>({2, 4})};
    }
  };
  const Params p = variant_params<Params>(draw);
  // One GPU holding the whole sequence (P = 1): its K/V block is payload_bytes, and Q and the output
  // have the shape of one of its halves.
  const Plan one_head =
      build_plan(ring_spec(dims_of(1, p.seq, 1, 1, p.dim), 1, LayoutKind::contiguous, false, p.element));
  const double kv = double(payload_bytes(one_head, Payload::kv));
  const double head = 2 * kv;  // Q and O are as large as K and V together
  const double layer = head * double(p.heads);
  const double half = head / 2;

  e.numbers = {{"S", p.seq}, {"dim", p.dim}, {"heads", p.heads}, {"element", p.element}};
  e.parameters = {seq_parameter(p.seq),
                  {"d", cat(p.dim), "head dimension"},
                  {"n_h", cat(p.heads), "heads in a layer"},
                  {"dtype", element_text(p.element), "of Q, K, V and the output"}};
  e.statement = lines({
      "Flash attention keeps no S x S matrix, but a GPU attending the whole sequence still holds, per head,",
      "Q, K, V and the output: four S x d tensors.",
      "head_bytes: how many bytes are they for one head?",
      "layer_bytes: and for all n_h heads of a layer?",
  });
  e.parts = {
      bytes_part("head_bytes", "Q, K, V and output of one head", head)
          .mistake(draw.source() ? 64e6 : half, draw.source() ? "a GPU course's figure" : "a common slip",
                   "that is about half of it (64 MiB is 4 S d bytes: one byte per element); four tensors of S x d "
                   "in bf16 take 4 S d x 2 bytes"),
      bytes_part("layer_bytes", "the same for every head of the layer", layer)
          .mistake(draw.source() ? 4e9 : layer / 2, draw.source() ? "a GPU course's figure" : "a common slip",
                   "that follows from the halved per-head figure; it is twice as much")};
  e.solution = lines({
      cat("head_bytes = 4 S d e = 4 x ", group_thousands(p.seq), " x ", p.dim, " x ", p.element,
          " B = ", bytes_text(head), " (", num(head / 0x1p20), " MiB)."),
      cat("layer_bytes = n_h x head_bytes = ", p.heads, " x ", bytes_text(head), " = ", bytes_text(layer), "."),
      "A GPU course's page puts one head at 128K tokens and d = 128 at \"roughly 64 MB\" and a 64-head layer at",
      "\"over 4 GB\": both are half of the bf16 figures (134 MB and 8.6 GB). Splitting the sequence over P GPUs",
      "divides both by P - the point of ring attention.",
  });
  e.command = demo_command("run --dry-run", 1, p.seq, cat("--heads ", p.heads, " --dim ", p.dim),
                           "the memory table: inputs (q, k, v) and outputs of the heads");
}

constexpr CatalogEntry kEntry{"erratum-head-memory", "Erratum 14: the memory of one head at 128K tokens",
                              "the book's erratum 14 (a GPU course's ring-attention page)", "erratum 14", write};

}  // namespace ringlab::exercises::catalog::erratum_head_memory
