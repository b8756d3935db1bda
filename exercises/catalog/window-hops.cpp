// Exercise window-hops - how far a sliding window's ring must go: the hops K/V make under the
// contiguous layout, and the share of the full causal ring's K/V traffic that remains.
#include "exercises/catalog/catalog.hpp"
#include "exercises/catalog/support.hpp"
#include "sim/plan/queries.hpp"

namespace ringlab::exercises::catalog::window_hops {

namespace {

struct Window {
  int64_t ranks = 8, tokens_per_rank = 1024, window = 2049;
  static Window drawn(VariantDraw& d) {
    Window w;
    w.ranks = d.pick<int64_t>({4, 8, 16});
    w.tokens_per_rank = d.pick<int64_t>({512, 1024, 2048});
    // Just past a multiple of n sometimes, where counting the query's own key as a hop back goes wrong.
    w.window = w.tokens_per_rank * d.integer(1, 3) + d.pick<int64_t>({0, 1, -w.tokens_per_rank / 2});
    return w;
  }
};

int64_t kv_bytes(const Plan& plan) {
  int64_t total = 0;
  for (int64_t r = 0; r < plan.ranks(); ++r) total += rank_work(plan, r, expand(plan, r)).kv_bytes_received;
  return total;
}

}  // namespace

static void write(VariantDraw& draw, Exercise& e) {
  const Window w = variant_params<Window>(draw, Window{}, &Window::drawn);
  const int64_t seq = w.ranks * w.tokens_per_rank;
  PlanSpec spec = ring_spec(dims_of(1, seq, 8, 8, 128), w.ranks, LayoutKind::contiguous, true);
  const Plan full = build_plan(spec);
  spec.window = w.window;
  const Plan bounded = build_plan(spec);
  const int64_t hops = ring_hops(bounded.spec());
  const double share = double(kv_bytes(bounded)) / double(kv_bytes(full));
  const int64_t n = w.tokens_per_rank;

  e.numbers = {{"P", w.ranks}, {"n", n}, {"W", w.window}};
  e.parameters = {ranks_parameter(w.ranks),
                  {"n", cat(n, " tokens"), "tokens per rank, contiguous layout"},
                  {"W", cat(w.window, " keys"), "sliding window: a query sees itself and the W-1 keys before it"}};
  e.statement =
      "Causal attention with a sliding window of W keys (the query's own included), contiguous layout, a ring of P\n"
      "ranks that passes K/V blocks one hop per step and forwards a block only to ranks that still need it.\n"
      "hops: how many hops do K/V blocks make?   share: what fraction of the full causal ring's K/V traffic\n"
      "(P-1 hops) does the window's ring move?";
  e.parts = {count_part("hops", "hops K/V make", hops)
                 .mistake(double(std::min(w.ranks - 1, (w.window + n - 1) / n)), "ceil(W / n)",
                          "the window's W keys include the query's own: it reaches W-1 tokens back, so the ring "
                          "needs ceil((W-1)/n) hops")
                 .mistake(double(w.ranks - 1), "the full ring",
                          "blocks further back than the window are masked for every rank: nobody needs them"),
             fraction_part("share", "K/V traffic of the window's ring / the full causal ring's", share, 0.0005)
                 .mistake(double(hops) / double(w.ranks - 1), "every block makes every hop",
                          "block b is needed by ranks b+1 .. b+hops only up to rank P-1: a block passed on from "
                          "rank P-1 to rank 0 reaches queries that all come before its keys")};
  e.solution = lines({
      cat("The query at the start of rank g's block reaches W-1 = ", w.window - 1,
          " tokens back: ceil((W-1)/n) = ", hops, " blocks (at most P-1)."),
      cat("Block b travels to ranks b+1 .. min(b+", hops,
          ", P-1): the last blocks stop at rank P-1, whose successor (rank 0) holds only earlier queries."),
      cat("Sum over b of min(", hops, ", P-1-b) messages, of the full ring's P(P-1) = ", w.ranks * (w.ranks - 1),
          " -> ", percent_text(share), " of its K/V traffic."),
  });
  e.command = demo_command("plan", w.ranks, seq, cat("--causal --window ", w.window), "the ring's step count");
}

constexpr CatalogEntry kEntry{"window-hops", "How far does a sliding window's ring go?",
                              "ringlab's chapter on documents and windows", "ringlab", write};

}  // namespace ringlab::exercises::catalog::window_hops
