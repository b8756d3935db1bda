// The worked numbers of the context-parallelism notes (001), as exercises: the contiguous layout's
// imbalance, zig-zag positions and their balanced sums, the overlap threshold in tokens and the
// notes' profiling example, per-GPU memory, and communication volumes forward and backward.
// Sections: [imbalance-ratio] [zigzag-positions] [layout-efficiency] [overlap-threshold]
//           [overlap-profile] [ring-vs-allgather] [backward-volume] [ulysses-degree]
//           [memory-table] [registration]
#include <algorithm>
#include <numeric>

#include "exercises/catalog_support.hpp"
#include "exercises/step_timing.hpp"
#include "reference/error.hpp"
#include "reference/formulas.hpp"

namespace ringlab::exercises {

using namespace support;

namespace {

struct Machine {
  const char* name;
  double flops;           // dense bf16 FLOP/s
  double link;            // bytes/s, one direction
  const char* link_note;  // where the link figure comes from
  bool operator==(const Machine&) const = default;
};

// Published peaks (bf16 dense) and link bandwidths; one direction, as a ring GPU sends.
const Machine kA100{"A100 SXM, NVLink 3", 312e12, 300e9, "600 GB/s counting both directions"};
const Machine kH100{"H100 SXM, NVLink 4", 989e12, 450e9, "900 GB/s counting both directions"};
const Machine kH100Measured{"H100 SXM, measured NVLink P2P", 989e12, 375e9, "measured one way"};
const Machine kA100Ib{"A100 SXM, 200 Gb/s InfiniBand", 312e12, 25e9, "200 Gb/s, across nodes"};

Machine draw_machine(VariantDraw& d) {
  switch (d.integer(0, 3)) {
    case 0: return kA100;
    case 1: return kH100;
    case 2: return kH100Measured;
    default: return kA100Ib;
  }
}

// ---- [imbalance-ratio] -------------------------------------------------------------------------

Exercise imbalance_ratio(int64_t variant) {
  struct Params {
    int64_t ranks, tokens_per_rank;
    bool operator==(const Params&) const = default;
  };
  VariantDraw draw("imbalance-ratio", variant);
  const Params p = variant_params(draw, Params{8, 16384}, [](VariantDraw& d) {
    return Params{d.pick<int64_t>({4, 6, 8, 12, 16}), d.pick<int64_t>({4096, 16384})};
  });
  const int64_t seq = p.ranks * p.tokens_per_rank;
  const Layout layout(LayoutKind::contiguous, seq, p.ranks);
  const std::vector<int64_t> pairs = causal_pairs_per_rank(layout);
  const double total = double(full_pairs(seq, true));
  const double first = double(pairs.front()) / total, last = double(pairs.back()) / total;
  const double ratio = double(pairs.back()) / double(pairs.front());

  Exercise e;
  e.id = "imbalance-ratio";
  e.numbers = {{"P", double(p.ranks)}, {"n", double(p.tokens_per_rank)}};
  e.title = "The contiguous layout's causal imbalance";
  e.source = "context-parallelism notes 001, section 5.2";
  e.variant = variant;
  e.parameters = {{"P", cat(p.ranks), "GPUs"},
                  {"S", tokens_text(seq) + " tokens", cat("n = S/P = ", p.tokens_per_rank, " per GPU, contiguous")}};
  e.statement =
      "Causal attention, contiguous layout: GPU r holds tokens [r n, (r+1) n). The work of a query is the number\n"
      "of keys it may see (its position + 1, counting from 0).\n"
      "first: what fraction of all the causal work falls on GPU 0?   last: on GPU P-1?\n"
      "ratio: how many times more work does GPU P-1 do than GPU 0?";
  Part ratio_part_ = ratio_part("ratio", "work of GPU P-1 / work of GPU 0", ratio, 0.01);
  mistake(ratio_part_, 2.0 * double(p.ranks), "the notes' approximation (001, section 5.2)",
          "2P keeps s^2/P for the last GPU but drops its -s^2/(2P^2) term, which is not small next to the first "
          "GPU's s^2/(2P^2); exactly, ratio = 1 + 2(P-1) n/(n+1), which tends to 2P - 1");
  e.parts = {fraction_part("first", "share of the causal work on GPU 0", first, 0.0005),
             fraction_part("last", "share of the causal work on GPU P-1", last, 0.0005), ratio_part_};
  const int64_t n = p.tokens_per_rank;
  e.solution = cat(
      "All causal work: S(S+1)/2 = ", group_thousands(full_pairs(seq, true)), " pairs.\n"
      "GPU 0: n(n+1)/2 = ", group_thousands(pairs.front()), " -> ", percent_text(first), " (about 1/P^2).\n"
      "GPU P-1: (P-1) n^2 + n(n+1)/2 = ", group_thousands(pairs.back()), " -> ", percent_text(last),
      " (about (2P-1)/P^2).\n"
      "ratio = 1 + 2(P-1) n/(n+1) = ", num(ratio), " for n = ", n, ": close to 2P - 1 = ", 2 * p.ranks - 1,
      ", not the notes' 2P = ", 2 * p.ranks, ".");
  e.command = cat("ringlab plan --ranks ", p.ranks, " --seq ", seq, " --causal --no-skip    # per-rank visible pairs in the footer");
  return e;
}

// ---- [zigzag-positions] ------------------------------------------------------------------------

Exercise zigzag_positions(int64_t variant) {
  struct Params {
    int64_t seq, ranks, rank;
    bool operator==(const Params&) const = default;
  };
  VariantDraw draw("zigzag-positions", variant);
  const Params p = variant_params(draw, Params{16, 4, 0}, [](VariantDraw& d) {
    const int64_t ranks = d.pick<int64_t>({2, 3, 4, 5, 6, 8});
    return Params{2 * ranks * d.pick<int64_t>({2, 3, 4}), ranks, d.integer(0, ranks - 1)};
  });
  const Layout folded(LayoutKind::zigzag, p.seq, p.ranks, 1);
  const Layout chunked(LayoutKind::zigzag, p.seq, p.ranks);
  const std::vector<int64_t> positions = folded.positions(p.rank);
  const int64_t sum = std::accumulate(positions.begin(), positions.end(), int64_t{0});
  int64_t pairs = 0;
  for (int64_t k = 0; k < p.ranks; ++k) pairs += folded.causal_pairs(p.rank, k);
  const std::vector<int64_t> chunks = chunked.units_of(p.rank);
  std::vector<int64_t> one_based = positions;
  for (int64_t& x : one_based) ++x;

  Exercise e;
  e.id = "zigzag-positions";
  e.numbers = {{"S", double(p.seq)}, {"P", double(p.ranks)}, {"rank", double(p.rank)}};
  e.title = "Zig-zag positions and their balanced sums";
  e.source = "context-parallelism notes 001, sections 6.1 and 2.3";
  e.variant = variant;
  e.parameters = {{"S", cat(p.seq), "tokens, positions 0..S-1"}, {"P", cat(p.ranks), "GPUs"}, {"r", cat(p.rank), "the GPU asked about"}};
  e.statement =
      "Token-level zig-zag: deal the positions in rounds of P; even rounds go to GPUs 0..P-1, odd rounds to\n"
      "P-1..0 (a fold).\n"
      "positions: the positions GPU r holds, ascending.   sum: their sum (the notes' 'causal FLOPs').\n"
      "pairs: the causal (query, key) pairs of GPU r's queries (a query at position i sees i + 1 keys).\n"
      "chunks: with the 2P-chunk zig-zag instead (S cut into 2P chunks of S/(2P)), which chunks does GPU r hold?";
  Part positions_part = list_part("positions", "GPU r's positions, ascending", positions);
  mistake_list(positions_part, one_based, "the notes' numbering (001, section 6.1)",
               "the notes count positions from 1 there; this exercise (and ringlab) counts from 0");
  e.parts = {positions_part, number_part("sum", "sum of GPU r's positions", double(sum), 0, 0),
             number_part("pairs", "causal pairs of GPU r's queries", double(pairs), 0, 0),
             list_part("chunks", "GPU r's chunks in the 2P-chunk zig-zag", chunks)};
  e.solution = cat(
      "Rounds of P = ", p.ranks, ": GPU r takes position k P + r in even rounds k and k P + (P-1-r) in odd ones.\n"
      "positions = ", format_list(positions), "; sum = ", sum, " - every GPU gets the same sum, S(S-1)/(2P) = ",
      p.seq * (p.seq - 1) / (2 * p.ranks), ",\nbecause each pair of rounds gives every GPU the same two-position total.\n"
      "pairs = sum + S/P = ", pairs, " (each query also sees itself), again the same on every GPU.\n"
      "chunks = ", format_list(chunks), ": GPU r holds chunk r and its mirror 2P-1-r.");
  e.command = cat("ringlab plan --ranks ", p.ranks, " --seq ", p.seq, " --causal --layout zigzag --block 1");
  return e;
}

// ---- [layout-efficiency] -----------------------------------------------------------------------

Exercise layout_efficiency(int64_t variant) {
  struct Params {
    int64_t ranks, tokens_per_rank;
    bool operator==(const Params&) const = default;
  };
  VariantDraw draw("layout-efficiency", variant);
  const Params p = variant_params(draw, Params{8, 8192}, [](VariantDraw& d) {
    return Params{d.pick<int64_t>({2, 4, 6, 8, 16, 32}), d.pick<int64_t>({1024, 8192})};
  });
  const int64_t seq = p.ranks * p.tokens_per_rank;
  auto efficiency = [&](LayoutKind kind) {
    const std::vector<int64_t> pairs = causal_pairs_per_rank(Layout(kind, seq, p.ranks));
    const double mean = double(std::accumulate(pairs.begin(), pairs.end(), int64_t{0})) / double(pairs.size());
    return mean / double(*std::max_element(pairs.begin(), pairs.end()));
  };
  const double contiguous = efficiency(LayoutKind::contiguous), zigzag = efficiency(LayoutKind::zigzag),
               striped = efficiency(LayoutKind::striped);

  Exercise e;
  e.id = "layout-efficiency";
  e.numbers = {{"P", double(p.ranks)}, {"n", double(p.tokens_per_rank)}};
  e.title = "How balanced is each layout?";
  e.source = "context-parallelism notes 001, sections 5-6 (and the zhuzilin ring-flash-attention benchmark)";
  e.variant = variant;
  e.parameters = {{"P", cat(p.ranks), "GPUs"}, {"S", tokens_text(seq) + " tokens", "causal"}};
  e.statement =
      "A synchronous ring runs at the pace of its busiest GPU. Call a layout's balance efficiency the mean\n"
      "causal work per GPU divided by the largest (100% = perfectly balanced).\n"
      "contiguous: the efficiency of the contiguous layout.   zigzag: of the 2P-chunk zig-zag layout.\n"
      "striped: of the striped layout (token i on GPU i mod P).";
  e.parts = {fraction_part("contiguous", "balance efficiency, contiguous", contiguous, 0.002),
             fraction_part("zigzag", "balance efficiency, zig-zag", zigzag, 0.002),
             fraction_part("striped", "balance efficiency, striped", striped, 0.002)};
  e.solution = cat(
      "contiguous: mean S(S+1)/(2P), max (P-1) n^2 + n(n+1)/2 -> ", percent_text(contiguous), " (about P/(2P-1)).\n"
      "zig-zag: GPU r holds chunks r and 2P-1-r, whose work adds up to the same on every GPU -> ", percent_text(zigzag), ".\n"
      "striped: GPU r's tokens r, r+P, ... are late by at most P-1 positions -> ", percent_text(striped), ".\n"
      "For comparison, zhuzilin/ring-flash-attention measured 52.1% (contiguous) and 85.2% (zig-zag) of ideal on\n"
      "8 H800s: the contiguous figure is this balance limit; zig-zag loses the rest to communication and kernels.");
  e.command = cat("ringlab run --ranks ", p.ranks, " --seq ", 128 * p.ranks, " --causal --layout zigzag    # load imbalance line");
  return e;
}

// ---- [overlap-threshold] -----------------------------------------------------------------------

Exercise overlap_threshold(int64_t variant) {
  struct Params {
    Machine machine;
    int64_t group;  // query heads per K/V head in the GQA part
    bool operator==(const Params&) const = default;
  };
  VariantDraw draw("overlap-threshold", variant);
  const Params p = variant_params(draw, Params{kA100, 4}, [](VariantDraw& d) {
    return Params{draw_machine(d), d.pick<int64_t>({2, 4, 8})};
  });
  const StepCostModel model{p.machine.flops, p.machine.link, 0, 2};
  const AttentionDims mha = dims_of(1, 1, 32, 32, 128);
  const AttentionDims gqa = dims_of(1, 1, 32, 32 / p.group, 128);
  const int64_t tokens = overlap_threshold_tokens(model, mha);
  const int64_t gqa_tokens = overlap_threshold_tokens(model, gqa);

  Exercise e;
  e.id = "overlap-threshold";
  e.numbers = {{"flops", p.machine.flops}, {"link", p.machine.link}, {"group", double(p.group)}};
  e.title = "How many tokens per GPU hide the ring's transfers?";
  e.source = "context-parallelism notes 001, section 7.1 (the Ring Attention paper's block-size condition)";
  e.variant = variant;
  e.parameters = {{"GPU", cat(p.machine.name), cat(flops_text(p.machine.flops), " bf16 dense")},
                  {"link", bandwidth_text(p.machine.link), cat("one direction (", p.machine.link_note, ")")},
                  {"dtype", "bf16", "K and V on the wire"},
                  {"heads", "n_h query heads of d dims", "the answer does not depend on n_h, d or the batch"}};
  e.statement =
      "A ring step with c tokens per GPU computes a full c x c block (forward: q.k^T and p.v, 4 d FLOPs per\n"
      "(query, key) pair and head) while one K/V block of c tokens crosses the link.\n"
      "tokens: the smallest c for which the compute covers the transfer (no GQA: as many K/V heads as query heads).\n"
      "gqa_tokens: the same with " + std::to_string(p.group) + " query heads per K/V head.";
  e.model = "compute = 4 d c^2 n_h / F;  transfer = 2 c HKV d e / BW (K and V, one direction, no latency).";
  Part tokens_part_ = tokens_part("tokens", "smallest tokens per GPU with compute >= transfer", double(tokens), 0.025);
  mistake(tokens_part_, double(tokens) / 2, "a common slip",
          "that uses the link's bandwidth counting both directions; a ring GPU sends one way while it receives the other");
  mistake(tokens_part_, double(tokens) * 2, "a common slip",
          "that counts only the q.k^T GEMM (2 d FLOPs per pair); p.v costs as much again");
  e.parts = {tokens_part_, tokens_part("gqa_tokens", "the same with GQA", double(gqa_tokens), 0.025)};
  e.solution = cat(
      "compute >= transfer  <=>  4 d c^2 n_h / F >= 2 c HKV d e / BW  <=>  c >= (HKV/n_h) e F / (2 BW).\n"
      "tokens = F / BW (e = 2, HKV = n_h) = ", flops_text(p.machine.flops), " / ", bandwidth_text(p.machine.link), " = ",
      group_thousands(tokens), " tokens per GPU.\n"
      "gqa_tokens = tokens / ", p.group, " = ", group_thousands(gqa_tokens), ": GQA shrinks the K/V that travel, not the compute.\n"
      "The notes reach about 1K for the A100 with 2 d FLOPs per pair (only q.k^T) and 600 GB/s (both directions):\n"
      "two factor-of-2 slips that cancel.");
  e.command = "ringlab exercises show overlap-profile    # the same model on a concrete step";
  return e;
}

// ---- [overlap-profile] -------------------------------------------------------------------------

Exercise overlap_profile(int64_t variant) {
  struct Params {
    int64_t seq, ranks, heads;
    Machine machine;
    bool operator==(const Params&) const = default;
  };
  VariantDraw draw("overlap-profile", variant);
  const Params p = variant_params(draw, Params{128 * 1024, 8, 32, kA100}, [](VariantDraw& d) {
    return Params{d.pick<int64_t>({8 * 1024, 32 * 1024, 128 * 1024, 256 * 1024}), d.pick<int64_t>({4, 8, 16}),
                  d.pick<int64_t>({8, 32}), draw_machine(d)};
  });
  const int64_t dim = 128;
  const StepCostModel model{p.machine.flops, p.machine.link, 0, 2};
  const AttentionDims dims = dims_of(1, p.seq, p.heads, p.heads, dim);
  const int64_t n = p.seq / p.ranks;
  const double compute = step_compute_seconds(model, dims, n), transfer = step_transfer_seconds(model, dims, n);
  const RingTimes times = ring_times(p.ranks, compute, transfer);

  Exercise e;
  e.id = "overlap-profile";
  e.numbers = {{"S", double(p.seq)}, {"P", double(p.ranks)}, {"heads", double(p.heads)}, {"dim", double(dim)}, {"flops", p.machine.flops}, {"link", p.machine.link}};
  e.title = "Profiling one ring step: compute vs transfer";
  e.source = "context-parallelism notes 001, section 12.4";
  e.variant = variant;
  e.parameters = {{"S", tokens_text(p.seq) + " tokens", "sequence length"},
                  {"P", cat(p.ranks), "GPUs"},
                  {"n_h", cat(p.heads), cat("heads of d = ", dim, ", batch 1, no GQA")},
                  {"GPU", p.machine.name, cat(flops_text(p.machine.flops), ", link ", bandwidth_text(p.machine.link), " one way")}};
  e.statement =
      "One step of the ring forward, non-causal.\n"
      "step_compute: the attention compute of one step (q.k^T and p.v at the peak rate).\n"
      "step_transfer: the transfer of one K/V block (bf16).   ratio: step_compute / step_transfer.\n"
      "hidden: the fraction of the forward's communication hidden behind compute.";
  e.model = "compute = 4 d (S/P)^2 n_h / F;  transfer = 2 (S/P) n_h d e / BW;  ring timing as in overlap-time.";
  Part compute_part = seconds_part("step_compute", "compute time of one ring step", compute);
  Part transfer_part = seconds_part("step_transfer", "transfer time of one K/V block", transfer);
  Part ratio = ratio_part("ratio", "step_compute / step_transfer", compute / transfer, 0.01);
  if (p == Params{128 * 1024, 8, 32, kA100}) {
    mistake(compute_part, 8.59e-3, "the notes' printed output (001, section 12.4)",
            "8.59 ms is not even what their own formula gives (7.05 ms, counting only q.k^T); with both GEMMs it is 14.1 ms");
    mistake(transfer_part, 0.22e-3, "the notes' printed output (001, section 12.4)",
            "0.22 ms does not follow from their formula either (0.447 ms at 600 GB/s); one way at 300 GB/s it is 0.895 ms");
    mistake(ratio, 39.3, "the notes' printed output (001, section 12.4)", "39.3x comes from the two misprinted times");
  }
  mistake(compute_part, compute / 2, "a common slip", "that counts only q.k^T; p.v is another 2 d FLOPs per pair");
  mistake(transfer_part, transfer / 2, "a common slip", "that uses the bandwidth of both directions; the ring sends one way");
  e.parts = {compute_part, transfer_part, ratio,
             fraction_part("hidden", "fraction of the communication hidden", times.hidden_fraction, 0.005)};
  e.solution = cat(
      "S/P = ", group_thousands(n), " tokens. step_compute = 4 x ", dim, " x ", group_thousands(n), "^2 x ", p.heads, " / ",
      flops_text(p.machine.flops), " = ", seconds_text(compute), ".\n"
      "step_transfer = 2 x ", group_thousands(n), " x ", p.heads, " x ", dim, " x 2 B / ", bandwidth_text(p.machine.link),
      " = ", bytes_text(kv_bytes(n, dims, 2)), " / ", bandwidth_text(p.machine.link), " = ", seconds_text(transfer), ".\n"
      "ratio = ", ratio_text(compute / transfer), " (= S/P over the overlap threshold of exercise overlap-threshold); hidden = ",
      percent_text(times.hidden_fraction), ".");
  e.command = "ringlab exercises show overlap-threshold";
  return e;
}

// ---- [ring-vs-allgather] -----------------------------------------------------------------------

Exercise ring_vs_allgather(int64_t variant) {
  struct Params {
    int64_t seq, heads, kv_heads, ranks;
    bool operator==(const Params&) const = default;
  };
  VariantDraw draw("ring-vs-allgather", variant);
  const Params p = variant_params(draw, Params{128 * 1024, 32, 8, 8}, [](VariantDraw& d) {
    const int64_t heads = d.pick<int64_t>({32, 64});
    return Params{d.pick<int64_t>({64 * 1024, 128 * 1024, 256 * 1024}), heads, d.pick<int64_t>({8, heads}),
                  d.pick<int64_t>({4, 8, 16})};
  });
  const AttentionDims dims = dims_of(1, p.seq, p.heads, p.kv_heads, 128);
  const Plan ring = build_plan(ring_spec(dims, p.ranks));
  PlanSpec gather_spec = ring_spec(dims, p.ranks);
  gather_spec.algo = Algorithm::allgather;
  const Plan gather = build_plan(gather_spec);
  const double ring_total = double(exchange_send_bytes(ring, 0, Payload::kv, Pass::forward));
  const double gather_total = double(collective_send_bytes(gather, 0, Collective::all_gather_kv));
  const double block = double(payload_bytes(ring, Payload::kv));
  const double gather_memory = double(gather.ring()) * double(payload_bytes(gather, Payload::kv));

  Exercise e;
  e.id = "ring-vs-allgather";
  e.numbers = {{"S", double(p.seq)}, {"heads", double(p.heads)}, {"kv_heads", double(p.kv_heads)}, {"dim", 128}, {"P", double(p.ranks)}};
  e.title = "All-gather vs ring: the same bytes, different memory";
  e.source = "context-parallelism notes 001, sections 3.2, 4.4 and 7";
  e.variant = variant;
  e.parameters = {{"S", tokens_text(p.seq) + " tokens", "sequence length"},
                  {"n_h / HKV", cat(p.heads, " / ", p.kv_heads), "query / key-value heads of d = 128"},
                  {"P", cat(p.ranks), "GPUs"},
                  {"dtype", "bf16 (2 bytes)", "batch 1"}};
  e.statement =
      "Two ways to give every GPU all K/V for one attention forward: all-gather them first, or pass blocks\n"
      "around a ring.\n"
      "ring_total / allgather_total: bytes one GPU sends with each.\n"
      "allgather_memory: K/V bytes a GPU holds at once with the all-gather.\n"
      "ring_memory: extra K/V bytes a GPU holds with the ring (beyond its own block).   ratio: allgather_memory / ring_memory.";
  Part ring_part = bytes_part("ring_total", "bytes one GPU sends in the ring", ring_total);
  mistake(ring_part, block * double(p.ranks), "the notes' formula (001, section 4.4)",
          "it counts a send at each of the P steps (2 s d b n_h in total); the last step sends nothing and step 0 "
          "uses the GPU's own block, so P - 1 blocks travel");
  e.parts = {ring_part, bytes_part("allgather_total", "bytes one GPU sends in the all-gather", gather_total),
             bytes_part("allgather_memory", "K/V held at once with the all-gather", gather_memory),
             bytes_part("ring_memory", "extra K/V held at once with the ring (the receive buffer)", block),
             ratio_part("ratio", "allgather_memory / ring_memory", gather_memory / block)};
  e.solution = cat(
      "One K/V block: 2 (S/P) HKV d e = ", bytes_text(block), ".\n"
      "ring_total = (P-1) blocks = ", bytes_text(ring_total), "; allgather_total = (P-1) blocks too (a ring all-gather) = ",
      bytes_text(gather_total), ".\n"
      "allgather_memory = all P blocks = 2 S HKV d e = ", bytes_text(gather_memory), "; ring_memory = one receive buffer = ",
      bytes_text(block), ".\n"
      "ratio = P = ", num(gather_memory / block), "x: same traffic, but the ring never holds more than two blocks and can\n"
      "overlap each hop with compute; the all-gather must finish before its compute starts.");
  e.command = cat("ringlab run --algo allgather --ranks 4 --seq 1024 --heads 8 --kv-heads 2 ; ringlab run --algo ring --ranks 4 "
                  "--seq 1024 --heads 8 --kv-heads 2    # equal MB sent");
  return e;
}

// ---- [backward-volume] -------------------------------------------------------------------------

Exercise backward_volume(int64_t variant) {
  struct Params {
    int64_t seq, heads, kv_heads, ranks;
    bool operator==(const Params&) const = default;
  };
  VariantDraw draw("backward-volume", variant);
  const Params p = variant_params(draw, Params{128 * 1024, 32, 8, 8}, [](VariantDraw& d) {
    const int64_t ranks = d.pick<int64_t>({3, 4, 8, 16});
    return Params{ranks * d.pick<int64_t>({8192, 16384, 32768}), 32, d.pick<int64_t>({8, 32}), ranks};
  });
  const AttentionDims dims = dims_of(1, p.seq, p.heads, p.kv_heads, 128);
  PlanSpec spec = ring_spec(dims, p.ranks);
  spec.backward = true;
  const Plan plan = build_plan(spec);
  const int64_t kv_sends = exchange_sends(plan, 0, Payload::kv, Pass::backward);
  const int64_t dkv_sends = exchange_sends(plan, 0, Payload::dkv, Pass::backward);
  const double kv = double(exchange_send_bytes(plan, 0, Payload::kv, Pass::backward));
  const double dkv = double(exchange_send_bytes(plan, 0, Payload::dkv, Pass::backward));
  const double dkv_block = double(payload_bytes(plan, Payload::dkv));

  Exercise e;
  e.id = "backward-volume";
  e.numbers = {{"S", double(p.seq)}, {"heads", double(p.heads)}, {"kv_heads", double(p.kv_heads)}, {"dim", 128}, {"P", double(p.ranks)}};
  e.title = "The ring backward's traffic: K/V and their gradients";
  e.source = "context-parallelism notes 001, section 8 (and DESIGN.md erratum 1)";
  e.variant = variant;
  e.parameters = {{"S", tokens_text(p.seq) + " tokens", "sequence length"},
                  {"n_h / HKV", cat(p.heads, " / ", p.kv_heads), "heads of d = 128, batch 1"},
                  {"P", cat(p.ranks), "GPUs"},
                  {"dtypes", "K/V bf16, dK/dV fp32", "gradient accumulators travel in fp32"}};
  e.statement =
      "The ring backward passes K/V around the ring again, and each block's dK/dV accumulator collects every\n"
      "GPU's contribution until it is back with the block's owner (it travels with its K/V block).\n"
      "kv_sends / dkv_sends: how many K/V blocks and how many dK/dV accumulators does one GPU send?\n"
      "bytes: all bytes one GPU sends in the backward.";
  Part dkv_part = number_part("dkv_sends", "dK/dV accumulator sends per GPU", double(dkv_sends), 0, 0);
  mistake(dkv_part, double(p.ranks - 1), kNotes,
          "P - 1 would leave each accumulator one hop short of home: it travels one step behind its K/V block, so it "
          "needs one extra hop (the notes' reverse-direction version also sends P - 1, and is wrong for P >= 3)");
  Part bytes = bytes_part("bytes", "bytes one GPU sends in the backward", kv + dkv);
  mistake(bytes, kv + double(p.ranks - 1) * dkv_block, kNotes, "one dK/dV hop short: the accumulators take P hops");
  e.parts = {number_part("kv_sends", "K/V block sends per GPU", double(kv_sends), 0, 0), dkv_part, bytes};
  e.solution = cat(
      "K/V rotate exactly as in the forward: P - 1 = ", kv_sends, " sends of ", bytes_text(kv / double(kv_sends)), " = ",
      bytes_text(kv), ".\n"
      "The accumulator of the block a GPU holds at step t collects that step's dK/dV and moves on one step\n"
      "behind the block: ", dkv_sends, " sends of ", bytes_text(dkv_block), " (fp32) = ", bytes_text(dkv),
      ", the last one bringing it home.\n"
      "bytes = ", bytes_text(kv + dkv), ". Sending the accumulators the other way round (the notes' section 8) is\n"
      "wrong for P >= 3: see exercise erratum-dkv-direction.");
  e.command = cat("ringlab plan --ranks 4 --seq 1024 --causal --backward    # dkv> cells: P per rank, kv> cells: P - 1");
  return e;
}

// ---- [ulysses-degree] --------------------------------------------------------------------------

Exercise ulysses_degree(int64_t variant) {
  struct Params {
    int64_t heads, kv_heads, ranks;
    bool operator==(const Params&) const = default;
  };
  VariantDraw draw("ulysses-degree", variant);
  const Params p = variant_params(draw, Params{64, 8, 32}, [](VariantDraw& d) {
    switch (d.integer(0, 4)) {
      case 0: return Params{32, 8, d.pick<int64_t>({16, 32, 64})};
      case 1: return Params{32, 4, d.pick<int64_t>({16, 32})};
      case 2: return Params{40, 8, d.pick<int64_t>({16, 32, 64})};
      case 3: return Params{48, 8, d.pick<int64_t>({16, 64})};
      default: return Params{28, 4, d.pick<int64_t>({16, 32})};
    }
  });
  const int64_t seq = 128 * 1024;
  int64_t best = 1;
  for (int64_t u = 1; u <= p.ranks; ++u) {
    if (p.ranks % u != 0) continue;
    PlanSpec spec = ring_spec(dims_of(1, seq, p.heads, p.kv_heads, 128), p.ranks);
    spec.algo = u == p.ranks ? Algorithm::ulysses : u == 1 ? Algorithm::ring : Algorithm::hybrid;
    spec.ulysses = u;
    try {
      (void)build_plan(spec);
      best = u;
    } catch (const UsageError&) {
      // this degree does not divide the heads
    }
  }
  int64_t head_limited = 1;  // the largest divisor of P dividing the query heads only
  for (int64_t u = 1; u <= p.ranks; ++u)
    if (p.ranks % u == 0 && p.heads % u == 0) head_limited = u;

  Exercise e;
  e.id = "ulysses-degree";
  e.numbers = {{"heads", double(p.heads)}, {"kv_heads", double(p.kv_heads)}, {"P", double(p.ranks)}};
  e.title = "How far can Ulysses go with grouped-query attention?";
  e.source = "source material 000 (Ulysses) and context-parallelism notes 001, section 12.3 (GQA)";
  e.variant = variant;
  e.parameters = {{"n_h", cat(p.heads), "query heads"}, {"HKV", cat(p.kv_heads), "key/value heads (GQA)"},
                  {"P", cat(p.ranks), "GPUs, split as U (Ulysses) x R (ring)"}};
  e.statement =
      "Ulysses' all-to-all gives each of U GPUs n_h/U query heads and HKV/U key/value heads (ringlab splits whole\n"
      "heads; it does not replicate K/V heads). The rest of the parallelism is a ring of R = P/U.\n"
      "max_ulysses: the largest Ulysses degree U (a divisor of P) for which ringlab builds the plan.\n"
      "ring_degree: R = P / max_ulysses.   kv_heads_per_gpu: K/V heads per GPU at that degree.";
  Part max_part = number_part("max_ulysses", "largest Ulysses degree ringlab accepts", double(best), 0, 0);
  if (head_limited != best) {
    mistake(max_part, double(head_limited), "a common slip",
            "that divides the query heads but not the K/V heads; a Ulysses degree must divide HKV too");
  }
  const int64_t ring_degree = p.ranks / best, kv_heads_per_gpu = p.kv_heads / best;  // both divide exactly
  e.parts = {max_part, number_part("ring_degree", "R = P / U", double(ring_degree), 0, 0),
             number_part("kv_heads_per_gpu", "K/V heads per GPU", double(kv_heads_per_gpu), 0, 0)};
  e.solution = cat(
      "U must divide P, n_h and HKV. Divisors of P = ", p.ranks, " that divide both ", p.heads, " and ", p.kv_heads,
      ": the largest is ", best, " (ringlab's build_plan refuses every larger one).\n"
      "ring_degree = ", p.ranks / best, "; each GPU computes ", p.heads / best, " query heads over ", p.kv_heads / best,
      " K/V head(s).\n"
      "GQA caps Ulysses at HKV; beyond it, the ring (whose volume GQA shrinks) takes over.");
  e.command = cat("ringlab plan --algo hybrid --ranks ", p.ranks, " --ulysses ", best, " --seq 4096 --heads ", p.heads,
                  " --kv-heads ", p.kv_heads, " --dim 16 --show-ranks 4");
  return e;
}

// ---- [memory-table] ----------------------------------------------------------------------------

Exercise memory_table(int64_t variant) {
  struct Params {
    int64_t seq, heads, ranks;
    bool operator==(const Params&) const = default;
  };
  VariantDraw draw("memory-table", variant);
  const Params p = variant_params(draw, Params{128 * 1024, 32, 8}, [](VariantDraw& d) {
    return Params{d.pick<int64_t>({32 * 1024, 128 * 1024, 512 * 1024}), d.pick<int64_t>({16, 32, 64}), d.pick<int64_t>({4, 8, 16})};
  });
  const int64_t e_bytes = 2, dim = 128;
  const AttentionDims dims = dims_of(1, p.seq, p.heads, p.heads, dim);
  const int64_t n = build_plan(ring_spec(dims, p.ranks)).block_tokens();
  auto tensors = [&](int64_t tokens) { return 2 * q_bytes(tokens, dims, e_bytes) + kv_bytes(tokens, dims, e_bytes); };
  auto stats = [&](int64_t tokens) { return 2.0 * double(tokens) * double(p.heads) * 4; };
  const double none = tensors(p.seq) + attention_matrix_bytes(1, p.heads, p.seq, p.seq, e_bytes);
  const double flash = tensors(p.seq) + stats(p.seq);
  const double ring = tensors(n) + kv_bytes(n, dims, e_bytes) + stats(n) + attention_matrix_bytes(1, p.heads, n, n, e_bytes);
  const double ring_flash = tensors(n) + kv_bytes(n, dims, e_bytes) + stats(n);

  Exercise e;
  e.id = "memory-table";
  e.numbers = {{"S", double(p.seq)}, {"heads", double(p.heads)}, {"dim", double(dim)}, {"P", double(p.ranks)}};
  e.title = "Per-GPU attention memory: a table";
  e.source = "context-parallelism notes 001, section 12.1 (and 000's memory figures)";
  e.variant = variant;
  e.parameters = {{"S", tokens_text(p.seq) + " tokens", "sequence length"},
                  {"n_h", cat(p.heads), "heads of d = 128, batch 1, no GQA"},
                  {"P", cat(p.ranks), "GPUs for the ring rows"},
                  {"dtype", "bf16", "tensors and scores; row statistics fp32"}};
  e.statement =
      "Count one attention layer's working set per GPU: q, k, v and out of the tokens it holds, plus\n"
      "none:       one GPU, scores materialised (n_h S^2)\n"
      "flash:      one GPU, flash kernel (running max and sum per row, fp32; no scores)\n"
      "ring:       P GPUs, ring, one receive buffer for K/V, row statistics, one step's score block materialised\n"
      "ring_flash: P GPUs, ring with a flash kernel (receive buffer and row statistics, no scores)";
  e.parts = {bytes_part("none", "single GPU, scores materialised", none), bytes_part("flash", "single GPU, flash kernel", flash),
             bytes_part("ring", "per GPU, ring, score block materialised", ring),
             bytes_part("ring_flash", "per GPU, ring with a flash kernel", ring_flash)};
  e.solution = cat(
      "q, k, v, out of T tokens: 4 T n_h d e; a K/V receive buffer: 2 (S/P) n_h d e; row statistics: 2 T n_h x 4 B.\n"
      "none       = ", bytes_text(tensors(p.seq)), " + scores ", bytes_text(attention_matrix_bytes(1, p.heads, p.seq, p.seq, e_bytes)),
      " = ", bytes_text(none), "\n"
      "flash      = ", bytes_text(tensors(p.seq)), " + stats ", bytes_text(stats(p.seq)), " = ", bytes_text(flash), "\n"
      "ring       = ", bytes_text(tensors(n) + kv_bytes(n, dims, e_bytes) + stats(n)), " + block ",
      bytes_text(attention_matrix_bytes(1, p.heads, n, n, e_bytes)), " = ", bytes_text(ring), "\n"
      "ring_flash = ", bytes_text(ring_flash), ": linear in S/P - the flash kernel removes the quadratic term, the ring\n"
      "divides what is left by P.");
  e.command = cat("ringlab run --ranks ", p.ranks, " --seq ", 128 * p.ranks, " --heads 2 --dim 128    # per-rank MB in the table");
  return e;
}

}  // namespace

// ---- [registration] ----------------------------------------------------------------------------

void add_notes_exercises(std::vector<CatalogEntry>& catalog) {
  catalog.push_back({"imbalance-ratio", "The contiguous layout's causal imbalance", "001 §5.2", imbalance_ratio});
  catalog.push_back({"zigzag-positions", "Zig-zag positions and their balanced sums", "001 §6.1, §2.3", zigzag_positions});
  catalog.push_back({"layout-efficiency", "How balanced is each layout?", "001 §5-6", layout_efficiency});
  catalog.push_back({"overlap-threshold", "How many tokens per GPU hide the ring's transfers?", "001 §7.1", overlap_threshold});
  catalog.push_back({"overlap-profile", "Profiling one ring step: compute vs transfer", "001 §12.4", overlap_profile});
  catalog.push_back({"ring-vs-allgather", "All-gather vs ring: the same bytes, different memory", "001 §3.2, §4.4, §7", ring_vs_allgather});
  catalog.push_back({"backward-volume", "The ring backward's traffic: K/V and their gradients", "001 §8", backward_volume});
  catalog.push_back({"ulysses-degree", "How far can Ulysses go with grouped-query attention?", "000, 001 §12.3", ulysses_degree});
  catalog.push_back({"memory-table", "Per-GPU attention memory: a table", "001 §12.1", memory_table});
}

}  // namespace ringlab::exercises
