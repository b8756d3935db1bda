// Exercise zigzag-positions - token-level zig-zag: one GPU's positions, their sum and causal pairs,
// and its chunks in the 2P-chunk zig-zag, from the layouts.
#include <numeric>
#include <vector>

#include "exercises/catalog/catalog.hpp"
#include "exercises/catalog/support.hpp"

namespace ringlab::exercises::catalog::zigzag_positions {

static void write(VariantDraw& draw, Exercise& e) {
  struct Params {
    int64_t seq = 16, ranks = 4, rank = 0;

    static Params drawn(VariantDraw& d) {
      const int64_t ranks = d.pick<int64_t>({2, 3, 4, 5, 6, 8});
      return {2 * ranks * d.pick<int64_t>({2, 3, 4}), ranks, d.integer(0, ranks - 1)};
    }
  };
  const Params p = variant_params<Params>(draw);
  const Layout folded(LayoutKind::zigzag, p.seq, p.ranks, 1);
  const Layout chunked(LayoutKind::zigzag, p.seq, p.ranks);
  const std::vector<int64_t> positions = folded.positions(p.rank);
  const int64_t sum = std::accumulate(positions.begin(), positions.end(), int64_t{0});
  int64_t pairs = 0;
  for (int64_t k = 0; k < p.ranks; ++k) pairs += folded.causal_pairs(p.rank, k);
  const std::vector<int64_t> chunks = chunked.units_of(p.rank);
  std::vector<int64_t> one_based = positions;
  for (int64_t& x : one_based) ++x;

  e.numbers = {{"S", p.seq}, {"P", p.ranks}, {"rank", p.rank}};
  e.parameters = {{"S", cat(p.seq), "tokens, positions 0..S-1"},
                  ranks_parameter(p.ranks),
                  {"r", cat(p.rank), "the GPU asked about"}};
  e.statement =
      "Token-level zig-zag: deal the positions in rounds of P; even rounds go to GPUs 0..P-1, odd rounds to\n"
      "P-1..0 (a fold).\n"
      "positions: the positions GPU r holds, ascending.   sum: their sum (the notes' 'causal FLOPs').\n"
      "pairs: the causal (query, key) pairs of GPU r's queries (a query at position i sees i + 1 keys).\n"
      "chunks: with the 2P-chunk zig-zag instead (S cut into 2P chunks of S/(2P)), which chunks does GPU r hold?";
  e.parts = {list_part("positions", "GPU r's positions, ascending", positions)
                 .mistake(one_based, "the notes' numbering (section 6.1)",
                          "the notes count positions from 1 there; this exercise (and ringlab) counts from 0"),
             count_part("sum", "sum of GPU r's positions", sum),
             count_part("pairs", "causal pairs of GPU r's queries", pairs),
             list_part("chunks", "GPU r's chunks in the 2P-chunk zig-zag", chunks)};
  e.solution = lines({
      cat("Rounds of P = ", p.ranks, ": GPU r takes position k P + r in even rounds k and k P + (P-1-r) in odd ones."),
      cat("positions = ", format_list(positions), "; sum = ", sum,
          " - every GPU gets the same sum, S(S-1)/(2P) = ", p.seq * (p.seq - 1) / (2 * p.ranks), ","),
      "because each pair of rounds gives every GPU the same two-position total.",
      cat("pairs = sum + S/P = ", pairs, " (each query also sees itself), again the same on every GPU."),
      cat("chunks = ", format_list(chunks), ": GPU r holds chunk r and its mirror 2P-1-r."),
  });
  e.command = demo_command("plan", p.ranks, p.seq, "--causal --layout zigzag --block 1");
}

constexpr CatalogEntry kEntry{"zigzag-positions", "Zig-zag positions and their balanced sums",
                              "context-parallelism notes, sections 6.1 and 2.3", "notes §6.1, §2.3", write};

}  // namespace ringlab::exercises::catalog::zigzag_positions
