// Lab 08's hidden tests: the student's window_hops against the plan's hop count, visible against
// the library's mask, and ring_forward_window on P virtual ranks (contiguous layout, causal, a
// sliding window, packed documents) against exact float64 attention under the same mask.
//
// block_mask and block_attention are defined here, so every block the student computes is logged
// with the rank that computed it: whose K and V it was (bitwise, against every rank's original
// block), and the mask it was computed under. Against the library's mask that names the first
// diverging (rank, step, block): a pair the mask must hide that the student's mask shows (across
// a document boundary, in the future, outside the window) or the other way round, a block
// computed twice, a block some query sees that was never computed (a ring that stops short). The
// traffic criterion counts the K/V bytes each rank sent against the hops the plan's ring makes
// under the same mask (ring_hops): a ring that goes all the way round is right but wasteful.
// Every call into the student's code (window_hops and visible on all their cases at once, the ring
// with the block log) goes through lab::across, so that the grader judges from a process that
// holds none of it.
// Sections: [truth] [provided] [diagnosis] [running the ring] [criteria]
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <stdexcept>

#include "exercises/labs/08-window-ring/lab.hpp"
#include "exercises/labs/common/harness.hpp"
#include "reference/exact_attention.hpp"
#include "reference/mask.hpp"
#include "sim/plan/plan.hpp"
#include "sim/ranks/world.hpp"

namespace ringlab::lab08 {

namespace {

using lab::CriterionResult;
using lab::Divergence;

constexpr int64_t kTokensPerRank = 8;
constexpr int64_t kDim = 16;

// ---- [truth] -----------------------------------------------------------------------------------

std::vector<int64_t> starts_of(const std::vector<int64_t>& lengths, int64_t seq) {
  std::vector<int64_t> starts{0};
  for (int64_t length : lengths) starts.push_back(starts.back() + length);
  if (lengths.empty()) starts.push_back(seq);
  return starts;
}

// The library's mask for the lab's: causal, the window, the documents.
Mask truth_of(int64_t window, const std::vector<int64_t>& lengths) { return Mask(true, window, lengths); }

// The hops the plan's ring makes under this mask, contiguous layout: the farthest block any rank needs.
int64_t plan_hops(int64_t ranks, int64_t tokens_per_rank, int64_t window, const std::vector<int64_t>& lengths) {
  PlanSpec spec;
  spec.algo = Algorithm::ring;
  spec.layout = LayoutKind::contiguous;
  spec.ranks = ranks;
  spec.dims.batch = 1, spec.dims.seq = ranks * tokens_per_rank, spec.dims.heads = 1, spec.dims.kv_heads = 1;
  spec.dims.dim = kDim;
  spec.causal = true;
  spec.window = window;
  spec.documents = lengths;
  return ring_hops(spec);
}

// One pair on which a mask disagrees with the truth, said as a student can act on it.
struct PairError {
  std::string what, hint;
};

// "1 token", "3 tokens".
std::string count(int64_t n, const std::string& word) { return std::to_string(n) + " " + word + (n == 1 ? "" : "s"); }

PairError pair_error(const Mask& truth, int64_t query, int64_t key, bool shown) {
  const std::string pair = "query " + std::to_string(query) + " and key " + std::to_string(key);
  const std::string window = "a window of " + count(truth.window(), "key");
  if (!shown) {
    return {"the mask hides " + pair + ", which see each other (same document, key <= query, " +
                (truth.window() > 0 ? count(query - key, "token") + " back, within " + window + ")"
                                    : std::string("no window)")),
            "a window of W keys counts the query's own: it shows query - W < key <= query"};
  }
  if (truth.document_of(query) != truth.document_of(key)) {
    return {"the mask shows " + pair + ", which lie in different documents (" + std::to_string(truth.document_of(key)) +
                " and " + std::to_string(truth.document_of(query)) + "): it crosses a document boundary",
            "a key of another document is never visible: check that no document starts after the key and at or "
            "before the query (mask.document_starts)"};
  }
  if (key > query) return {"the mask shows " + pair + ": a key after its query", "the mask is causal: key <= query"};
  return {"the mask shows " + pair + ", " + count(query - key, "token") + " apart: outside " + window,
          "a window of W keys reaches W - 1 tokens back: hide the key when query - key >= W"};
}

// ---- session: the criterion being run, one per process -----------------------------------------

struct BlockCall {
  int64_t origin_k = -1, origin_v = -1;  // whose K and V (bitwise), -1 = nobody's
  BlockMask mask;
};

template <class Ar>
void fields(Ar& ar, BlockCall& c) {
  ar(c.origin_k, c.origin_v, c.mask.q_pos, c.mask.k_pos, c.mask.visible);
  if (c.mask.visible.size() != c.mask.q_pos.size() * c.mask.k_pos.size())  // block_attention refuses such a mask
    throw lab::wire::WireError("a block mask of " + std::to_string(c.mask.visible.size()) + " pairs for " +
                               std::to_string(c.mask.q_pos.size()) + " queries and " +
                               std::to_string(c.mask.k_pos.size()) + " keys");
}

// The message when the student's side sent fewer answers than the criterion asked for, without a wrong one.
std::string short_answers(const char* function, size_t got) {
  return "the student's process sent " + std::to_string(got) + " answers of " + function +
         " and stopped before a wrong one";
}

struct Session {
  std::vector<RankInputs> inputs;
  Mask truth;
  int64_t hops = 0;                           // the plan's hops under this mask
  std::vector<std::vector<BlockCall>> calls;  // [rank]
};

Session* g_session = nullptr;
thread_local int tl_rank = -1;

bool same_bits(const Tensor<float>& a, const Tensor<float>& b) {
  return a.shape() == b.shape() && std::memcmp(a.data(), b.data(), sizeof(float) * static_cast<size_t>(a.size())) == 0;
}

void record(const Tensor<float>& k, const Tensor<float>& v, const BlockMask& mask) {
  if (!g_session || tl_rank < 0) return;
  BlockCall call;
  for (size_t r = 0; r < g_session->inputs.size(); ++r) {
    if (call.origin_k < 0 && same_bits(k, g_session->inputs[r].k)) call.origin_k = static_cast<int64_t>(r);
    if (call.origin_v < 0 && same_bits(v, g_session->inputs[r].v)) call.origin_v = static_cast<int64_t>(r);
  }
  call.mask = mask;
  g_session->calls[static_cast<size_t>(tl_rank)].push_back(std::move(call));
}

}  // namespace

// ---- [provided] --------------------------------------------------------------------------------

BlockMask block_mask(const WindowMask& mask, std::span<const int64_t> q_pos, std::span<const int64_t> k_pos) {
  BlockMask block{{q_pos.begin(), q_pos.end()}, {k_pos.begin(), k_pos.end()}, {}};
  block.visible.reserve(q_pos.size() * k_pos.size());
  for (int64_t query : q_pos)
    for (int64_t key : k_pos) block.visible.push_back(visible(mask, query, key) ? 1 : 0);
  return block;
}

AttentionOutput<float> block_attention(const Tensor<float>& q, const Tensor<float>& k, const Tensor<float>& v,
                                       const BlockMask& mask) {
  if (q.rank() != 4 || k.rank() != 4 || v.shape() != k.shape() || k.dim(0) != q.dim(0) || k.dim(3) != q.dim(3) ||
      q.dim(2) % std::max<int64_t>(1, k.dim(2)) != 0) {
    throw std::invalid_argument("block_attention: q " + shape_string(q.shape()) + ", k " + shape_string(k.shape()) +
                                ", v " + shape_string(v.shape()) +
                                " are not (B, n, H, D), (B, m, HKV, D), (B, m, HKV, D)");
  }
  const int64_t B = q.dim(0), n = q.dim(1), H = q.dim(2), D = q.dim(3), m = k.dim(1), group = H / k.dim(2);
  if (static_cast<int64_t>(mask.q_pos.size()) != n || static_cast<int64_t>(mask.k_pos.size()) != m ||
      static_cast<int64_t>(mask.visible.size()) != n * m) {
    throw std::invalid_argument("block_attention: a mask for " + std::to_string(mask.q_pos.size()) + " queries and " +
                                std::to_string(mask.k_pos.size()) + " keys (" + std::to_string(mask.visible.size()) +
                                " pairs) on a block of " + std::to_string(n) + " queries and " + std::to_string(m) +
                                " keys");
  }
  record(k, v, mask);
  constexpr double kMinusInf = -std::numeric_limits<double>::infinity();
  AttentionOutput<float> part{Tensor<float>(q.shape()),
                              Tensor<float>({B, H, n}, -std::numeric_limits<float>::infinity())};
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  std::vector<double> score(static_cast<size_t>(m)), out(static_cast<size_t>(D));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < n; ++i) {
        const int64_t kv_head = h / group;
        double max = kMinusInf;
        for (int64_t j = 0; j < m; ++j) {
          if (!mask.visible[static_cast<size_t>(i * m + j)]) continue;
          double dot = 0;
          for (int64_t d = 0; d < D; ++d) dot += double(q(b, i, h, d)) * double(k(b, j, kv_head, d));
          score[static_cast<size_t>(j)] = scale * dot;
          max = std::max(max, scale * dot);
        }
        if (max == kMinusInf) continue;  // no visible key: out 0, lse -inf
        double sum = 0;
        std::fill(out.begin(), out.end(), 0.0);
        for (int64_t j = 0; j < m; ++j) {
          if (!mask.visible[static_cast<size_t>(i * m + j)]) continue;
          const double weight = std::exp(score[static_cast<size_t>(j)] - max);
          sum += weight;
          for (int64_t d = 0; d < D; ++d) out[static_cast<size_t>(d)] += weight * double(v(b, j, kv_head, d));
        }
        for (int64_t d = 0; d < D; ++d) part.out(b, i, h, d) = static_cast<float>(out[static_cast<size_t>(d)] / sum);
        part.lse(b, h, i) = static_cast<float>(max + std::log(sum));
      }
  return part;
}

void merge_into(AttentionOutput<float>& acc, const AttentionOutput<float>& part) {
  const int64_t B = acc.out.dim(0), n = acc.out.dim(1), H = acc.out.dim(2), D = acc.out.dim(3);
  const float minus_inf = -std::numeric_limits<float>::infinity();
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < n; ++i) {
        const float lse_b = part.lse(b, h, i);
        if (lse_b == minus_inf) continue;
        float& lse_a = acc.lse(b, h, i);
        const float top = std::max(lse_a, lse_b);
        const float lse = top + std::log(std::exp(lse_a - top) + std::exp(lse_b - top));
        const float wa = std::exp(lse_a - lse), wb = std::exp(lse_b - lse);
        for (int64_t d = 0; d < D; ++d) acc.out(b, i, h, d) = wa * acc.out(b, i, h, d) + wb * part.out(b, i, h, d);
        lse_a = lse;
      }
}

namespace {

// ---- [diagnosis] -------------------------------------------------------------------------------

// Reads the block log of every rank: each block computed at most once, on matching K and V, under
// the mask of its own positions; and, once the ring finished, every block the rank's queries see
// computed.
void diagnose(const Session& s, bool finished, CriterionResult& result) {
  const int64_t P = static_cast<int64_t>(s.inputs.size());
  const auto& positions = s.inputs[0].positions;
  auto found = [&](Divergence d, const std::string& hint) {
    result.diverge(std::move(d));
    if (result.hint.empty()) result.hint = hint;
  };
  for (int64_t r = 0; r < P; ++r) {
    const auto& mine = positions[static_cast<size_t>(r)];
    const auto& calls = s.calls[static_cast<size_t>(r)];
    std::vector<int64_t> first_step(static_cast<size_t>(P), -1);
    for (size_t t = 0; t < calls.size(); ++t) {
      const BlockCall& c = calls[t];
      const int64_t step = static_cast<int64_t>(t), b = c.origin_k;
      if (b < 0) {
        found({r, step, -1, "the K passed to block_attention is not any rank's K block"},
              "complete the receive (wait) before computing on the block it brings");
        continue;
      }
      const auto& theirs = positions[static_cast<size_t>(b)];
      if (c.origin_v != b) {
        found({r, step, b, "K of block " + std::to_string(b) + " with the V of another block"},
              "K and V travel together: send, receive and swap both");
      } else if (first_step[static_cast<size_t>(b)] >= 0) {
        found({r, step, b,
               "block " + std::to_string(b) + " computed a second time (first at step " +
                   std::to_string(first_step[static_cast<size_t>(b)]) + ")"},
              "the received block replaces the one just computed before the next step");
      } else if (c.mask.q_pos != mine || c.mask.k_pos != theirs) {
        found({r, step, b,
               "block " + std::to_string(b) + " was masked for positions that are not " +
                   (c.mask.q_pos != mine ? "this rank's queries'" : "its keys'")},
              "block_mask(in.mask, in.positions[rank], in.positions[origin]), origin = rank - step (mod P)");
      } else {
        const size_t keys = theirs.size();
        for (size_t i = 0; i < mine.size(); ++i) {
          size_t j = 0;
          while (j < keys && (c.mask.visible[i * keys + j] != 0) == s.truth.visible(mine[i], theirs[j])) ++j;
          if (j == keys) continue;
          const PairError e = pair_error(s.truth, mine[i], theirs[j], c.mask.visible[i * keys + j] != 0);
          found({r, step, b, e.what}, e.hint);
          break;
        }
      }
      if (first_step[static_cast<size_t>(b)] < 0) first_step[static_cast<size_t>(b)] = step;
    }
    if (!finished) continue;
    for (int64_t hop = 1; hop < P; ++hop) {
      const int64_t b = ((r - hop) % P + P) % P;
      const int64_t seen = s.truth.pairs(mine, positions[static_cast<size_t>(b)]);
      if (first_step[static_cast<size_t>(b)] >= 0 || seen == 0) continue;
      found({r, static_cast<int64_t>(calls.size()), b,
             "block " + std::to_string(b) + " (" + std::to_string(hop) + " hop" + (hop > 1 ? "s" : "") +
                 " back) was never computed, but rank " + std::to_string(r) + "'s queries see " + std::to_string(seen) +
                 " of its (query, key) pairs; the loop made " + std::to_string(calls.size()) + " block call" +
                 (calls.size() == 1 ? "" : "s")},
            "this window needs " + std::to_string(s.hops) + " hop" + (s.hops == 1 ? "" : "s") + " and so " +
                std::to_string(s.hops + 1) +
                " steps: the own block at step 0, then one received block per hop (ceil((W - 1) / n) hops, "
                "rounded up)");
      break;
    }
  }
}

// ---- [running the ring] ------------------------------------------------------------------------

struct Case {
  int64_t ranks = 4;
  int64_t window = 0;
  std::vector<int64_t> documents;  // lengths; empty = one document
  int64_t batch = 1, heads = 2, kv_heads = 2;
  SendMode mode = SendMode::eager;
};

struct Run {
  std::unique_ptr<lab::Problem> problem;
  Session session;
  RunReport report;
  CriterionResult result;
};

Run run_window(const Case& c) {
  lab::ProblemSpec spec;
  spec.ranks = c.ranks, spec.tokens_per_rank = kTokensPerRank, spec.causal = true;
  spec.batch = c.batch, spec.heads = c.heads, spec.kv_heads = c.kv_heads, spec.dim = kDim;
  spec.seed = 800 + static_cast<uint64_t>(c.ranks * 131 + c.window);
  Run run;
  run.problem = std::make_unique<lab::Problem>(lab::make_problem(spec));
  lab::Problem& p = *run.problem;
  Session& s = run.session;
  s.truth = truth_of(c.window, c.documents);
  s.hops = plan_hops(c.ranks, kTokensPerRank, c.window, c.documents);
  p.reference = exact_attention(p.inputs64.q, p.inputs64.k, p.inputs64.v, s.truth);  // the lab's mask, float64
  const WindowMask mask{c.window, starts_of(c.documents, p.dims.seq)};
  for (int64_t r = 0; r < c.ranks; ++r) {
    const auto& pos = p.positions[static_cast<size_t>(r)];
    s.inputs.push_back({lab::rows_of(p.inputs.q, pos), lab::rows_of(p.inputs.k, pos), lab::rows_of(p.inputs.v, pos),
                        p.positions, mask});
  }
  s.calls.resize(static_cast<size_t>(c.ranks));
  std::vector<AttentionOutput<float>> outputs(static_cast<size_t>(c.ranks));
  lab::across(
      "ring_forward_window",
      [&] {
        g_session = &s;
        run.report = lab::run_ranks(c.ranks, c.mode, [&](Communicator& comm) {
          tl_rank = comm.rank();
          outputs[static_cast<size_t>(comm.rank())] =
              ring_forward_window(comm, s.inputs[static_cast<size_t>(comm.rank())]);
        });
        g_session = nullptr;
      },
      run.report, outputs, s.calls);
  const auto P = static_cast<size_t>(c.ranks);
  lab::refuse_unless(run.report.counters.size() == P && outputs.size() == P && s.calls.size() == P,
                     "ring_forward_window", "not one report, output and block log per rank");
  for (const auto& calls : s.calls)
    for (const BlockCall& call : calls)
      lab::refuse_unless(
          call.origin_k >= -1 && call.origin_k < c.ranks && call.origin_v >= -1 && call.origin_v < c.ranks,
          "ring_forward_window", "a block's origin is not a rank");
  CriterionResult& result = run.result;
  diagnose(s, run.report.ok(), result);
  if (lab::record_run_failure(run.report, result)) {
    if (run.report.deadlock)
      for (const RankWaitReport& w : run.report.deadlock->ranks)
        if (w.state == RankState::blocked) result.diverge({w.rank, w.step, -1, w.describe()});
    return run;
  }
  bool outputs_ok = true;
  for (int64_t r = 0; r < c.ranks; ++r) {
    const auto& pos = p.positions[static_cast<size_t>(r)];
    const std::string where = "rank " + std::to_string(r);
    outputs_ok &= lab::compare_tensor(result, "out", outputs[static_cast<size_t>(r)].out,
                                      lab::rows_of(p.reference.out, pos), fp32_tolerance("out"), where);
    outputs_ok &= lab::compare_tensor(result, "lse", outputs[static_cast<size_t>(r)].lse,
                                      lab::lse_rows_of(p.reference.lse, pos), fp32_tolerance("lse"), where);
  }
  if (!outputs_ok || result.divergence) result.passed = false;
  if (!result.message.empty() && result.passed) result.message.clear();
  if (!result.passed && result.message.empty()) result.fail("the ring's blocks do not match the mask");
  return run;
}

CriterionResult correctness(const Case& c) { return run_window(c).result; }

// ---- [criteria] --------------------------------------------------------------------------------

// One question hops_criterion asks, and the plan's answer.
struct HopsCase {
  int64_t ranks = 1, n = 1, window = 0, expected = 0;
};

std::vector<HopsCase> hops_cases() {
  std::vector<HopsCase> cases;
  for (int64_t ranks : {1, 2, 3, 4, 5, 8})
    for (int64_t n : {1, 3, 8}) {
      std::vector<int64_t> windows{0,     1,         2,         3,         n - 1,        n, n + 1, 2 * n - 1,
                                   2 * n, 2 * n + 1, 3 * n + 2, ranks * n, ranks * n + 7};
      for (int64_t window : windows)
        if (window >= 0) cases.push_back({ranks, n, window, plan_hops(ranks, n, window, {})});
    }
  return cases;
}

CriterionResult hops_criterion() {
  CriterionResult result;
  const std::vector<HopsCase> cases = hops_cases();
  // The student's answers, in order, up to and including the first wrong one (the criterion stops
  // there), sent across as one vector.
  std::vector<int64_t> answers;
  lab::across(
      "window_hops",
      [&] {
        for (const HopsCase& c : cases) {
          answers.push_back(window_hops(c.ranks, c.n, c.window));
          if (answers.back() != c.expected) break;
        }
      },
      answers);
  for (size_t i = 0; i < cases.size(); ++i) {
    if (i >= answers.size()) {
      result.fail(short_answers("window_hops", answers.size()));
      return result;
    }
    const int64_t ranks = cases[i].ranks, n = cases[i].n, window = cases[i].window, expected = cases[i].expected;
    const int64_t got = answers[i];
    if (got == expected) continue;
    result.fail("P = " + std::to_string(ranks) + ", n = " + std::to_string(n) + ", W = " + std::to_string(window) +
                ": window_hops gave " + std::to_string(got) + ", the window needs " + std::to_string(expected) +
                " hop" + (expected == 1 ? "" : "s"));
    if (window == 0)
      result.hint = "no window: a causal ring needs every block, P - 1 hops";
    else if (got < 0)
      result.hint = "a hop count is never negative: a window of 1 key sees only the query's own, 0 hops";
    else if (got > ranks - 1)
      result.hint = "a ring of P ranks never needs more than P - 1 hops";
    else if (window > 1 && got == std::min(ranks - 1, (window + n - 1) / n))
      result.hint = "a window of W keys counts the query's own: it reaches W - 1 tokens back, not W";
    else if (got + 1 == expected)
      result.hint = "round up: a window that reaches into part of a block needs the whole block";
    else
      result.hint = "the first query of a block reaches W - 1 tokens back: ceil((W - 1) / n) blocks, at most P - 1";
    return result;
  }
  return result;
}

// One mask mask_criterion asks about: every (query, key) pair of a sequence of `seq` tokens.
struct MaskCase {
  int64_t seq = 0, window = 0;
  std::vector<int64_t> lengths;  // empty = one document
};

// One document first (the window alone), then boundaries inside and at the window's reach, then
// random documents and windows.
std::vector<MaskCase> mask_cases() {
  std::vector<MaskCase> cases;
  for (int64_t window : {0, 1, 2, 5, 24}) cases.push_back({24, window, {}});
  for (int64_t window : {0, 3, 7})
    for (const std::vector<int64_t>& lengths : std::vector<std::vector<int64_t>>{{5, 14, 5}, {1, 1, 22}, {12, 12}})
      cases.push_back({24, window, lengths});
  std::mt19937_64 random(81);
  for (int trial = 0; trial < 40; ++trial) {
    const int64_t seq = 16 + static_cast<int64_t>(random() % 17);
    std::vector<int64_t> lengths;
    for (int64_t left = seq; left > 0;) {
      const int64_t length = std::min<int64_t>(left, 1 + static_cast<int64_t>(random() % 9));
      lengths.push_back(length);
      left -= length;
    }
    const int64_t window = static_cast<int64_t>(random() % 12);
    cases.push_back({seq, window, std::move(lengths)});
  }
  return cases;
}

CriterionResult mask_criterion() {
  CriterionResult result;
  const std::vector<MaskCase> cases = mask_cases();
  // The student's answers for every pair of every case, query-major, up to and including the first
  // wrong one (the criterion stops there), sent across as one vector.
  std::vector<bool> answers;
  lab::across(
      "visible",
      [&] {
        for (const MaskCase& c : cases) {
          const Mask truth = truth_of(c.window, c.lengths);
          const WindowMask mask{c.window, starts_of(c.lengths, c.seq)};
          for (int64_t query = 0; query < c.seq; ++query)
            for (int64_t key = 0; key < c.seq; ++key) {
              answers.push_back(visible(mask, query, key));
              if (answers.back() != truth.visible(query, key)) return;
            }
        }
      },
      answers);
  size_t at = 0;
  for (const MaskCase& c : cases) {
    const Mask truth = truth_of(c.window, c.lengths);
    for (int64_t query = 0; query < c.seq; ++query)
      for (int64_t key = 0; key < c.seq; ++key, ++at) {
        if (at >= answers.size()) {
          result.fail(short_answers("visible", answers.size()));
          return result;
        }
        const bool got = answers[at];
        if (got == truth.visible(query, key)) continue;
        const PairError e = pair_error(truth, query, key, got);
        result.fail("S = " + std::to_string(c.seq) + ", W = " + std::to_string(c.window) + ", " +
                    (c.lengths.empty() ? std::string("one document") : "documents " + documents_string(c.lengths)) +
                    ": " + e.what);
        result.hint = e.hint;
        return result;
      }
  }
  return result;
}

CriterionResult traffic_criterion() {
  const Case c{8, 20, {40, 24}};
  Run run = run_window(c);
  CriterionResult result;
  if (!run.result.passed) {
    result.fail("not correct on this problem (P = 8): " + run.result.message);
    return result;
  }
  const int64_t P = c.ranks;
  const int64_t hops = plan_hops(P, kTokensPerRank, c.window, c.documents);
  const RankInputs& in0 = run.session.inputs[0];
  const int64_t block_bytes = (in0.k.size() + in0.v.size()) * static_cast<int64_t>(sizeof(float));
  for (int64_t r = 0; r < P; ++r) {
    const int64_t sent = run.report.counters[static_cast<size_t>(r)].bytes_sent;
    if (sent == hops * block_bytes) continue;
    const std::string blocks = sent % block_bytes == 0
                                   ? std::to_string(sent / block_bytes)
                                   : std::to_string(static_cast<double>(sent) / static_cast<double>(block_bytes));
    result.fail("rank " + std::to_string(r) + " sent " + std::to_string(sent) + " bytes (" + blocks +
                " K/V blocks); under this mask (W = " + std::to_string(c.window) +
                ", n = " + std::to_string(kTokensPerRank) + ") the ring needs " + std::to_string(hops) + " hops, " +
                std::to_string(hops) + " K/V blocks of " + std::to_string(block_bytes) + " bytes per rank, of the " +
                std::to_string(P - 1) + " a full ring sends");
    if (sent > hops * block_bytes) {
      result.divergence =
          Divergence{r, hops, ((r - hops) % P + P) % P,
                     "passed a block on for hop " + std::to_string(hops + 1) + ", which no rank's window reaches"};
      result.hint = "a block further back than the window is masked for every query: stop after window_hops hops";
    } else {
      result.hint = "send each block once per hop, the window's hops and no fewer";
    }
    return result;
  }
  return result;
}

}  // namespace

}  // namespace ringlab::lab08

namespace ringlab::lab {

const char* lab_name() { return "08-window-ring"; }

// Points (the last field): the two things this lab is about - the hop count and the mask - and
// the rings where a wrong one shows count 2.
std::vector<Criterion> lab_criteria() {
  using namespace ringlab::lab08;
  return {
      {"hops", "window_hops: the hops a causal window needs, against the plan's, P = 1..8", 20, false, false,
       hops_criterion, 2},
      {"mask", "visible: causal, window and documents, against the library's mask on every pair", 20, false, false,
       mask_criterion, 2},
      {"p3-window", "P = 3, W = 6, one document: 1 hop of 2", 20, false, false,
       [] {
         return correctness({3, 6, {}});
       },
       2},
      {"p4-docs", "P = 4, W = 12, documents 5,14,9,4: boundaries inside the window", 20, false, false,
       [] {
         return correctness({4, 12, {5, 14, 9, 4}});
       },
       2},
      {"p5-wide", "P = 5, W = 100 > S: the window covers the whole ring (P - 1 hops)", 20, false, false,
       [] {
         return correctness({5, 100, {17, 23}});
       }},
      {"p8", "P = 8, W = 20, batch 2, GQA (4 query heads, 2 K/V heads), 4 documents", 30, false, false,
       [] {
         return correctness({8, 20, {3, 29, 12, 20}, 2, 4, 2});
       }},
      {"uses-messages",
       "P = 3: each rank computes with the K/V blocks it received (altered in transit, they change the result)", 20,
       false, false,
       [] {
         return lab::uses_received_blocks([] { return correctness({3, 6, {}}); }, 3, 3);
       }},
      {"rendezvous", "P = 4 with rendezvous sends (a blocking send waits for its receive): no deadlock", 20, false,
       false,
       [] {
         return correctness({4, 12, {10, 22}, 1, 2, 2, SendMode::rendezvous});
       }},
      {"perf-traffic", "performance: each rank sends the K/V blocks of the window's hops, no more (P = 8, W = 20)", 20,
       true, false, traffic_criterion, 2},
  };
}

}  // namespace ringlab::lab
