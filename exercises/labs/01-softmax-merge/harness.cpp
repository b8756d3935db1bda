// Lab 01's hidden tests: the student's chunk_state, merge and finalize, each checked on its own
// (the other two taken from reference/softmax_state.hpp) and then together, against exact
// attention in float64 — over P = 2, 3, 5 and 8 chunks, in every grouping and order.
// Judged from outside: every call into the student's code goes through a criterion's lab::Calls, which
// records what the call produced where the student's code runs and replays it where the judge runs
// (all of a criterion's calls cross in one lab::across).
// Sections: [problems] [checks] [criteria]
#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>
#include <random>
#include <utility>

#include "exercises/labs/01-softmax-merge/lab.hpp"
#include "exercises/labs/common/harness.hpp"
#include "reference/exact_attention.hpp"
#include "reference/inputs.hpp"

namespace ringlab {

// A state crosses field by field; a student's state of the wrong shape crosses as it is, and the
// judge's shape check reports it.
template <class Ar, class T>
void fields(Ar& ar, SoftmaxState<T>& s) {
  ar(s.rows, s.width, s.max, s.sum, s.out);
}

}  // namespace ringlab

namespace ringlab::lab01 {

namespace {

using lab::CriterionResult;

// ---- [problems] --------------------------------------------------------------------------------

// `rows` queries against keys cut into chunks; visibility by position (causal) or all visible.
struct Chunks {
  int64_t rows = 6, dim = 8;
  std::vector<float> q;                       // rows x dim
  std::vector<std::vector<float>> k, v;       // [chunk] keys x dim
  std::vector<std::vector<uint8_t>> visible;  // [chunk] rows x keys
  std::vector<std::vector<int64_t>> k_pos;    // [chunk]
  std::vector<int64_t> q_pos;
  AttentionOutput<double> exact;  // out (1, rows, 1, dim), lse (1, 1, rows)
  double q_scale = 1;             // the scale applied to q (large-scores)
};

// Chunks of `keys` keys each. causal: queries sit at positions spread over the keys, so some
// chunks are fully hidden from some rows; `hidden_chunk` >= 0 makes that chunk visible to no row.
Chunks make_chunks(int64_t chunks, int64_t keys, bool causal, uint64_t seed, double q_scale = 1,
                   int64_t hidden_chunk = -1) {
  Chunks c;
  c.q_scale = q_scale;
  const int64_t total = chunks * keys;
  AttentionDims dims;
  dims.batch = 1, dims.seq = total, dims.heads = 1, dims.kv_heads = 1, dims.dim = c.dim;
  const AttentionInputs<float> x = make_inputs(dims, seed, false);
  c.q.assign(x.q.data(), x.q.data() + c.rows * c.dim);
  for (float& value : c.q) value = static_cast<float>(value * q_scale);
  // Key positions: chunk g holds positions g*keys .. ; the hidden chunk's keys go past every query.
  for (int64_t i = 0; i < c.rows; ++i) c.q_pos.push_back(causal ? (i + 1) * total / (c.rows + 1) : total);
  for (int64_t g = 0; g < chunks; ++g) {
    std::vector<int64_t> pos;
    for (int64_t j = 0; j < keys; ++j) pos.push_back(g == hidden_chunk ? total + 1 + j : g * keys + j);
    c.k.emplace_back(x.k.data() + g * keys * c.dim, x.k.data() + (g + 1) * keys * c.dim);
    c.v.emplace_back(x.v.data() + g * keys * c.dim, x.v.data() + (g + 1) * keys * c.dim);
    std::vector<uint8_t> vis(static_cast<size_t>(c.rows * keys));
    for (int64_t i = 0; i < c.rows; ++i)
      for (int64_t j = 0; j < keys; ++j)
        vis[static_cast<size_t>(i * keys + j)] = pos[static_cast<size_t>(j)] <= c.q_pos[static_cast<size_t>(i)];
    c.visible.push_back(std::move(vis));
    c.k_pos.push_back(std::move(pos));
  }
  // The oracle over all keys at once, masked by the same positions.
  Tensor<double> q({1, c.rows, 1, c.dim}), k({1, total, 1, c.dim}), v({1, total, 1, c.dim});
  std::vector<int64_t> all_k_pos;
  for (int64_t i = 0; i < c.rows * c.dim; ++i) q[i] = c.q[static_cast<size_t>(i)];
  for (int64_t g = 0; g < chunks; ++g) {
    for (int64_t i = 0; i < keys * c.dim; ++i) {
      k[g * keys * c.dim + i] = c.k[static_cast<size_t>(g)][static_cast<size_t>(i)];
      v[g * keys * c.dim + i] = c.v[static_cast<size_t>(g)][static_cast<size_t>(i)];
    }
    all_k_pos.insert(all_k_pos.end(), c.k_pos[static_cast<size_t>(g)].begin(), c.k_pos[static_cast<size_t>(g)].end());
  }
  c.exact = exact_attention(q, k, v, MaskKind::causal, c.q_pos, all_k_pos);
  return c;
}

int64_t keys_of(const Chunks& c, size_t g) { return static_cast<int64_t>(c.k[g].size()) / c.dim; }

// The library's state of chunk g (the oracle's building block).
State library_state(const Chunks& c, size_t g) {
  const int64_t keys = keys_of(c, g);
  State s = State::empty(c.rows, c.dim);
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.dim));
  for (int64_t i = 0; i < c.rows; ++i) {
    std::vector<float> scores(static_cast<size_t>(keys));
    for (int64_t j = 0; j < keys; ++j) {
      float dot = 0;
      for (int64_t d = 0; d < c.dim; ++d)
        dot += c.q[static_cast<size_t>(i * c.dim + d)] * c.k[g][static_cast<size_t>(j * c.dim + d)];
      scores[static_cast<size_t>(j)] = c.visible[g][static_cast<size_t>(i * keys + j)] ? dot * scale : -INFINITY;
    }
    const State row = softmax_state_of(scores, c.v[g], c.dim);
    s.merge_row(i, row, 0);
  }
  return s;
}

State student_state(lab::Calls& calls, const Chunks& c, size_t g) {
  return calls.value<State>(
      [&] { return chunk_state(c.q, c.k[g], c.v[g], c.rows, keys_of(c, g), c.dim, c.visible[g]); });
}

State student_merge(lab::Calls& calls, const State& a, const State& b) {
  return calls.value<State>([&] { return merge(a, b); });
}

// ---- [checks] ----------------------------------------------------------------------------------

bool shape_ok(const State& s, const Chunks& c, const std::string& what, CriterionResult& result) {
  if (s.rows == c.rows && s.width == c.dim && static_cast<int64_t>(s.max.size()) == c.rows &&
      static_cast<int64_t>(s.sum.size()) == c.rows && static_cast<int64_t>(s.out.size()) == c.rows * c.dim)
    return true;
  result.fail(what + " returned a state of " + std::to_string(s.rows) + " rows x " + std::to_string(s.width) +
              " with arrays of " + std::to_string(s.max.size()) + ", " + std::to_string(s.sum.size()) + ", " +
              std::to_string(s.out.size()) + "; expected " + std::to_string(c.rows) + " x " + std::to_string(c.dim));
  return false;
}

// Finalizes with the library (or the student's finalize, through `student_finalize`) and compares
// with the oracle.
bool check_state(const State& s, const Chunks& c, const std::string& what, CriterionResult& result,
                 lab::Calls* student_finalize = nullptr) {
  if (!shape_ok(s, c, what, result)) return false;
  std::vector<float> out, lse;
  if (student_finalize) {
    (*student_finalize)([&] { finalize(s, out, lse); }, out, lse);
  } else {
    s.finalize(out, lse);
  }
  bool ok = lab::compare_into(result, "out", out, c.exact.out.span(), c.exact.out.shape(), fp32_tolerance("out"), what);
  ok &= lab::compare_into(result, "lse", lse, c.exact.lse.span(), c.exact.lse.shape(),
                          {fp32_tolerance("lse").abs * c.q_scale, fp32_tolerance("lse").rel}, what);
  return ok;
}

State fold(lab::Calls& calls, const std::vector<State>& states, const std::vector<size_t>& order) {
  State acc = states[order.front()];
  for (size_t i = 1; i < order.size(); ++i) acc = student_merge(calls, acc, states[order[i]]);
  return acc;
}

// Pairwise tree: ((0 1)(2 3))((4 5)(6 7)) ...
State tree(lab::Calls& calls, std::vector<State> level) {
  while (level.size() > 1) {
    std::vector<State> next;
    for (size_t i = 0; i + 1 < level.size(); i += 2) next.push_back(student_merge(calls, level[i], level[i + 1]));
    if (level.size() % 2) next.push_back(level.back());
    level = std::move(next);
  }
  return level.front();
}

// ---- [criteria] --------------------------------------------------------------------------------

CriterionResult finalize_criterion(lab::Calls& calls) {
  CriterionResult result;
  const Chunks c = make_chunks(3, 5, true, 101);
  State s = library_state(c, 0);
  for (size_t g = 1; g < 3; ++g) s.merge(library_state(c, g));
  check_state(s, c, "finalize of a merged state", result, &calls);
  // A row that saw nothing: out 0, lse -inf.
  const State empty = State::empty(c.rows, c.dim);
  std::vector<float> out, lse;
  calls([&] { finalize(empty, out, lse); }, out, lse);
  if (out.size() < lse.size() * static_cast<size_t>(c.dim)) {
    result.fail("finalize of an empty state gives " + std::to_string(out.size()) + " outputs for " +
                std::to_string(lse.size()) + " rows; expected " + std::to_string(c.dim) + " per row");
    return result;
  }
  for (size_t i = 0; i < lse.size(); ++i)
    if (!(std::isinf(lse[i]) && lse[i] < 0) || std::isnan(out[i * static_cast<size_t>(c.dim)])) {
      result.fail("finalize of an empty row gives lse " + std::to_string(lse[i]) + " and out " +
                  std::to_string(out[i * static_cast<size_t>(c.dim)]) + "; expected -inf and 0");
      result.hint = "a row with l = 0 saw no key: leave out at 0 and lse at -inf instead of dividing by l";
      break;
    }
  return result;
}

CriterionResult chunk_scale_criterion(lab::Calls& calls) {
  CriterionResult result;
  const Chunks c = make_chunks(1, 12, false, 102);
  if (check_state(student_state(calls, c, 0), c, "chunk_state of one chunk (full attention)", result)) return result;
  // Would it match without the 1/sqrt(D) scale? (q sqrt(D) with the scale = q without it.)
  const Chunks unscaled = make_chunks(1, 12, false, 102, std::sqrt(double(c.dim)));
  CriterionResult probe;
  if (check_state(student_state(calls, c, 0), unscaled, "probe", probe))
    result.hint = "your scores lack the 1/sqrt(D) scale (the book's erratum 3: the source's flash solution omits it)";
  else
    result.hint = "the state of a row is m = max score, l = sum exp(score - m), o = sum exp(score - m) v";
  return result;
}

CriterionResult chunk_mask_criterion(lab::Calls& calls) {
  CriterionResult result;
  const Chunks c = make_chunks(1, 12, true, 103);
  const Chunks hidden = make_chunks(2, 6, true, 104, 1, 1);  // chunk 1 visible to nobody
  check_state(student_state(calls, c, 0), c, "chunk_state with a causal mask", result);
  const State empty_rows = student_state(calls, hidden, 1);
  if (static_cast<int64_t>(std::min(empty_rows.max.size(), empty_rows.sum.size())) < hidden.rows) {
    shape_ok(empty_rows, hidden, "chunk_state of a chunk no row sees", result);
    return result;
  }
  for (int64_t i = 0; i < hidden.rows; ++i)
    if (!(empty_rows.max[static_cast<size_t>(i)] == -INFINITY) || empty_rows.sum[static_cast<size_t>(i)] != 0) {
      result.fail(
          "a row that sees no key of the chunk got m = " + std::to_string(empty_rows.max[static_cast<size_t>(i)]) +
          ", l = " + std::to_string(empty_rows.sum[static_cast<size_t>(i)]) + "; expected -inf and 0");
      result.hint = "skip masked keys entirely; a row with none left is the empty state";
      break;
    }
  return result;
}

CriterionResult merge_criterion(lab::Calls& calls, int64_t chunks, uint64_t seed) {
  CriterionResult result;
  const Chunks c = make_chunks(chunks, 5, true, seed);
  std::vector<State> states;
  for (size_t g = 0; g < static_cast<size_t>(chunks); ++g) states.push_back(library_state(c, g));
  std::vector<size_t> order(static_cast<size_t>(chunks));
  std::iota(order.begin(), order.end(), size_t{0});
  bool ok = check_state(fold(calls, states, order), c, "left fold ((c0 (+) c1) (+) c2 ...)", result);
  if (chunks >= 3) {
    // (A (+) B) (+) C against A (+) (B (+) C): both exact, and equal to each other.
    const State left = student_merge(calls, student_merge(calls, states[0], states[1]), states[2]);
    const State right = student_merge(calls, states[0], student_merge(calls, states[1], states[2]));
    if (chunks == 3) {
      ok &= check_state(left, c, "(A (+) B) (+) C", result);
      ok &= check_state(right, c, "A (+) (B (+) C)", result);
    }
    if (ok && shape_ok(left, c, "merge", result) && shape_ok(right, c, "merge", result)) {
      std::vector<float> lo, ll, ro, rl;
      left.finalize(lo, ll);
      right.finalize(ro, rl);
      std::vector<double> ro64(ro.begin(), ro.end());
      ok &= lab::compare_into(result, "out", lo, ro64, {1, c.rows, 1, c.dim}, {1e-6, 1e-5},
                              "(A (+) B) (+) C vs A (+) (B (+) C)");
    }
    // Any order, any grouping.
    std::mt19937 shuffle(static_cast<unsigned>(seed));
    for (int trial = 0; trial < 4 && ok; ++trial) {
      std::shuffle(order.begin(), order.end(), shuffle);
      ok &= check_state(fold(calls, states, order), c, "a shuffled order", result);
    }
    if (ok) check_state(tree(calls, states), c, "a pairwise tree", result);
  }
  if (!result.passed)
    result.hint = std::isinf(result.observed_error)
                      ? "NaN or inf in the result: a row both states left empty has m = -inf on both sides, and "
                        "exp(-inf - (-inf)) is NaN - keep such a row empty"
                      : "each state's l and o are relative to its own max: multiply them by exp(m_i - m) before adding";
  return result;
}

CriterionResult identity_criterion(lab::Calls& calls) {
  CriterionResult result;
  const Chunks c = make_chunks(2, 5, true, 105);
  const State x = library_state(c, 0);
  const State empty = State::empty(c.rows, c.dim);
  auto same_as_x = [&](const State& s, const std::string& what) {
    if (!shape_ok(s, c, what, result)) return;
    for (int64_t i = 0; i < c.rows; ++i) {
      const size_t r = static_cast<size_t>(i);
      const bool both_empty = x.max[r] == -INFINITY && s.max[r] == -INFINITY;
      const double lse_x = both_empty ? 0 : x.max[r] + std::log(x.sum[r]);
      const double lse_s = both_empty ? 0 : s.max[r] + std::log(s.sum[r]);
      if (std::isnan(s.sum[r]) || std::isnan(s.max[r]) || (!both_empty && std::fabs(lse_x - lse_s) > 1e-5)) {
        result.fail(what + ": row " + std::to_string(i) + " changed (m = " + std::to_string(s.max[r]) +
                    ", l = " + std::to_string(s.sum[r]) + "; expected m = " + std::to_string(x.max[r]) +
                    ", l = " + std::to_string(x.sum[r]) + ")");
        return;
      }
    }
  };
  same_as_x(student_merge(calls, empty, x), "empty (+) x");
  same_as_x(student_merge(calls, x, empty), "x (+) empty");
  const State both = student_merge(calls, empty, empty);
  if (shape_ok(both, c, "empty (+) empty", result))
    for (int64_t i = 0; i < c.rows; ++i)
      if (!(both.max[static_cast<size_t>(i)] == -INFINITY) || both.sum[static_cast<size_t>(i)] != 0 ||
          std::isnan(both.out[static_cast<size_t>(i * c.dim)])) {
        result.fail("empty (+) empty: row " + std::to_string(i) +
                    " is m = " + std::to_string(both.max[static_cast<size_t>(i)]) +
                    ", l = " + std::to_string(both.sum[static_cast<size_t>(i)]) +
                    ", o = " + std::to_string(both.out[static_cast<size_t>(i * c.dim)]) + "; expected -inf, 0, 0");
        break;
      }
  if (!result.passed)
    result.hint = "exp(m_a - m) with m_a = m = -inf is exp(NaN): when both rows are empty, the result is empty";
  return result;
}

// Scores in the hundreds through all three of the student's functions; on a failure, each
// function is probed alone (the other two from the library) and the hint names the first one that
// fails on its own: chunk_state (no max subtracted), merge (no rescale, or NaN), finalize.
CriterionResult large_scores_criterion(lab::Calls& calls) {
  CriterionResult result;
  const Chunks c = make_chunks(4, 5, true, 106, 60.0);  // scores in the hundreds
  std::vector<State> states, library;
  for (size_t g = 0; g < 4; ++g) {
    states.push_back(student_state(calls, c, g));
    library.push_back(library_state(c, g));
  }
  const State merged = fold(calls, states, {0, 1, 2, 3});
  if (check_state(merged, c, "chunks with scores in the hundreds", result, &calls)) return result;
  CriterionResult probe;
  // The library merges your states only if they have the problem's shape (else that is the fault).
  const bool shaped =
      std::all_of(states.begin(), states.end(), [&](const State& s) { return shape_ok(s, c, "probe", probe); });
  State chunks_alone = states[0];
  for (size_t g = 1; g < 4 && shaped; ++g) chunks_alone.merge(states[g]);
  if (!shaped || !check_state(chunks_alone, c, "probe", probe)) {
    result.hint = std::isinf(probe.observed_error)
                      ? "your chunk_state overflows: exp(score) is inf in float above about 88 - subtract the row's "
                        "max before exp"
                      : "your chunk_state is wrong here without overflowing: see criteria chunk-scale and chunk-mask";
    return result;
  }
  if (!check_state(fold(calls, library, {0, 1, 2, 3}), c, "probe", probe)) {
    result.hint =
        "your merge fails on these scores: each state's l and o are relative to its own max - multiply "
        "them by exp(m_i - m), with m the larger max, before adding";
    return result;
  }
  result.hint = "your finalize fails on these scores: out = o / l and lse = m + log l, with m the row's max";
  return result;
}

CriterionResult end_to_end_criterion(lab::Calls& calls, int64_t chunks, uint64_t seed) {
  CriterionResult result;
  const Chunks c = make_chunks(chunks, 4, true, seed);
  std::vector<State> states;
  for (size_t g = 0; g < static_cast<size_t>(chunks); ++g) states.push_back(student_state(calls, c, g));
  check_state(tree(calls, states), c, "your chunk_state, merge and finalize together", result, &calls);
  return result;
}

}  // namespace

}  // namespace ringlab::lab01

namespace ringlab::lab {

const char* lab_name() { return "01-softmax-merge"; }

std::vector<Criterion> lab_criteria() {
  using namespace ringlab::lab01;
  // Each criterion's calls into the student's code cross as one frame, named after the criterion.
  auto judged = [](const char* what, CriterionResult (*criterion)(lab::Calls&)) {
    return [what, criterion] { return lab::Calls::across(what, criterion); };
  };
  auto merges = [](const char* what, int64_t chunks, uint64_t seed) {
    return [=] {
      return lab::Calls::across(what, [=](lab::Calls& calls) { return merge_criterion(calls, chunks, seed); });
    };
  };
  return {
      {"finalize", "finalize: out = o / l, lse = m + log l; an empty row gives 0 and -inf", 20, false, false,
       judged("finalize", finalize_criterion)},
      {"chunk-scale", "chunk_state of one chunk: scores scaled by 1/sqrt(D)", 20, false, false,
       judged("chunk-scale", chunk_scale_criterion)},
      {"chunk-mask", "chunk_state under a causal mask, rows that see no key stay empty", 20, false, false,
       judged("chunk-mask", chunk_mask_criterion)},
      {"merge-two", "P = 2 chunks: merge of two states", 20, false, false, merges("merge-two", 2, 201)},
      {"assoc-p3", "P = 3 chunks: (A (+) B) (+) C = A (+) (B (+) C), both exact", 20, false, false,
       merges("assoc-p3", 3, 202)},
      {"order-p5", "P = 5 chunks in shuffled orders and as a tree", 20, false, false, merges("order-p5", 5, 203)},
      {"order-p8", "P = 8 chunks in shuffled orders and as a tree", 20, false, false, merges("order-p8", 8, 204)},
      {"identity", "the empty state is the identity; empty (+) empty has no NaN", 20, false, false,
       judged("identity", identity_criterion)},
      {"large-scores", "scores in the hundreds: no overflow", 20, false, false,
       judged("large-scores", large_scores_criterion)},
      {"end-to-end", "P = 6 chunks, causal: your three functions together", 20, false, false,
       [] {
         return lab::Calls::across("end-to-end", [](lab::Calls& calls) { return end_to_end_criterion(calls, 6, 205); });
       }},
  };
}

}  // namespace ringlab::lab
