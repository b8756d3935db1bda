// The exercises of the source material's sequence-parallelism chapter (000, exercises 1-7),
// rewritten: every expected answer comes from reference/formulas.hpp, the layouts and the plans;
// the source's wrong answers are listed as known mistakes, each with why.
// Sections: [1 attention-memory] [2 comm-volume] [3 overlap-time] [4 causal-skip]
//           [5 hybrid-plan] [6 online-softmax] [7 flash-ring-memory] [registration]
#include <cmath>

#include "exercises/catalog_support.hpp"
#include "exercises/step_timing.hpp"
#include "reference/formulas.hpp"
#include "reference/softmax_state.hpp"

namespace ringlab::exercises {

using namespace support;

namespace {

// ---- [1 attention-memory] ----------------------------------------------------------------------

Exercise attention_memory(int64_t variant) {
  struct Params {
    int64_t seq, heads, dim, ranks, batch, element;
    bool operator==(const Params&) const = default;
  };
  VariantDraw draw("attention-memory", variant);
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
  e.id = "attention-memory";
  e.numbers = {{"S", double(p.seq)}, {"heads", double(p.heads)}, {"dim", double(p.dim)}, {"P", double(p.ranks)}, {"batch", double(p.batch)}, {"element", double(p.element)}};
  e.title = "Memory of the materialised attention scores";
  e.source = "source material 000, exercise 1";
  e.variant = variant;
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

// ---- [2 comm-volume] ---------------------------------------------------------------------------

Exercise comm_volume(int64_t variant) {
  struct Params {
    int64_t seq, heads, kv_heads, dim, ranks;
    bool operator==(const Params&) const = default;
  };
  VariantDraw draw("comm-volume", variant);
  const Params p = variant_params(draw, Params{1024 * 1024, 64, 64, 128, 16}, [](VariantDraw& d) {
    // Ulysses splits whole heads: the K/V heads must divide by P.
    const int64_t seq = d.pick<int64_t>({256 * 1024, 512 * 1024, 1024 * 1024, 2048 * 1024});
    const int64_t heads = d.pick<int64_t>({32, 64}), ranks = d.pick<int64_t>({4, 8, 16, 32});
    return Params{seq, heads, ranks <= 8 ? d.pick<int64_t>({heads, 8}) : heads, 128, ranks};
  });
  const int64_t e_bytes = 2;
  const AttentionDims dims = dims_of(1, p.seq, p.heads, p.kv_heads, p.dim);
  const Plan ring_plan = build_plan(ring_spec(dims, p.ranks));
  const double ring = double(exchange_send_bytes(ring_plan, 0, Payload::kv, Pass::forward));
  const double ulysses = ulysses_forward_send_bytes(dims, p.ranks, e_bytes);
  PlanSpec uspec = ring_spec(dims, p.ranks);
  uspec.algo = Algorithm::ulysses;
  uspec.ulysses = p.ranks;
  const Plan ulysses_plan = build_plan(uspec);
  const double ulysses_plan_bytes = double(collective_send_bytes(ulysses_plan, 0, Collective::all_to_all_qkv) +
                                           collective_send_bytes(ulysses_plan, 0, Collective::all_to_all_out));
  const double hop = kv_bytes(p.seq / p.ranks, dims, e_bytes);

  Exercise e;
  e.id = "comm-volume";
  e.numbers = {{"S", double(p.seq)}, {"heads", double(p.heads)}, {"kv_heads", double(p.kv_heads)}, {"dim", double(p.dim)}, {"P", double(p.ranks)}, {"element", double(e_bytes)}};
  e.title = "Ring vs Ulysses: bytes each GPU sends";
  e.source = "source material 000, exercise 2";
  e.variant = variant;
  e.parameters = {{"S", tokens_text(p.seq) + " tokens", "sequence length"},
                  {"n_h", cat(p.heads), "query heads of d = " + std::to_string(p.dim) + " (H = " + std::to_string(p.heads * p.dim) + ")"},
                  {"HKV", cat(p.kv_heads), p.kv_heads == p.heads ? "key/value heads (no GQA)" : "key/value heads (GQA)"},
                  {"P", cat(p.ranks), "GPUs"},
                  {"dtype", element_text(e_bytes), "q, k, v, out on the wire"},
                  {"b", "1", "batch"}};
  e.statement = cat(
      "One attention forward, sequence-parallel over P GPUs (each starts with S/P tokens, all heads).\n"
      "ring: Ring Attention passes K/V blocks around the ring. How many bytes does one GPU send?\n"
      "ulysses: Ulysses does an all-to-all of q, k, v (to S tokens x n_h/P heads per GPU), attends, and an\n"
      "         all-to-all of out back. How many bytes does one GPU send (count q, k, v and out)?\n"
      "ratio: ring / ulysses.");
  Part ring_part = bytes_part("ring", "bytes one GPU sends in the ring forward", ring);
  mistake(ring_part, hop * double(p.ranks), kNotes,
          "counts P sends; step 0 computes on the GPU's own block, so only P - 1 blocks travel (the notes' section "
          "4.4 makes this slip)");
  e.parts = {ring_part, bytes_part("ulysses", "bytes one GPU sends in Ulysses' two all-to-alls", ulysses),
             ratio_part("ratio", "ring / ulysses", ring / ulysses, 0.01)};
  e.solution = cat(
      "ring: a K/V block is 2 (S/P) HKV d e = 2 x ", group_thousands(p.seq / p.ranks), " x ", p.kv_heads, " x ", p.dim,
      " x 2 B = ", bytes_text(hop), ". Step 0 uses the GPU's own block, so P - 1 = ", p.ranks - 1,
      " blocks travel:\n      ", bytes_text(ring), " (the ring plan's exchanges of one rank add up to exactly this).\n"
      "ulysses: an all-to-all keeps 1/P of a GPU's shard and sends the rest. In: q, k, v = (S/P)(n_h + 2 HKV) d e;\n"
      "      back: out = (S/P) n_h d e. Total (P-1)/P (S/P)(2 n_h + 2 HKV) d e = ", bytes_text(ulysses), ".\n"
      "      (ringlab's Ulysses plan also sends the fp32 LSE back with out: ", bytes_text(ulysses_plan_bytes), ".)\n"
      "ratio = P HKV / (n_h + HKV) = ", num(ring / ulysses), "x. Per GPU the ring's volume stays near 2 S HKV d e\n"
      "whatever P is, while Ulysses' falls as 1/P; but the ring's transfers hide behind compute and the\n"
      "all-to-alls do not, and Ulysses needs n_h and HKV divisible by P (exercise ulysses-degree).");
  e.command = cat("ringlab run --algo ring --ranks 4 --seq 1024 --heads 8 --dim 64 ; ringlab run --algo ulysses --ranks 4 "
                  "--seq 1024 --heads 8 --dim 64    # compare the MB sent columns (the simulator sends fp32)");
  return e;
}

// ---- [3 overlap-time] --------------------------------------------------------------------------

const char* kRingTimingModel =
    "ringlab's cost model runs the ring plan (dry executor): step 0 computes on the GPU's own K/V; the\n"
    "transfer of block k (k = 1..P-1) is posted when step k-1 starts and runs during its compute; step k\n"
    "starts when both are done. With compute c and transfer t per step: total = c + (P-1) max(c, t).\n"
    "Without overlap each transfer completes before the compute that needs it: P c + (P-1) t.";

Exercise overlap_time(int64_t variant) {
  struct Params {
    int64_t compute_ms, transfer_ms, ranks;
    bool operator==(const Params&) const = default;
  };
  VariantDraw draw("overlap-time", variant);
  const Params p = variant_params(draw, Params{10, 2, 8}, [](VariantDraw& d) {
    return Params{d.pick<int64_t>({4, 6, 8, 10, 12}), d.pick<int64_t>({1, 2, 3, 5, 8, 15}), d.pick<int64_t>({4, 8, 16})};
  });
  const double c = double(p.compute_ms) * 1e-3, t = double(p.transfer_ms) * 1e-3;
  const RingTimes times = ring_times(p.ranks, c, t);
  const double P = double(p.ranks);
  const double overhead = (times.with_overlap - P * c) / times.with_overlap;

  Exercise e;
  e.id = "overlap-time";
  e.numbers = {{"compute", c}, {"transfer", t}, {"P", P}};
  e.title = "Overlapping the ring's transfers with compute";
  e.source = "source material 000, exercise 3 (and DESIGN.md erratum 5)";
  e.variant = variant;
  e.parameters = {{"c", cat(p.compute_ms, " ms"), "attention compute per ring step"},
                  {"t", cat(p.transfer_ms, " ms"), "K/V transfer per ring step"},
                  {"P", cat(p.ranks), "GPUs, so P ring steps"}};
  e.statement =
      "Ring Attention double-buffers: while a GPU computes on the K/V block it holds, the next block is\n"
      "already on its way.\n"
      "hidden: what fraction of the communication time is hidden behind compute?\n"
      "total: the forward's time with overlap.\n"
      "no_overlap: the time without overlap (each transfer completed before the compute that needs it).\n"
      "overhead: the share of `total` that is exposed communication.   speedup: no_overlap / total.";
  e.model = kRingTimingModel;
  Part hidden = fraction_part("hidden", "fraction of the communication hidden behind compute", times.hidden_fraction);
  Part total = seconds_part("total", "forward time with overlap", times.with_overlap);
  const double source_total = t + P * c;  // the source: an unoverlappable initial transfer + P computes
  if (std::fabs(source_total - times.with_overlap) > 1e-12) {
    mistake(total, source_total, "the source material's answer (000, exercise 3)",
            "it adds an 'initial transfer' before step 0, but step 0 computes on the GPU's own K/V: nothing has to "
            "arrive first. Only P - 1 blocks travel, each during the compute of the step before it");
  }
  if (t > c) {
    mistake(total, P * t, "the source material's formula (000, exercise 3)",
            "exposed communication is (P - 1)(t - c), not P (t - c): there are only P - 1 transfers");
  }
  Part no_overlap = seconds_part("no_overlap", "forward time without overlap", times.without_overlap);
  mistake(no_overlap, times.naive_loop, "the source material's answer (000, exercise 3)",
          "P (c + t) counts P transfers, as a loop that also exchanges after its last step would; the ring has P - 1 "
          "(step 0 uses the GPU's own block)");
  Part overhead_part = fraction_part("overhead", "exposed communication / total", overhead, 0.002);
  if (t <= c) {
    mistake(overhead_part, t / (t + P * c), "the source material's answer (000, exercise 3)",
            "that is the 'initial transfer' again; with t <= c every transfer is hidden and the overhead is 0");
  }
  e.parts = {hidden, total, no_overlap, overhead_part,
             ratio_part("speedup", "no_overlap / total", times.without_overlap / times.with_overlap, 0.01)};
  e.solution = cat(
      "P = ", p.ranks, " steps, P - 1 = ", times.transfers, " transfers (step 0 uses the GPU's own block).\n",
      t <= c ? cat("t = ", p.transfer_ms, " ms <= c = ", p.compute_ms,
                   " ms: each transfer finishes while the step before it computes, so every one is hidden.\n")
             : cat("t = ", p.transfer_ms, " ms > c = ", p.compute_ms, " ms: each step waits t - c = ",
                   p.transfer_ms - p.compute_ms, " ms for its block; (P-1)(t-c) = ", seconds_text(times.exposed),
                   " is exposed.\n"),
      "total = c + (P-1) max(c, t) = ", seconds_text(times.with_overlap), "; no_overlap = P c + (P-1) t = ",
      seconds_text(times.without_overlap), ".\n"
      "hidden = 1 - exposed / ((P-1) t) = ", percent_text(times.hidden_fraction), "; overhead = ",
      percent_text(overhead), "; speedup = ", ratio_text(times.without_overlap / times.with_overlap), ".\n"
      "The source's 82 ms / 96 ms / 2.4% come from an initial transfer that does not exist (DESIGN.md erratum 5).");
  e.command = cat("ringlab plan --ranks ", p.ranks, " --seq ", 64 * p.ranks,
                  "    # count the kv> cells of one rank: P - 1 sends, none before step 0");
  return e;
}

// ---- [4 causal-skip] ---------------------------------------------------------------------------

const char* kCausalWorkModel =
    "Compute-bound model: a step costs the (query, key) pairs its kernel computes - a full block n^2\n"
    "(n = S/P), the diagonal block n(n+1)/2 (the kernel skips masked tiles), a skipped block nothing;\n"
    "without skipping every block costs n^2. Transfers are hidden. The wall clock is the slowest\n"
    "rank's sum (ringlab: resolve_compute over every (rank, step) of the plan).";

Exercise causal_skip(int64_t variant) {
  struct Params {
    int64_t ranks, tokens_per_rank;
    bool operator==(const Params&) const = default;
  };
  VariantDraw draw("causal-skip", variant);
  const Params p = variant_params(draw, Params{8, 8192}, [](VariantDraw& d) {
    return Params{d.pick<int64_t>({4, 6, 8, 12, 16, 32}), d.pick<int64_t>({4096, 8192})};
  });
  const int64_t seq = p.ranks * p.tokens_per_rank;
  const AttentionDims dims = dims_of(1, seq, 1, 1, 128);
  const CausalWork contiguous = causal_work(dims, p.ranks, LayoutKind::contiguous);
  const CausalWork zigzag = causal_work(dims, p.ranks, LayoutKind::zigzag);
  int64_t skipped = 0;
  for (int64_t s : contiguous.rank_skipped) skipped += s;
  const double P = double(p.ranks);
  const double avg_skipped = double(skipped) / P;
  const double work_reduction = double(skipped) / (P * P);

  Exercise e;
  e.id = "causal-skip";
  e.numbers = {{"P", P}, {"n", double(p.tokens_per_rank)}, {"S", double(seq)}};
  e.title = "Skipping fully masked blocks: work saved vs time saved";
  e.source = "source material 000, exercise 4 (and DESIGN.md erratum 4)";
  e.variant = variant;
  e.parameters = {{"P", cat(p.ranks), "GPUs, P ring steps"},
                  {"S", tokens_text(seq) + " tokens", cat("sequence length, n = S/P = ", p.tokens_per_rank, " per GPU")},
                  {"mask", "causal", "by global token position"},
                  {"layout", "contiguous", "GPU r holds tokens [r n, (r+1) n)"}};
  e.statement =
      "Causal Ring Attention with the contiguous layout: at step k GPU r holds the K/V of GPU r-k (mod P).\n"
      "A block whose keys all come after all of the GPU's queries is fully masked and can be skipped.\n"
      "avg_skipped: how many of the P steps does a GPU skip, on average?\n"
      "work_reduction: what fraction of all block steps is skipped?\n"
      "wallclock_speedup: by what factor does skipping shorten the forward's wall clock (cost model below)?\n"
      "balanced_speedup: the same with the zig-zag layout (2P chunks, GPU r holds chunks r and 2P-1-r).";
  e.model = kCausalWorkModel;
  Part avg = number_part("avg_skipped", "steps skipped per GPU, averaged over the GPUs", avg_skipped);
  Part reduction = fraction_part("work_reduction", "skipped block steps / all P^2 block steps", work_reduction, 0.001);
  mistake(reduction, 0.5, "a common slip",
          "50% counts (query, key) pairs with the diagonal blocks at half cost; this part counts block steps, a "
          "computed diagonal block being one step");
  Part wall = ratio_part("wallclock_speedup", "forward wall clock without skipping / with skipping, contiguous layout",
                         contiguous.speedup(), 0.01);
  mistake(wall, P / (P - avg_skipped), "the source material's answer (000, exercise 4)",
          cat("P / (P - avg_skipped) = ", num(P / (P - avg_skipped)),
              "x compares the average GPU's steps; but every GPU waits for the ring, and the last GPU (the latest "
              "tokens) skips nothing: it still computes ", p.ranks - 1,
              " full blocks and its diagonal, so the wall clock barely moves"));
  Part balanced = ratio_part("balanced_speedup", "the same speedup with the zig-zag layout", zigzag.speedup(), 0.01);
  e.parts = {avg, reduction, wall, balanced};
  const int64_t n = p.tokens_per_rank;
  e.solution = cat(
      "At step k GPU r holds block r-k (mod P); it is fully masked when r-k < 0, i.e. on ", p.ranks - 1,
      " - r steps of GPU r.\n"
      "avg_skipped = (0 + 1 + ... + (P-1)) / P = (P-1)/2 = ", num(avg_skipped), " (the plan skips ", skipped,
      " of ", p.ranks * p.ranks, " blocks).\n"
      "work_reduction = (P-1)/(2P) = ", percent_text(work_reduction), " of the block steps.\n"
      "wall clock: without skipping every GPU computes P n^2 = ", group_thousands(contiguous.max_pairs_no_skip()),
      " pairs. With skipping GPU r computes r n^2 + n(n+1)/2;\n"
      "  the slowest is GPU ", contiguous.slowest_rank, " with ", group_thousands(contiguous.max_pairs()),
      " pairs, so the speedup is only ", ratio_text(contiguous.speedup()), " (the source's 8/4.5 = 1.78x is the\n"
      "  average GPU's, but the ring runs at the pace of its slowest member).\n"
      "zig-zag: every GPU holds an early and a late chunk, so all do the same ", group_thousands(zigzag.max_pairs()),
      " pairs\n  = (P n^2 + n)/2 with n = ", n, ": speedup ", ratio_text(zigzag.speedup()),
      " - a balanced layout turns the saved work into saved time.");
  e.command = cat("ringlab plan --ranks ", p.ranks, " --seq ", seq, " --causal ; ringlab plan --ranks ", p.ranks,
                  " --seq ", seq, " --causal --layout zigzag    # per-rank pairs in the footer");
  return e;
}

// ---- [5 hybrid-plan] ---------------------------------------------------------------------------

Exercise hybrid_plan(int64_t variant) {
  struct Params {
    int64_t nodes, gpus_per_node, seq, heads, kv_heads;
    bool operator==(const Params&) const = default;
  };
  VariantDraw draw("hybrid-plan", variant);
  const Params p = variant_params(draw, Params{8, 8, 2048 * 1024, 64, 64}, [](VariantDraw& d) {
    const int64_t heads = d.pick<int64_t>({32, 64});
    return Params{d.pick<int64_t>({4, 8, 16}), d.pick<int64_t>({4, 8}), d.pick<int64_t>({1024 * 1024, 2048 * 1024, 4096 * 1024}),
                  heads, d.pick<int64_t>({heads, 8})};
  });
  const int64_t dim = 128, e_bytes = 2, ranks = p.nodes * p.gpus_per_node, U = p.gpus_per_node, R = p.nodes;
  const double ib_bandwidth = 50e9;  // 400 Gb/s InfiniBand, one direction
  const AttentionDims dims = dims_of(1, p.seq, p.heads, p.kv_heads, dim);
  PlanSpec spec = ring_spec(dims, ranks);
  spec.algo = Algorithm::hybrid;
  spec.ulysses = U;
  const Plan plan = build_plan(spec);
  const int64_t tokens = plan.layout().tokens_per_rank();
  const double qkv = q_bytes(tokens, dims, e_bytes) + kv_bytes(tokens, dims, e_bytes);
  const double step = double(payload_bytes(plan, Payload::kv));
  const double alltoall = double(collective_send_bytes(plan, 0, Collective::all_to_all_qkv));
  const double scores = attention_matrix_bytes(1, plan.heads_per_rank(), plan.block_tokens(), plan.block_tokens(), e_bytes);
  const LinkClass infiniband{"InfiniBand", 0, ib_bandwidth, false, 0};
  const RingTimes ring = ring_times(R, 0, infiniband.seconds(step));  // the R - 1 transfers, nothing to hide them
  const int64_t hidden = p.heads * dim;

  Exercise e;
  e.id = "hybrid-plan";
  e.numbers = {{"S", double(p.seq)}, {"heads", double(p.heads)}, {"kv_heads", double(p.kv_heads)}, {"dim", double(dim)}, {"P", double(ranks)}, {"U", double(U)}, {"R", double(R)}, {"element", double(e_bytes)}, {"ib", ib_bandwidth}};
  e.title = "A hybrid Ulysses x ring plan for many nodes";
  e.source = "source material 000, exercise 5";
  e.variant = variant;
  e.parameters = {{"GPUs", cat(ranks, " = ", p.nodes, " nodes x ", p.gpus_per_node), "NVLink inside a node, InfiniBand between"},
                  {"S", tokens_text(p.seq) + " tokens", "sequence length"},
                  {"n_h", cat(p.heads), cat("query heads of d = ", dim, " (H = ", hidden, ")")},
                  {"HKV", cat(p.kv_heads), "key/value heads"},
                  {"U x R", cat(U, " x ", R), "Ulysses degree inside a node x ring degree across nodes"},
                  {"dtype", element_text(e_bytes), "q, k, v, out"},
                  {"IB", bandwidth_text(ib_bandwidth), "InfiniBand, one direction per GPU (400 Gb/s)"}};
  e.statement = cat(
      "Ulysses inside each node (U = ", U, "), a ring across nodes (R = ", R,
      "): after the all-to-all a GPU holds its node's S/R tokens\n"
      "for n_h/U heads, and the GPUs with the same index in their node form a ring over the nodes' blocks.\n"
      "tokens_per_gpu: tokens a GPU owns before the all-to-all.\n"
      "qkv_bytes: bytes of a GPU's own q, k, v (its tokens, all heads).\n"
      "alltoall_bytes: bytes a GPU sends in the all-to-all of q, k, v.\n"
      "ring_step_bytes: bytes of K/V a GPU sends per ring step.\n"
      "ring_comm_time: time of a GPU's R - 1 ring transfers over InfiniBand (none hidden).\n"
      "scores_bytes: the score block a GPU would materialise per ring step without a flash kernel.");
  const int64_t tokens_per_position = p.seq / R;  // R divides S
  Part ring_step = bytes_part("ring_step_bytes", "K/V bytes one GPU sends per ring step", step);
  mistake(ring_step, double(tokens_per_position) * double(hidden) * double(e_bytes), "the source material's answer (000, exercise 5)",
          "4.3 GB is (S/R) H e: one tensor over the full hidden size. A GPU sends K and V, but only for its n_h/U "
          "heads: 2 (S/R)(HKV/U) d e");
  mistake(ring_step, 2.0 * double(tokens_per_position) * double(hidden) * double(e_bytes), "a common slip",
          "K and V over the full hidden size; after the all-to-all a GPU holds only n_h/U heads");
  Part ring_time = seconds_part("ring_comm_time", "time of the R - 1 ring transfers at the IB bandwidth", ring.with_overlap);
  mistake(ring_time, double(R - 1) * double(tokens_per_position) * double(hidden) * double(e_bytes) / ib_bandwidth,
          "the source material's answer (000, exercise 5)", "built on the 4.3 GB step, which counts the full hidden size");
  Part scores_part = bytes_part("scores_bytes", "one GPU's score block per ring step, no flash kernel", scores);
  mistake(scores_part, attention_matrix_bytes(1, p.heads, tokens, tokens, e_bytes), "the source material's answer (000, exercise 5)",
          "n_h (S/P)^2 e scores all heads against S/P tokens; after the all-to-all a GPU scores n_h/U heads of its "
          "node's S/R tokens against S/R keys per step - even more, which is why a flash kernel is a must");
  e.parts = {tokens_part("tokens_per_gpu", "tokens per GPU before the all-to-all", double(tokens), 0),
             bytes_part("qkv_bytes", "a GPU's own q, k, v", qkv),
             bytes_part("alltoall_bytes", "bytes one GPU sends in the all-to-all of q, k, v", alltoall), ring_step,
             ring_time, scores_part};
  e.solution = cat(
      "tokens_per_gpu = S/P = ", group_thousands(tokens), ".  qkv_bytes = (S/P)(n_h + 2 HKV) d e = ", bytes_text(qkv), ".\n"
      "alltoall_bytes: a GPU keeps 1/U of its shard and sends (U-1)/U of it: ", bytes_text(alltoall), ".\n"
      "After the all-to-all a GPU holds S/R = ", group_thousands(plan.block_tokens()), " tokens for n_h/U = ",
      plan.heads_per_rank(), " heads (HKV/U = ", plan.kv_heads_per_rank(), " K/V heads).\n"
      "ring_step_bytes = 2 (S/R)(HKV/U) d e = ", bytes_text(step), " (the hybrid plan's K/V payload).\n"
      "ring_comm_time = (R-1) x ", bytes_text(step), " / ", bandwidth_text(ib_bandwidth), " = ", seconds_text(ring.with_overlap),
      "; the ring overlaps it with compute, so it costs only what compute does not cover.\n"
      "scores_bytes = (n_h/U)(S/R)^2 e = ", bytes_text(scores),
      ": the materialised block is hopeless; a flash kernel keeps only O(S/R) per head.");
  e.command = cat("ringlab plan --algo hybrid --ranks 8 --ulysses 4 --seq 4096 --heads 8 --dim 64    # the same phases, small");
  return e;
}

// ---- [6 online-softmax] ------------------------------------------------------------------------

Exercise online_softmax(int64_t variant) {
  struct Params {
    double a0, a1, b0, b1;   // scaled scores of chunks A and B
    double va0, va1, vb0, vb1;  // their (scalar) values
    bool operator==(const Params&) const = default;
  };
  VariantDraw draw("online-softmax", variant);
  const Params p = variant_params(draw, Params{2, 1, 3, 0.5, 1, 3, -1, 2}, [](VariantDraw& d) {
    auto score = [&] { return double(d.integer(-6, 8)) / 2; };
    auto value = [&] { return double(d.integer(-4, 4)); };
    return Params{score(), score(), score(), score(), value(), value(), value(), value()};
  });
  const SoftmaxState<double> a = softmax_state_of<double>({p.a0, p.a1}, {p.va0, p.va1}, 1);
  const SoftmaxState<double> b = softmax_state_of<double>({p.b0, p.b1}, {p.vb0, p.vb1}, 1);
  SoftmaxState<double> merged = a;
  merged.merge(b);
  std::vector<double> out, lse;
  merged.finalize(out, lse);
  const double unrescaled_out = (a.out[0] + b.out[0]) / (a.sum[0] + b.sum[0]);

  Exercise e;
  e.id = "online-softmax";
  e.numbers = {{"a0", p.a0}, {"a1", p.a1}, {"b0", p.b0}, {"b1", p.b1}, {"va0", p.va0}, {"va1", p.va1}, {"vb0", p.vb0}, {"vb1", p.vb1}};
  e.title = "Merging two online-softmax states by hand";
  e.source = "source material 000, exercise 6 (the associativity itself is code lab 01)";
  e.variant = variant;
  e.parameters = {{"A", cat("scores [", num(p.a0), ", ", num(p.a1), "], values [", num(p.va0), ", ", num(p.va1), "]"), "chunk A"},
                  {"B", cat("scores [", num(p.b0), ", ", num(p.b1), "], values [", num(p.vb0), ", ", num(p.vb1), "]"), "chunk B"}};
  e.statement =
      "One query row sees two chunks of keys. The scores are already scaled (s_j = q.k_j / sqrt(d)); values are\n"
      "scalars. A chunk's state is (m, l, o): m = max s_j, l = sum exp(s_j - m), o = sum exp(s_j - m) v_j.\n"
      "Merge A's and B's states into the state over all four keys.\n"
      "m, l: the merged state's max and sum.  out: the attention output o / l.  lse: the log-sum-exp m + log l.";
  Part l = number_part("l", "merged sum, relative to the merged max", merged.sum[0], 0.001);
  mistake(l, a.sum[0] + b.sum[0], "a common slip (the missing rescale)",
          "l_A + l_B adds sums taken relative to different maxima; each must be rescaled by exp(m_i - m) first");
  Part out_part = number_part("out", "attention output o / l", out[0], 0.001, 1e-6);
  mistake(out_part, unrescaled_out, "a common slip (the missing rescale)",
          "(o_A + o_B) / (l_A + l_B) mixes terms relative to different maxima; rescale each by exp(m_i - m)");
  e.parts = {number_part("m", "merged max", merged.max[0], 0, 1e-9), l, out_part,
             number_part("lse", "log-sum-exp of all four scores", lse[0], 0.001, 1e-6)};
  e.lab = "01-softmax-merge";
  e.solution = cat(
      "A: m_A = ", num(a.max[0]), ", l_A = ", num(a.sum[0]), ", o_A = ", num(a.out[0]), ".   B: m_B = ", num(b.max[0]),
      ", l_B = ", num(b.sum[0]), ", o_B = ", num(b.out[0]), ".\n"
      "m = max(m_A, m_B) = ", num(merged.max[0]), "; l = l_A exp(m_A - m) + l_B exp(m_B - m) = ", num(merged.sum[0]),
      "; o = o_A exp(m_A - m) + o_B exp(m_B - m) = ", num(merged.out[0]), ".\n"
      "out = o / l = ", num(out[0]), "; lse = m + log l = ", num(lse[0]),
      " - the same as a softmax over all four scores at once.\n"
      "The merge is associative and commutative, with (m, l, o) = (-inf, 0, 0) as identity: that is exercise 6,\n"
      "and code lab 01-softmax-merge has you implement it and prove it on P >= 3 chunks.");
  e.command = "ringlab grade 01-softmax-merge solution    # the lab's reference merge against its hidden tests";
  return e;
}

// ---- [7 flash-ring-memory] ---------------------------------------------------------------------

Exercise flash_ring_memory(int64_t variant) {
  struct Params {
    int64_t seq, ranks, dim, tile;
    bool operator==(const Params&) const = default;
  };
  VariantDraw draw("flash-ring-memory", variant);
  const Params p = variant_params(draw, Params{1024 * 1024, 8, 128, 256}, [](VariantDraw& d) {
    return Params{d.pick<int64_t>({256 * 1024, 512 * 1024, 1024 * 1024, 2048 * 1024}), d.pick<int64_t>({4, 8, 16}),
                  d.pick<int64_t>({64, 128}), d.pick<int64_t>({128, 256})};
  });
  const int64_t e_bytes = 2;
  const AttentionDims dims = dims_of(1, p.seq, 1, 1, p.dim);
  const int64_t n = build_plan(ring_spec(dims, p.ranks)).block_tokens();
  const double qkv = q_bytes(n, dims, e_bytes) + kv_bytes(n, dims, e_bytes);
  const double receive = kv_bytes(n, dims, e_bytes);
  const double output = q_bytes(n, dims, e_bytes);
  const double stats = 2.0 * double(n) * 4;  // running max and sum per query row, fp32
  const double workspace = double(3 * p.tile * p.dim + p.tile * p.tile) * 4;  // q, k, v tiles and a score tile, fp32
  const double total = qkv + receive + output + stats + workspace;
  const double score_block = attention_matrix_bytes(1, 1, n, n, e_bytes);
  const double without_flash = qkv + receive + output + stats + score_block;

  Exercise e;
  e.id = "flash-ring-memory";
  e.numbers = {{"S", double(p.seq)}, {"P", double(p.ranks)}, {"dim", double(p.dim)}, {"tile", double(p.tile)}, {"element", double(e_bytes)}};
  e.title = "Flash attention inside the ring: memory per GPU";
  e.source = "source material 000, exercise 7";
  e.variant = variant;
  e.parameters = {{"S", tokens_text(p.seq) + " tokens", "sequence length"},
                  {"P", cat(p.ranks), "GPUs"},
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
  Part total_part = bytes_part("total", "per-GPU memory with the flash kernel", total, 0.02);
  Part score = bytes_part("score_block", "bytes of one step's (S/P) x (S/P) score block", score_block);
  Part reduction = ratio_part("reduction", "per-GPU memory without / with the flash kernel", without_flash / total, 0.02);
  mistake(reduction, double(n) / double(p.dim), "the source material's answer (000, exercise 7)",
          "(S/P)/d is the size of the score block over one (S/P) x d tensor; the GPU holds q, k, v, the receive buffer "
          "and the output either way, so the memory shrinks by (buffers + scores) / (buffers + workspace)");
  e.parts = {total_part, score, reduction};
  e.solution = cat(
      "S/P = ", group_thousands(n), " tokens. q, k, v: 3 (S/P) d e = ", bytes_text(qkv), "; receive buffer (K and V): ",
      bytes_text(receive), "; output: ", bytes_text(output), ";\n"
      "row statistics: 2 (S/P) x 4 B = ", bytes_text(stats), "; workspace: (3 tile d + tile^2) x 4 B = ",
      bytes_text(workspace), ".\n"
      "total = ", bytes_text(total), " (the source's ~200 MB).\n"
      "score_block = (S/P)^2 e = ", bytes_text(score_block), " (", num(score_block / 0x1p30), " GiB: the source's '32 GB').\n"
      "reduction = (", bytes_text(qkv + receive + output + stats), " + ", bytes_text(score_block), ") / ", bytes_text(total),
      " = ", ratio_text(without_flash / total), ". The source's 1024x is (S/P)/d, the score block over a single\n"
      "(S/P) x d tensor - not the ratio of what the GPU holds.");
  e.command = cat("ringlab run --ranks ", p.ranks, " --seq ", 128 * p.ranks, " --heads 1 --dim ", p.dim,
                  "    # the sim's ring runs the blockwise (flash) kernel at every step");
  return e;
}

}  // namespace

// ---- [registration] ----------------------------------------------------------------------------

void add_source_exercises(std::vector<CatalogEntry>& catalog) {
  catalog.push_back({"attention-memory", "Memory of the materialised attention scores", "000 ex. 1", attention_memory});
  catalog.push_back({"comm-volume", "Ring vs Ulysses: bytes each GPU sends", "000 ex. 2", comm_volume});
  catalog.push_back({"overlap-time", "Overlapping the ring's transfers with compute", "000 ex. 3", overlap_time});
  catalog.push_back({"causal-skip", "Skipping fully masked blocks: work saved vs time saved", "000 ex. 4", causal_skip});
  catalog.push_back({"hybrid-plan", "A hybrid Ulysses x ring plan for many nodes", "000 ex. 5", hybrid_plan});
  catalog.push_back({"online-softmax", "Merging two online-softmax states by hand", "000 ex. 6", online_softmax});
  catalog.push_back({"flash-ring-memory", "Flash attention inside the ring: memory per GPU", "000 ex. 7", flash_ring_memory});
}

}  // namespace ringlab::exercises
