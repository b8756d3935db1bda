// Lab 03's hidden tests: the student's ring_forward on P virtual ranks against exact attention.
//
// block_attention (the one kernel students may call) is defined here, so every call is logged
// with the rank that made it: which rank's K and V it was given (found by comparing the buffers
// with every rank's original block, bit for bit), whether the key positions belong to that block,
// and the rank's traffic counters at that moment. From the log the report names the first
// diverging (rank, step, block): a block computed twice, a block never computed, keys masked with
// another block's positions, K and V from different blocks, blocks named as if they travelled the
// other way round the ring. The traffic counters grade the performance criteria (P - 1 blocks
// sent, each posted before the compute it overlaps). The student's merge_into is also run on its
// own, on rows that are empty (lse = -inf) on one side or both, which no ring criterion reaches:
// a rank's own block, merged first, always shows each query its own key.
// Every call into the student's code (the ring, merge_into on its own) goes through lab::across,
// with the block log, so that the grader judges from a process that holds none of it.
// Sections: [block_attention] [diagnosis] [merge] [criteria]
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <random>
#include <stdexcept>

#include "exercises/labs/03-ring-forward/lab.hpp"
#include "exercises/labs/common/harness.hpp"
#include "reference/bytes_text.hpp"
#include "reference/flash_attention.hpp"
#include "reference/softmax_state.hpp"
#include "sim/ranks/world.hpp"

namespace ringlab::lab03 {

namespace {

using lab::CriterionResult;
using lab::Divergence;

struct BlockCall {
  int64_t origin_k = -1, origin_v = -1;        // whose K and V (bitwise match), -1 = nobody's
  int64_t label = -1;                          // whose positions k_pos are, -1 = nobody's
  bool own_queries = true;                     // q is this rank's q
  bool positions_of_origin = true;             // k_pos == positions[origin_k]
  bool queries_positions = true;               // q_pos == positions[rank]
  bool masked = false;                         // called with causal = true
  bool needs_mask = false;                     // block origin_k has keys after some of this rank's queries
  int64_t bytes_sent = 0, bytes_received = 0;  // the rank's counters when it called
};

template <class Ar>
void fields(Ar& ar, BlockCall& c) {
  ar(c.origin_k, c.origin_v, c.label, c.own_queries, c.positions_of_origin, c.queries_positions, c.masked, c.needs_mask,
     c.bytes_sent, c.bytes_received);
}

// The criterion being run: one per process, written by the rank threads into their own slots.
struct Session {
  const lab::Problem* problem = nullptr;
  std::vector<RankInputs> inputs;
  std::vector<std::vector<BlockCall>> calls;  // [rank]
};

Session* g_session = nullptr;
thread_local int tl_rank = -1;
thread_local Communicator* tl_comm = nullptr;

bool same_bits(const Tensor<float>& a, const Tensor<float>& b) {
  return a.shape() == b.shape() && std::memcmp(a.data(), b.data(), sizeof(float) * static_cast<size_t>(a.size())) == 0;
}

void record(const Tensor<float>& q, const Tensor<float>& k, const Tensor<float>& v, std::span<const int64_t> q_pos,
            std::span<const int64_t> k_pos, bool causal) {
  if (!g_session || tl_rank < 0) return;
  BlockCall call;
  call.masked = causal;
  const auto& in = g_session->inputs;
  for (size_t r = 0; r < in.size(); ++r) {
    if (call.origin_k < 0 && same_bits(k, in[r].k)) call.origin_k = static_cast<int64_t>(r);
    if (call.origin_v < 0 && same_bits(v, in[r].v)) call.origin_v = static_cast<int64_t>(r);
  }
  const RankInputs& mine = in[static_cast<size_t>(tl_rank)];
  for (size_t r = 0; r < mine.positions.size() && call.label < 0; ++r)
    if (std::equal(k_pos.begin(), k_pos.end(), mine.positions[r].begin(), mine.positions[r].end()))
      call.label = static_cast<int64_t>(r);
  call.own_queries = same_bits(q, mine.q);
  call.queries_positions = std::equal(q_pos.begin(), q_pos.end(), mine.positions[static_cast<size_t>(tl_rank)].begin(),
                                      mine.positions[static_cast<size_t>(tl_rank)].end());
  if (call.origin_k >= 0) {
    const auto& expected = mine.positions[static_cast<size_t>(call.origin_k)];
    call.positions_of_origin = std::equal(k_pos.begin(), k_pos.end(), expected.begin(), expected.end());
    const auto& queries = mine.positions[static_cast<size_t>(tl_rank)];
    call.needs_mask =
        !expected.empty() && !queries.empty() &&
        *std::max_element(expected.begin(), expected.end()) > *std::min_element(queries.begin(), queries.end());
  }
  if (tl_comm)
    call.bytes_sent = tl_comm->counters().bytes_sent, call.bytes_received = tl_comm->counters().bytes_received;
  g_session->calls[static_cast<size_t>(tl_rank)].push_back(call);
}

}  // namespace

// ---- [block_attention] -------------------------------------------------------------------------

AttentionOutput<float> block_attention(const Tensor<float>& q, const Tensor<float>& k, const Tensor<float>& v,
                                       std::span<const int64_t> q_pos, std::span<const int64_t> k_pos, bool causal) {
  if (q.rank() != 4 || k.rank() != 4 || v.shape() != k.shape() || k.dim(0) != q.dim(0) || k.dim(3) != q.dim(3) ||
      q.dim(2) % std::max<int64_t>(1, k.dim(2)) != 0) {
    throw std::invalid_argument("block_attention: q " + shape_string(q.shape()) + ", k " + shape_string(k.shape()) +
                                ", v " + shape_string(v.shape()) +
                                " are not (B, n, H, D), (B, m, HKV, D), (B, m, HKV, D)");
  }
  if (static_cast<int64_t>(q_pos.size()) != q.dim(1) || static_cast<int64_t>(k_pos.size()) != k.dim(1)) {
    throw std::invalid_argument("block_attention: " + std::to_string(q_pos.size()) + " query and " +
                                std::to_string(k_pos.size()) + " key positions for " + std::to_string(q.dim(1)) +
                                " queries and " + std::to_string(k.dim(1)) + " keys");
  }
  record(q, k, v, q_pos, k_pos, causal);
  const int64_t B = q.dim(0), n = q.dim(1), H = q.dim(2), D = q.dim(3);
  SoftmaxState<float> acc = make_accumulator(B, H, n, D);
  flash_forward_accumulate(q, k, v, q_pos, k_pos, {0, n}, {0, k.dim(1)}, causal ? MaskKind::causal : MaskKind::none,
                           acc, {1, true});
  return finalize_accumulator(acc, B, H, n, D);
}

namespace {

// ---- [diagnosis] -------------------------------------------------------------------------------

// A block that travelled one way round the ring, named (by its positions) as the block the other
// direction brings at this step: the mirror image of its origin about the rank. Told from P = 3 on,
// with or without the causal mask (the label is wrong either way, and a mask would show it).
std::string direction_label_mismatch(const BlockCall& c, int64_t rank, int64_t step, int64_t P) {
  if (P < 3 || c.label < 0 || c.label == c.origin_k) return "";
  const int64_t forward = (rank - step % P + P) % P, backward = (rank + step) % P;
  if (!((c.origin_k == forward && c.label == backward) || (c.origin_k == backward && c.label == forward))) return "";
  const bool came_forward = c.origin_k == forward;
  return "block " + std::to_string(c.origin_k) + " (received from rank " +
         std::to_string(came_forward ? (rank + P - 1) % P : (rank + 1) % P) + ": the blocks travel to rank " +
         (came_forward ? "+ 1" : "- 1") + ") was named block " + std::to_string(c.label) + " (rank " +
         (came_forward ? "+" : "-") + " step), the block the other direction brings";
}

// Reads the block log: each rank must compute every rank's block exactly once, on matching K and
// V, with that block's positions (they matter only under the causal mask, but a block named
// against its direction of travel is reported either way).
void diagnose_calls(const Session& s, bool causal, bool finished, CriterionResult& result) {
  const int64_t P = static_cast<int64_t>(s.inputs.size());
  auto found = [&](Divergence d, const char* hint) {
    result.diverge(std::move(d));
    if (result.hint.empty()) result.hint = hint;
  };
  for (int64_t r = 0; r < P; ++r) {
    const auto& calls = s.calls[static_cast<size_t>(r)];
    std::vector<int64_t> first_step(static_cast<size_t>(P), -1);
    for (size_t t = 0; t < calls.size(); ++t) {
      const BlockCall& c = calls[t];
      const int64_t step = static_cast<int64_t>(t);
      if (c.origin_k < 0) {
        found({r, step, -1,
               "the K passed to block_attention is not any rank's K block (a buffer not yet received, or "
               "rows mixed from two blocks)"},
              "complete the receive (wait) before computing on the block it brings");
      } else if (c.origin_v != c.origin_k) {
        found({r, step, c.origin_k,
               "K of block " + std::to_string(c.origin_k) + " with V of " +
                   (c.origin_v < 0 ? std::string("no rank's block") : "block " + std::to_string(c.origin_v))},
              "K and V travel together: send and receive both, and swap both");
      } else if (!c.own_queries) {
        found({r, step, c.origin_k, "q is not this rank's own queries"}, "queries stay on their rank; only K/V travel");
      } else if (first_step[static_cast<size_t>(c.origin_k)] >= 0) {
        found({r, step, c.origin_k,
               "block " + std::to_string(c.origin_k) + " computed a second time (first at step " +
                   std::to_string(first_step[static_cast<size_t>(c.origin_k)]) + ")"},
              "the received block must replace the one just computed before the next step, and each step sends "
              "the block held now (a send buffer updated one step late re-sends the previous block)");
      } else if (const std::string mismatch = direction_label_mismatch(c, r, step, P); !mismatch.empty()) {
        found({r, step, c.origin_k, mismatch},
              "a direction/label mismatch: the K/V blocks go one way round the ring and the origin you name them "
              "by counts the other way. Sending to rank + 1 (receiving from rank - 1), the block held at step t "
              "started on rank - t (mod P); sending to rank - 1, on rank + t. Either direction is right when the "
              "two agree; P = 2 cannot tell them apart");
      } else if (causal && !c.masked && c.needs_mask) {
        found({r, step, c.origin_k, "block " + std::to_string(c.origin_k) + " was computed without the causal mask"},
              "a block with keys after some of your queries needs causal = true, whatever its offset");
      } else if (causal && (!c.positions_of_origin || !c.queries_positions)) {
        found({r, step, c.origin_k,
               !c.queries_positions
                   ? std::string("the queries were masked with positions that are not this rank's")
                   : "the keys of block " + std::to_string(c.origin_k) + " were masked with another block's positions"},
              "the causal mask compares global positions: pass in.positions[rank] for the queries and "
              "in.positions[origin] for the block that started on rank origin = rank - step (mod P)");
      }
      if (c.origin_k >= 0 && first_step[static_cast<size_t>(c.origin_k)] < 0)
        first_step[static_cast<size_t>(c.origin_k)] = step;
    }
    if (finished) {
      for (int64_t b = 0; b < P; ++b)
        if (first_step[static_cast<size_t>(b)] < 0) {
          found({r, static_cast<int64_t>(calls.size()), b,
                 "block " + std::to_string(b) + " was never computed: the loop made " + std::to_string(calls.size()) +
                     " block calls, a ring of P = " + std::to_string(P) + " needs P"},
                "a ring of P ranks takes P steps: the own block at step 0, then P - 1 received ones");
          break;
        }
    }
  }
}

// The first blocked rank of a deadlock, at the lowest step: where the ring stopped.
void diverge_at_deadlock(const RunReport& report, CriterionResult& result) {
  if (!report.deadlock) return;
  for (const RankWaitReport& w : report.deadlock->ranks)
    if (w.state == RankState::blocked) result.diverge({w.rank, w.step, -1, w.describe()});
}

struct Run {
  std::unique_ptr<lab::Problem> problem;
  CriterionResult result;
  Session session;
  RunReport report;
};

// Runs the student's ring_forward on a problem and checks out and lse on every rank.
Run run_forward(const lab::ProblemSpec& spec, SendMode mode) {
  Run run;
  run.problem = std::make_unique<lab::Problem>(lab::make_problem(spec));
  const lab::Problem& problem = *run.problem;
  Session& s = run.session;
  s.problem = &problem;
  for (int64_t r = 0; r < spec.ranks; ++r) {
    const auto& pos = problem.positions[static_cast<size_t>(r)];
    s.inputs.push_back({lab::rows_of(problem.inputs.q, pos), lab::rows_of(problem.inputs.k, pos),
                        lab::rows_of(problem.inputs.v, pos), problem.positions, spec.causal});
  }
  s.calls.resize(static_cast<size_t>(spec.ranks));
  std::vector<AttentionOutput<float>> outputs(static_cast<size_t>(spec.ranks));
  lab::across(
      "ring_forward",
      [&] {
        g_session = &s;
        run.report = lab::run_ranks(spec.ranks, mode, [&](Communicator& comm) {
          tl_rank = comm.rank();
          tl_comm = &comm;
          outputs[static_cast<size_t>(comm.rank())] = ring_forward(comm, s.inputs[static_cast<size_t>(comm.rank())]);
          tl_comm = nullptr;
        });
        g_session = nullptr;
      },
      run.report, outputs, s.calls);
  const auto P = static_cast<size_t>(spec.ranks);
  lab::refuse_unless(run.report.counters.size() == P && outputs.size() == P && s.calls.size() == P, "ring_forward",
                     "not one report, output and block log per rank");
  for (const auto& calls : s.calls)
    for (const BlockCall& c : calls)
      lab::refuse_unless(c.origin_k >= -1 && c.origin_k < spec.ranks && c.origin_v >= -1 && c.origin_v < spec.ranks &&
                             c.label >= -1 && c.label < spec.ranks,
                         "ring_forward", "a block's origin is not a rank");
  CriterionResult& result = run.result;
  diagnose_calls(s, spec.causal, run.report.ok(), result);
  if (lab::record_run_failure(run.report, result)) {
    diverge_at_deadlock(run.report, result);
    return run;
  }
  bool outputs_ok = true;
  for (int64_t r = 0; r < spec.ranks; ++r) {
    const auto& pos = problem.positions[static_cast<size_t>(r)];
    const std::string where = "rank " + std::to_string(r);
    outputs_ok &= lab::compare_tensor(result, "out", outputs[static_cast<size_t>(r)].out,
                                      lab::rows_of(problem.reference.out, pos), fp32_tolerance("out"), where);
    outputs_ok &= lab::compare_tensor(result, "lse", outputs[static_cast<size_t>(r)].lse,
                                      lab::lse_rows_of(problem.reference.lse, pos), fp32_tolerance("lse"), where);
  }
  if (!outputs_ok && !result.divergence) {
    result.hint =
        "every block was computed once, on the right K/V and positions, so the merge is what is wrong: "
        "rescale both partial outputs by e^(lse_i - lse) and let a -inf lse add nothing";
  }
  if (outputs_ok && result.divergence && result.message.empty()) {
    // Right numbers the wrong way (a block named after another, which full attention cannot see).
    result.fail("the outputs match here, but the blocks were not computed as named: " + result.divergence->what);
  }
  if (!outputs_ok || result.divergence) result.passed = false;
  if (result.passed) result.message.clear();
  return run;
}

CriterionResult correctness(lab::ProblemSpec spec, SendMode mode = SendMode::eager) {
  return run_forward(spec, mode).result;
}

lab::ProblemSpec spec_of(int64_t ranks, bool causal = false, LayoutKind layout = LayoutKind::contiguous) {
  lab::ProblemSpec spec;
  spec.ranks = ranks;
  spec.causal = causal;
  spec.layout = layout;
  spec.seed = 300 + static_cast<uint64_t>(ranks);
  return spec;
}

// ---- [merge] -----------------------------------------------------------------------------------

// merge_into on rows empty on one side, the other, both (several, since an unguarded merge makes
// NaN only there), and neither, against the library's merge in double: an empty row must stay
// out 0 and lse -inf.
CriterionResult empty_rows() {
  constexpr int64_t B = 2, H = 2, n = 8, D = 8;
  constexpr float kInf = std::numeric_limits<float>::infinity();
  // Per row i: is acc empty, is part empty.
  const std::array<bool, n> acc_empty = {false, true, false, true, true, false, true, false};
  const std::array<bool, n> part_empty = {false, false, true, true, true, false, true, true};
  std::mt19937 rng(303);
  std::uniform_real_distribution<float> value(-1, 1), lse(-2, 4);
  AttentionOutput<float> acc{Tensor<float>({B, n, H, D}), Tensor<float>({B, H, n})};
  AttentionOutput<float> part{Tensor<float>({B, n, H, D}), Tensor<float>({B, H, n})};
  for (AttentionOutput<float>* side : {&acc, &part})
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t i = 0; i < n; ++i) {
          const bool empty = (side == &acc ? acc_empty : part_empty)[static_cast<size_t>(i)];
          side->lse(b, h, i) = empty ? -kInf : lse(rng);
          for (int64_t d = 0; d < D; ++d) side->out(b, i, h, d) = empty ? 0.0F : value(rng);
        }
  Tensor<double> want_out({B, n, H, D}), want_lse({B, H, n});
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h) {
      std::vector<double> out_a(static_cast<size_t>(n * D)), out_b(out_a.size()), lse_a(static_cast<size_t>(n)),
          lse_b(lse_a.size());
      for (int64_t i = 0; i < n; ++i) {
        lse_a[static_cast<size_t>(i)] = acc.lse(b, h, i), lse_b[static_cast<size_t>(i)] = part.lse(b, h, i);
        for (int64_t d = 0; d < D; ++d) {
          out_a[static_cast<size_t>(i * D + d)] = acc.out(b, i, h, d);
          out_b[static_cast<size_t>(i * D + d)] = part.out(b, i, h, d);
        }
      }
      merge_lse_form(out_a, lse_a, out_b, lse_b, D);
      for (int64_t i = 0; i < n; ++i) {
        want_lse(b, h, i) = lse_a[static_cast<size_t>(i)];
        for (int64_t d = 0; d < D; ++d) want_out(b, i, h, d) = out_a[static_cast<size_t>(i * D + d)];
      }
    }
  lab::across(
      "merge_into", [&] { merge_into(acc, part); }, acc);
  CriterionResult result;
  lab::compare_tensor(result, "out", acc.out, want_out, fp32_tolerance("out"), "merge_into");
  lab::compare_tensor(result, "lse", acc.lse, want_lse, fp32_tolerance("lse"), "merge_into");
  if (result.passed) return result;
  bool nan_where_both_empty = false;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < n; ++i)
        nan_where_both_empty |= acc_empty[static_cast<size_t>(i)] && part_empty[static_cast<size_t>(i)] &&
                                std::isnan(acc.lse(b, h, i) + acc.out(b, i, h, 0));
  if (nan_where_both_empty) {
    result.details.push_back(
        "rows 3, 4 and 6 (of every batch and head) have seen no key yet (lse = -inf), and the "
        "block shows them none either (lse = -inf), as a fully masked block does");
    result.hint =
        "the -inf guard is missing: with lse_a = lse_b = -inf, m = max(lse_a, lse_b) is -inf and lse_a - m is "
        "-inf - (-inf) = NaN. A block whose lse is -inf adds nothing: skip the row (an empty row then stays "
        "out 0, lse -inf)";
  } else {
    result.hint = "merge_into is wrong on rows where one side is empty (lse = -inf): an empty side is the identity";
  }
  return result;
}

// ---- [criteria] --------------------------------------------------------------------------------

CriterionResult performance(bool overlap) {
  Run run = run_forward(spec_of(4), SendMode::eager);
  CriterionResult result;
  if (!run.result.passed) {
    result.fail("not correct on this problem (P = 4): " + run.result.message);
    return result;
  }
  const int64_t P = 4;
  const RankInputs& in0 = run.session.inputs[0];
  const int64_t block_bytes = 2 * in0.k.size() * static_cast<int64_t>(sizeof(float));
  for (int64_t r = 0; r < P; ++r) {
    const auto& calls = run.session.calls[static_cast<size_t>(r)];
    if (!overlap) {
      const int64_t sent = run.report.counters[static_cast<size_t>(r)].bytes_sent;
      if (sent != (P - 1) * block_bytes) {
        result.fail("rank " + std::to_string(r) + " sent " + bytes_text_exact(sent) + "; a ring sends P - 1 = " +
                    std::to_string(P - 1) + " K/V blocks of " + bytes_text_exact(block_bytes));
        result.hint = "send each block once per hop, and nothing at the last step";
        return result;
      }
      continue;
    }
    for (size_t t = 0; t + 1 < calls.size(); ++t) {
      const int64_t step = static_cast<int64_t>(t);
      if (calls[t].bytes_sent < (step + 1) * block_bytes) {
        result.fail("rank " + std::to_string(r) + ", step " + std::to_string(step) +
                    ": the next transfer was not posted before this step's compute");
        result.divergence = Divergence{r, step, calls[t].origin_k, "computed before sending its block on"};
        result.hint = "post isend/irecv of the next block first, compute, then wait";
        return result;
      }
      if (calls[t].bytes_received > step * block_bytes) {
        result.fail("rank " + std::to_string(r) + ", step " + std::to_string(step) +
                    ": the next block was already received before this step's compute started");
        result.divergence = Divergence{r, step, calls[t].origin_k, "waited for the next block before computing"};
        result.hint =
            "a blocking exchange (sendrecv, or recv) before the compute serialises them: post irecv/isend, "
            "compute, and only then wait";
        return result;
      }
    }
  }
  return result;
}

}  // namespace

}  // namespace ringlab::lab03

namespace ringlab::lab {

const char* lab_name() { return "03-ring-forward"; }

// Points (the last field; 1 when absent): the cases where a ring goes wrong in ways P = 1 and 2
// cannot show - direction, the causal mask by global position, zig-zag positions, GQA - count 2.
std::vector<Criterion> lab_criteria() {
  using namespace ringlab::lab03;
  lab::ProblemSpec gqa = spec_of(4, true);
  gqa.heads = 4, gqa.kv_heads = 1;
  lab::ProblemSpec p8 = spec_of(8);
  p8.batch = 2;
  return {
      {"p1", "P = 1: one rank, no communication", 20, false, false, [] { return correctness(spec_of(1)); }},
      {"p2", "P = 2, full attention", 20, false, false, [] { return correctness(spec_of(2)); }},
      {"p3", "P = 3, full attention (from here a ring's direction and the origin its blocks are named by must agree)",
       20, false, false, [] { return correctness(spec_of(3)); }, 2},
      {"p4-causal", "P = 4, causal, contiguous layout (mask by global position)", 20, false, false,
       [] { return correctness(spec_of(4, true)); }, 2},
      {"p5-zigzag", "P = 5, causal, zig-zag layout (positions are not contiguous)", 20, false, false,
       [] { return correctness(spec_of(5, true, LayoutKind::zigzag)); }, 2},
      {"p8", "P = 8, batch 2, full attention", 30, false, false, [p8] { return correctness(p8); }},
      {"gqa", "P = 4, causal, GQA (4 query heads share 1 K/V head)", 20, false, false,
       [gqa] { return correctness(gqa); }, 2},
      {"empty-rows", "merge_into on rows that see no key on one side or both (lse = -inf): no NaN", 20, false, false,
       empty_rows},
      {"uses-messages",
       "P = 3: each rank computes with the K/V blocks it received (altered in transit, they change the "
       "result)",
       20, false, false, [] { return lab::uses_received_blocks([] { return correctness(spec_of(3)); }, 3, 3); }},
      {"rendezvous", "P = 4 with rendezvous sends (a blocking send waits for its receive): no deadlock", 20, false,
       false, [] { return correctness(spec_of(4), SendMode::rendezvous); }},
      {"perf-traffic", "performance: each rank sends exactly P - 1 K/V blocks", 20, true, false,
       [] { return performance(false); }},
      {"perf-overlap", "performance: the next block's transfer is posted before, and waited after, each compute", 20,
       true, false, [] { return performance(true); }},
  };
}

}  // namespace ringlab::lab
