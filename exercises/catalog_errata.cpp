// One exercise per known mistake of the source material (DESIGN.md, "Known mistakes"): each asks
// for numbers that only come out right when the mistake is understood, computed from ringlab's
// erratum plans, the plan checker, the exact oracle and the timing model.
// Sections: [1 dkv direction] [2 causal mask] [3 softmax scale] [4 skip speedup]
//           [5 initial transfer] [registration]
#include <cmath>

#include "exercises/catalog_support.hpp"
#include "exercises/step_timing.hpp"
#include "reference/exact_attention.hpp"
#include "reference/formulas.hpp"
#include "sim/plan/check.hpp"

namespace ringlab::exercises {

using namespace support;

namespace {

// ---- [1 dkv direction] -------------------------------------------------------------------------

// The block whose dK/dV accumulator rank `rank` adds its step-`step` contribution into: the one its
// backward phase receives before that step, i.e. the block the sending peer held at step - 1.
int64_t accumulator_block(const Plan& plan, int64_t rank, int64_t step) {
  for (const Phase& phase : plan.phases()) {
    if (phase.pass != Pass::backward) continue;
    for (const TemplateEntry& entry : phase.body)
      if (const auto* x = std::get_if<ExchangeT>(&entry.op))
        if (x->payload == Payload::dkv) {
          const int64_t peer = plan.ring_peer(rank, x->recv_from, step - 1);
          return plan.ring_position_at(peer, Shift{0, -1}, step - 1);
        }
  }
  return -1;
}

PlanSpec backward_spec(int64_t ranks, Erratum erratum) {
  PlanSpec spec = ring_spec(dims_of(1, 16 * ranks, 2, 2, 8), ranks, LayoutKind::contiguous, true);
  spec.backward = true;
  spec.erratum = erratum;
  return spec;
}

Exercise erratum_dkv_direction(int64_t variant) {
  struct Params {
    int64_t ranks, rank, step;
    bool operator==(const Params&) const = default;
  };
  VariantDraw draw("erratum-dkv-direction", variant);
  const Params p = variant_params(draw, Params{4, 2, 1}, [](VariantDraw& d) {
    const int64_t ranks = d.pick<int64_t>({3, 4, 5, 6, 8});
    return Params{ranks, d.integer(0, ranks - 1), d.integer(1, ranks - 1)};
  });
  const Plan wrong = build_plan(backward_spec(p.ranks, Erratum::reverse_dkv));
  const Plan right = build_plan(backward_spec(p.ranks, Erratum::none));
  const int64_t held = right.ring_position_at(p.rank, Shift{0, -1}, p.step);
  const int64_t into = accumulator_block(wrong, p.rank, p.step);
  const int64_t into_right = accumulator_block(right, p.rank, p.step);
  int64_t smallest = 0;  // the smallest P at which the plan checker finds the reverse direction wrong
  for (int64_t ranks = 2; ranks <= 16 && smallest == 0; ++ranks)
    if (!check_plan(build_plan(backward_spec(ranks, Erratum::reverse_dkv))).ok()) smallest = ranks;

  Exercise e;
  e.id = "erratum-dkv-direction";
  e.numbers = {{"P", double(p.ranks)}, {"rank", double(p.rank)}, {"step", double(p.step)}};
  e.title = "Erratum 1: dK/dV sent against the K/V direction";
  e.source = "DESIGN.md erratum 1 (the backward pass of notes 001, section 8)";
  e.variant = variant;
  e.parameters = {{"P", cat(p.ranks), "GPUs in the ring"}, {"g", cat(p.rank), "the GPU asked about"},
                  {"t", cat(p.step), "the backward step asked about"}};
  e.statement =
      "In the ring backward K/V rotate forward (GPU g receives from g-1), so at step t GPU g holds block g-t\n"
      "(mod P). The notes send the dK/dV accumulators the other way: GPU g sends its accumulator to g-1 and\n"
      "receives one from g+1, adding its step-t contribution to the accumulator it received.\n"
      "accumulator: with the notes' direction, into which block's accumulator does GPU g add block (g-t)'s\n"
      "             gradient at step t?\n"
      "correct: the same with the accumulators travelling with their K/V block.\n"
      "smallest_p: the smallest P at which the notes' direction gives wrong gradients.";
  Part accumulator = number_part("accumulator", "block whose accumulator receives the gradient (notes' direction)",
                                 double(into), 0, 0);
  mistake(accumulator, double(held), "a common slip",
          "that is the block GPU g holds; but the accumulator it received came from g+1, which held block "
          "(g+1)-(t-1) = g-t+2 one step earlier");
  Part smallest_part = number_part("smallest_p", "smallest P where the reverse direction is wrong", double(smallest), 0, 0);
  mistake(smallest_part, 2, "a common slip", "at P = 2, g+1 and g-1 are the same GPU, so both directions agree");
  e.parts = {accumulator, number_part("correct", "the same with dK/dV travelling with K/V", double(into_right), 0, 0),
             smallest_part};
  e.lab = "04-ring-backward";
  e.solution = cat(
      "GPU g = ", p.rank, " holds block g-t = ", held, " at step t = ", p.step, ".\n"
      "Notes' direction: the accumulator it adds to came from g+1, which at step t-1 held block (g+1)-(t-1) = g-t+2\n"
      "  -> block ", into, " (mod ", p.ranks, "): the gradient of block ", held, " lands in block ", into, "'s accumulator.\n"
      "Travelling with K/V: it comes from g-1, which held (g-1)-(t-1) = g-t -> block ", into_right,
      ", the right one; after P - 1 steps\n  one extra hop brings each accumulator home.\n"
      "g-t+2 = g-t (mod P) only when P divides 2: the bug is invisible at P = 2 and shows from P = ", smallest,
      " (ringlab's plan checker flags the erratum plan from there). Test ring backward code at P >= 3.");
  e.command = "ringlab run --ranks 3 --seq 96 --causal --backward --erratum reverse-dkv    # exit 1: dk, dv wrong; "
              "--ranks 2 passes";
  return e;
}

// ---- [2 causal mask] ---------------------------------------------------------------------------

Exercise erratum_causal_mask(int64_t variant) {
  struct Params {
    int64_t ranks, tokens_per_rank, position;
    bool operator==(const Params&) const = default;
  };
  VariantDraw draw("erratum-causal-mask", variant);
  const Params p = variant_params(draw, Params{4, 16, 37}, [](VariantDraw& d) {
    const int64_t ranks = d.pick<int64_t>({3, 4, 6, 8});
    const int64_t n = d.pick<int64_t>({8, 16, 32});
    return Params{ranks, n, d.integer(n, ranks * n - 1)};
  });
  const int64_t seq = p.ranks * p.tokens_per_rank;
  PlanSpec spec = ring_spec(dims_of(1, seq, 1, 1, 8), p.ranks, LayoutKind::contiguous, true);
  const Plan right = build_plan(spec);
  spec.erratum = Erratum::kv_offset_mask;
  const Plan wrong = build_plan(spec);
  const int64_t rank = right.layout().rank_of(p.position), local = right.layout().local_row(p.position);
  const std::vector<int64_t> all = iota_positions(seq);
  const int64_t one_local[] = {local};
  const int64_t one_global[] = {p.position};
  const int64_t seen_wrong = causal_pairs_of_positions(one_local, all);
  const int64_t seen_right = causal_pairs_of_positions(one_global, all);
  int64_t wrong_ranks = 0, wrong_pairs = 0;
  for (int64_t r = 0; r < p.ranks; ++r) {
    int64_t a = 0, b = 0;
    for (int64_t kv = 0; kv < p.ranks; ++kv) {
      a += resolve_compute(wrong, r, kv, Pass::forward).pairs;
      b += resolve_compute(right, r, kv, Pass::forward).pairs;
    }
    wrong_ranks += a != b ? 1 : 0;
    wrong_pairs += a;
  }
  const double missing = 1 - double(wrong_pairs) / double(full_pairs(seq, true));

  Exercise e;
  e.id = "erratum-causal-mask";
  e.numbers = {{"P", double(p.ranks)}, {"n", double(p.tokens_per_rank)}, {"position", double(p.position)}};
  e.title = "Erratum 2: a causal mask from block offsets";
  e.source = "DESIGN.md erratum 2 (the ring code of source material 000)";
  e.variant = variant;
  e.parameters = {{"P", cat(p.ranks), "GPUs, contiguous layout"},
                  {"S", cat(seq), cat("tokens, n = ", p.tokens_per_rank, " per GPU")},
                  {"i", cat(p.position), "the query position asked about (global, from 0)"}};
  e.statement =
      "The source's ring code builds its causal mask from the K/V block's offset and each query's index within\n"
      "its own GPU's block - as if every GPU's queries started at position 0 - instead of comparing global\n"
      "query and key positions.\n"
      "keys_seen: how many keys does the query at global position i see with that mask?\n"
      "correct_keys: how many should it see?\n"
      "wrong_ranks: on how many GPUs is the output wrong?\n"
      "missing_fraction: what fraction of all the (query, key) pairs the causal mask allows does the mistake drop?";
  Part wrong_ranks_part = number_part("wrong_ranks", "GPUs whose outputs are wrong", double(wrong_ranks), 0, 0);
  mistake(wrong_ranks_part, double(p.ranks), "a common slip",
          "GPU 0's queries start at position 0, so for it the local index is the global position: it is right");
  e.parts = {number_part("keys_seen", "keys the query at position i sees under the mistaken mask", double(seen_wrong), 0, 0),
             number_part("correct_keys", "keys it should see", double(seen_right), 0, 0), wrong_ranks_part,
             fraction_part("missing_fraction", "share of the allowed pairs dropped", missing, 0.002)};
  e.lab = "03-ring-forward";
  e.solution = cat(
      "Position ", p.position, " is row ", local, " of GPU ", rank, ". The mistaken mask lets a key at position j through when\n"
      "j <= ", local, " (the local index): only the first ", seen_wrong, " keys of block 0. It should see keys 0..", p.position,
      ": ", seen_right, ".\n"
      "GPU 0 is right (local index = position); the other ", wrong_ranks, " GPUs see only a triangle of block 0.\n"
      "Altogether the mistaken mask keeps P n(n+1)/2 = ", group_thousands(wrong_pairs), " of S(S+1)/2 = ",
      group_thousands(full_pairs(seq, true)), " pairs: ", percent_text(missing), " are dropped.\n"
      "Fix: carry each block's global positions (or compute them from its origin GPU) and mask k_pos <= q_pos.");
  e.command = cat("ringlab run --ranks ", p.ranks, " --seq ", seq, " --causal --erratum kv-offset-mask    # exit 1, every "
                  "rank but 0 wrong");
  return e;
}

// ---- [3 softmax scale] -------------------------------------------------------------------------

// Weight of key 1 in softmax over two keys with raw dot products s1, s2, through the exact oracle:
// q = e_0, k_i = s_i e_0, v_1 = e_0, v_2 = 0, so out[0] is key 1's weight. `q_factor` scales q
// (sqrt(D) undoes the oracle's 1/sqrt(D): the scale-less softmax).
double first_key_weight(int64_t dim, double s1, double s2, double q_factor) {
  Tensor<double> q({1, 1, 1, dim}), k({1, 2, 1, dim}), v({1, 2, 1, dim});
  q(0, 0, 0, 0) = q_factor;
  k(0, 0, 0, 0) = s1;
  k(0, 1, 0, 0) = s2;
  v(0, 0, 0, 0) = 1;
  return exact_attention(q, k, v, MaskKind::none).out(0, 0, 0, 0);
}

Exercise erratum_softmax_scale(int64_t variant) {
  struct Params {
    int64_t dim, s1, s2;
    bool operator==(const Params&) const = default;
  };
  VariantDraw draw("erratum-softmax-scale", variant);
  const Params p = variant_params(draw, Params{16, 8, 4}, [](VariantDraw& d) {
    const int64_t dim = d.pick<int64_t>({16, 64, 128});
    const int64_t s2 = d.integer(-4, 6);
    return Params{dim, s2 + d.integer(2, 12), s2};
  });
  const double scale = dims_of(1, 1, 1, 1, p.dim).scale();
  const double weight = first_key_weight(p.dim, double(p.s1), double(p.s2), 1);
  const double unscaled = first_key_weight(p.dim, double(p.s1), double(p.s2), std::sqrt(double(p.dim)));

  Exercise e;
  e.id = "erratum-softmax-scale";
  e.numbers = {{"dim", double(p.dim)}, {"s1", double(p.s1)}, {"s2", double(p.s2)}};
  e.title = "Erratum 3: the flash solution without 1/sqrt(d)";
  e.source = "DESIGN.md erratum 3 (the flash-attention solution of source material 000, exercise 7)";
  e.variant = variant;
  e.parameters = {{"d", cat(p.dim), "head dimension"},
                  {"q.k1, q.k2", cat(p.s1, ", ", p.s2), "raw dot products of one query with two keys"}};
  e.statement =
      "Attention weights are softmax(q.k / sqrt(d)). The source's flash-attention solution computes\n"
      "scores = q @ k^T and never applies the scale.\n"
      "scale: the factor the scores must be multiplied by.\n"
      "weight: the correct attention weight on key 1.\n"
      "weight_unscaled: the weight on key 1 that the source's kernel computes.";
  Part weight_part = number_part("weight", "correct softmax weight on key 1", weight, 0, 0.002);
  mistake(weight_part, unscaled, "the source material's flash solution (000, exercise 7)",
          "without 1/sqrt(d) the scores are sqrt(d) times too large, so the softmax is far too sharp");
  e.parts = {number_part("scale", "1 / sqrt(d)", scale, 0.001), weight_part,
             number_part("weight_unscaled", "weight on key 1 without the scale", unscaled, 0, 0.002)};
  e.lab = "01-softmax-merge";
  e.solution = cat(
      "scale = 1/sqrt(", p.dim, ") = ", num(scale), ".\n"
      "weight = 1 / (1 + exp(-(", p.s1, " - ", p.s2, ") x ", num(scale), ")) = ", num(weight), " (ringlab's exact oracle gives the same).\n"
      "Without the scale: 1 / (1 + exp(-(", p.s1, " - ", p.s2, "))) = ", num(unscaled), ": the logits are sqrt(d) = ",
      num(std::sqrt(double(p.dim))), " times too large,\n"
      "which works like a temperature of 1/sqrt(d): the output is wrong on every row, not just at the edges.");
  e.command = "ringlab grade 01-softmax-merge broken/missing_scale    # the lab's scale criterion catches it";
  return e;
}

// ---- [4 skip speedup] --------------------------------------------------------------------------

Exercise erratum_skip_speedup(int64_t variant) {
  struct Params {
    int64_t ranks, tokens_per_rank;
    bool operator==(const Params&) const = default;
  };
  VariantDraw draw("erratum-skip-speedup", variant);
  const Params p = variant_params(draw, Params{8, 8192}, [](VariantDraw& d) {
    return Params{d.pick<int64_t>({4, 6, 8, 12, 16}), d.pick<int64_t>({2048, 8192})};
  });
  const int64_t seq = p.ranks * p.tokens_per_rank;
  const AttentionDims dims = dims_of(1, seq, 1, 1, 128);
  const CausalWork contiguous = causal_work(dims, p.ranks, LayoutKind::contiguous);
  const CausalWork zigzag = causal_work(dims, p.ranks, LayoutKind::zigzag);
  const CausalWork striped = causal_work(dims, p.ranks, LayoutKind::striped);
  const double slowest_work = double(contiguous.max_pairs()) / double(contiguous.max_pairs_no_skip());
  const double P = double(p.ranks);

  Exercise e;
  e.id = "erratum-skip-speedup";
  e.numbers = {{"P", P}, {"n", double(p.tokens_per_rank)}};
  e.title = "Erratum 4: work saved is not time saved";
  e.source = "DESIGN.md erratum 4 (source material 000, exercise 4)";
  e.variant = variant;
  e.parameters = {{"P", cat(p.ranks), "GPUs"}, {"S", tokens_text(seq) + " tokens", "causal, fully masked blocks skipped"}};
  e.statement =
      "The source calls P / (P - (P-1)/2) (1.78x for P = 8) the speedup of skipping fully masked blocks.\n"
      "slowest_rank: with the contiguous layout, which GPU finishes last?\n"
      "slowest_work: what fraction of its no-skip work does that GPU still do?\n"
      "zigzag / striped: the wall-clock speedup of skipping with the zig-zag and the striped layouts.";
  e.model = "as in exercise causal-skip: a step costs the pairs its kernel computes (diagonal ~ half), transfers\n"
            "are hidden, the wall clock is the slowest GPU's sum";
  Part slowest = fraction_part("slowest_work", "the slowest GPU's work with skipping / without", slowest_work, 0.002);
  mistake(slowest, (P + 1) / (2 * P), "the source material's reasoning (000, exercise 4)",
          "4.5 of 8 steps is the average GPU; the slowest GPU (the latest tokens) skips nothing");
  e.parts = {number_part("slowest_rank", "the GPU that finishes last (contiguous)", double(contiguous.slowest_rank), 0, 0),
             slowest, ratio_part("zigzag", "wall-clock speedup of skipping, zig-zag", zigzag.speedup(), 0.01),
             ratio_part("striped", "wall-clock speedup of skipping, striped", striped.speedup(), 0.01)};
  e.solution = cat(
      "Contiguous: GPU P-1 = ", contiguous.slowest_rank, " holds the latest tokens and needs every block: (P-1) full blocks\n"
      "and its diagonal, ", percent_text(slowest_work), " of its no-skip work. The wall clock follows it: speedup ",
      ratio_text(contiguous.speedup()), ", not 1.78x.\n"
      "zig-zag: every GPU pairs an early chunk with a late one and does half its no-skip work: ", ratio_text(zigzag.speedup()), ".\n"
      "striped: every GPU's tokens are spread evenly: ", ratio_text(striped.speedup()), ".\n"
      "Skipping removes about half of the pairs; only a balanced layout turns that into time.");
  e.command = cat("ringlab run --ranks ", p.ranks, " --seq ", 128 * p.ranks,
                  " --causal --layout zigzag    # compare the load-imbalance line with --layout contiguous");
  return e;
}

// ---- [5 initial transfer] ----------------------------------------------------------------------

Exercise erratum_initial_transfer(int64_t variant) {
  struct Params {
    int64_t ranks, compute_ms, transfer_ms;
    bool operator==(const Params&) const = default;
  };
  VariantDraw draw("erratum-initial-transfer", variant);
  const Params p = variant_params(draw, Params{8, 2, 3}, [](VariantDraw& d) {
    const int64_t c = d.pick<int64_t>({1, 2, 4});
    return Params{d.pick<int64_t>({4, 8, 16}), c, c + d.integer(1, 3)};
  });
  const Plan plan = build_plan(ring_spec(dims_of(1, 16 * p.ranks, 1, 1, 8), p.ranks));
  const int64_t transfers = exchange_sends(plan, 0, Payload::kv, Pass::forward);
  const double c = double(p.compute_ms) * 1e-3, t = double(p.transfer_ms) * 1e-3;
  const RingTimes times = ring_times(p.ranks, c, t);
  const double P = double(p.ranks);

  Exercise e;
  e.id = "erratum-initial-transfer";
  e.numbers = {{"P", P}, {"compute", c}, {"transfer", t}};
  e.title = "Erratum 5: there is no initial transfer";
  e.source = "DESIGN.md erratum 5 (source material 000, exercise 3)";
  e.variant = variant;
  e.parameters = {{"P", cat(p.ranks), "GPUs"}, {"c", cat(p.compute_ms, " ms"), "compute per ring step"},
                  {"t", cat(p.transfer_ms, " ms"), "K/V transfer per ring step (slower than compute here)"}};
  e.statement =
      "The source adds an unoverlappable 'initial transfer' to the ring and, when transfers are slower than\n"
      "compute, says P (t - c) of communication is exposed.\n"
      "transfers: how many K/V transfers does one GPU wait for in the forward?\n"
      "exposed: how much communication time is exposed (not hidden by compute)?\n"
      "total: the forward's time with overlap.";
  e.model = "ring timing as in exercise overlap-time: total = c + (P-1) max(c, t)";
  Part transfers_part = number_part("transfers", "K/V transfers per GPU in the forward", double(transfers), 0, 0);
  mistake(transfers_part, P, "the source material's model (000, exercise 3)",
          "step 0 computes on the GPU's own K/V: there is no transfer before it");
  Part exposed = seconds_part("exposed", "exposed communication time", times.exposed);
  mistake(exposed, P * (t - c), "the source material's formula (000, exercise 3)", "there are P - 1 transfers, not P");
  Part total = seconds_part("total", "forward time with overlap", times.with_overlap);
  mistake(total, P * t, "the source material's formula (000, exercise 3)", "P c + P (t - c) counts one transfer too many");
  mistake(total, t + P * c + P * (t - c), "the source material's model (000, exercise 3)",
          "an initial transfer plus P exposed gaps: two transfers too many");
  e.parts = {transfers_part, exposed, total};
  e.solution = cat(
      "The ring plan posts ", transfers, " K/V exchanges per GPU: at steps 0..P-2, each bringing the next step's block.\n"
      "Step 0 needs nothing from outside. Each later step waits max(c, t) after the previous one started:\n"
      "total = c + (P-1) max(c, t) = ", seconds_text(times.with_overlap), "; compute alone is P c = ", seconds_text(P * c),
      ", so exposed = (P-1)(t - c) = ", seconds_text(times.exposed), ".");
  e.command = cat("ringlab plan --ranks ", p.ranks, " --seq ", 16 * p.ranks, "    # kv> cells at steps 0..P-2 only");
  return e;
}

}  // namespace

// ---- [registration] ----------------------------------------------------------------------------

void add_errata_exercises(std::vector<CatalogEntry>& catalog) {
  catalog.push_back({"erratum-dkv-direction", "Erratum 1: dK/dV sent against the K/V direction", "DESIGN erratum 1",
                     erratum_dkv_direction});
  catalog.push_back({"erratum-causal-mask", "Erratum 2: a causal mask from block offsets", "DESIGN erratum 2", erratum_causal_mask});
  catalog.push_back({"erratum-softmax-scale", "Erratum 3: the flash solution without 1/sqrt(d)", "DESIGN erratum 3",
                     erratum_softmax_scale});
  catalog.push_back({"erratum-skip-speedup", "Erratum 4: work saved is not time saved", "DESIGN erratum 4", erratum_skip_speedup});
  catalog.push_back({"erratum-initial-transfer", "Erratum 5: there is no initial transfer", "DESIGN erratum 5",
                     erratum_initial_transfer});
}

}  // namespace ringlab::exercises
