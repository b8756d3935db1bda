// Lab 05's hidden tests: the student's ulysses_attention on P virtual ranks against exact
// attention, at P = 1, 2, 3, 4, 8, with GQA and the causal mask.
//
// local_attention (the kernel students call) is defined here and checks what each rank hands it:
// it must be exactly heads [r H/P, (r+1) H/P) of every token, in global order. A wrong row is
// looked up among all (token, head) rows of the input, so the report can say which one arrived
// instead: that is a divergence at step 0 (the all-to-all in); right inputs with wrong outputs
// diverge at step 1 (the all-to-all back).
// The ranks' run goes through lab::across with what local_attention recorded of each rank's
// inputs, so that the grader judges from a process that holds none of the student's code.
#include <cstring>
#include <memory>
#include <stdexcept>

#include "exercises/labs/05-ulysses/lab.hpp"
#include "exercises/labs/common/harness.hpp"
#include "reference/flash_attention.hpp"
#include "sim/ranks/world.hpp"

namespace ringlab::lab05 {

namespace {

using lab::CriterionResult;

struct Session {
  const lab::Problem* problem = nullptr;
  std::vector<std::string> input_problem;  // [rank]: what was wrong with its local_attention input ("" ok)
  std::vector<int64_t> input_token;        // [rank]: the first wrong token (for the divergence)
  std::vector<bool> called;
};

Session* g_session = nullptr;
thread_local int tl_rank = -1;

// Finds which (token, head) row of the global tensor `global` (B, S, X, D) a D-row equals.
std::string identify_row(const Tensor<float>& global, const float* row) {
  const int64_t B = global.dim(0), S = global.dim(1), X = global.dim(2), D = global.dim(3);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t s = 0; s < S; ++s)
      for (int64_t h = 0; h < X; ++h)
        if (std::memcmp(&global(b, s, h, 0), row, sizeof(float) * static_cast<size_t>(D)) == 0)
          return "token " + std::to_string(s) + ", head " + std::to_string(h);
  return "no (token, head) row of the input";
}

// The expected input of rank r: heads [r per, (r+1) per) of all tokens. Records the first mismatch.
void check_input(const char* name, const Tensor<float>& got, const Tensor<float>& global, int64_t per) {
  if (!g_session || tl_rank < 0) return;
  std::string& problem = g_session->input_problem[static_cast<size_t>(tl_rank)];
  if (!problem.empty()) return;
  const int64_t B = global.dim(0), S = global.dim(1), D = global.dim(3);
  if (got.shape() != Shape{B, S, per, D}) {
    problem =
        std::string(name) + " has shape " + shape_string(got.shape()) + ", expected " + shape_string({B, S, per, D});
    return;
  }
  for (int64_t b = 0; b < B; ++b)
    for (int64_t s = 0; s < S; ++s)
      for (int64_t h = 0; h < per; ++h)
        if (std::memcmp(&got(b, s, h, 0), &global(b, s, tl_rank * per + h, 0),
                        sizeof(float) * static_cast<size_t>(D)) != 0) {
          problem = std::string(name) + "[token " + std::to_string(s) + ", head " + std::to_string(h) + "] holds " +
                    identify_row(global, &got(b, s, h, 0)) + "; expected token " + std::to_string(s) + ", head " +
                    std::to_string(tl_rank * per + h);
          g_session->input_token[static_cast<size_t>(tl_rank)] = s;
          return;
        }
}

}  // namespace

AttentionOutput<float> local_attention(const Tensor<float>& q, const Tensor<float>& k, const Tensor<float>& v,
                                       bool causal) {
  if (q.rank() != 4 || k.rank() != 4 || v.shape() != k.shape() || q.dim(1) != k.dim(1) || k.dim(2) == 0 ||
      q.dim(2) % k.dim(2) != 0) {
    throw std::invalid_argument("local_attention: q " + shape_string(q.shape()) + ", k " + shape_string(k.shape()) +
                                " are not (B, S, H/P, D) and (B, S, HKV/P, D)");
  }
  if (g_session && tl_rank >= 0) {
    const lab::Problem& p = *g_session->problem;
    const int64_t P = p.ranks;
    check_input("q", q, p.inputs.q, p.dims.heads / P);
    check_input("k", k, p.inputs.k, p.dims.kv_heads / P);
    check_input("v", v, p.inputs.v, p.dims.kv_heads / P);
    g_session->called[static_cast<size_t>(tl_rank)] = true;
  }
  return flash_attention(q, k, v, causal ? MaskKind::causal : MaskKind::none, {}, {}, {1, true});
}

namespace {

struct Run {
  std::unique_ptr<lab::Problem> problem;
  CriterionResult result;
  RunReport report;
};

Run run_ulysses(int64_t ranks, int64_t heads, int64_t kv_heads, bool causal, uint64_t seed) {
  lab::ProblemSpec spec;
  spec.ranks = ranks, spec.heads = heads, spec.kv_heads = kv_heads, spec.causal = causal, spec.seed = seed;
  spec.tokens_per_rank = 6;
  Run run;
  run.problem = std::make_unique<lab::Problem>(lab::make_problem(spec));
  const lab::Problem& p = *run.problem;
  Session s;
  s.problem = &p;
  s.input_problem.assign(static_cast<size_t>(ranks), "");
  s.input_token.assign(static_cast<size_t>(ranks), -1);
  s.called.assign(static_cast<size_t>(ranks), false);
  std::vector<RankInputs> inputs;
  for (int64_t r = 0; r < ranks; ++r) {
    const auto& pos = p.positions[static_cast<size_t>(r)];
    inputs.push_back(
        {lab::rows_of(p.inputs.q, pos), lab::rows_of(p.inputs.k, pos), lab::rows_of(p.inputs.v, pos), causal});
  }
  std::vector<AttentionOutput<float>> outputs(static_cast<size_t>(ranks));
  lab::across(
      "ulysses_attention",
      [&] {
        g_session = &s;
        run.report = lab::run_ranks(ranks, SendMode::eager, [&](Communicator& comm) {
          tl_rank = comm.rank();
          outputs[static_cast<size_t>(comm.rank())] = ulysses_attention(comm, inputs[static_cast<size_t>(comm.rank())]);
        });
        g_session = nullptr;
      },
      run.report, outputs, s.input_problem, s.input_token, s.called);
  const auto P = static_cast<size_t>(ranks);
  lab::refuse_unless(run.report.counters.size() == P && outputs.size() == P && s.input_problem.size() == P &&
                         s.input_token.size() == P && s.called.size() == P,
                     "ulysses_attention", "not one report, output and input check per rank");
  CriterionResult& result = run.result;
  const int64_t n = p.tokens_per_rank();
  for (int64_t r = 0; r < ranks; ++r)
    if (!s.input_problem[static_cast<size_t>(r)].empty()) {
      const int64_t token = s.input_token[static_cast<size_t>(r)];
      result.diverge({r, 0, token >= 0 ? token / n : -1, "all-to-all in: " + s.input_problem[static_cast<size_t>(r)]});
      result.hint =
          "chunk j of the all-to-all's input goes to rank j: it must hold heads [j H/P, (j+1) H/P) of your "
          "tokens; chunk i of its output came from rank i, whose tokens are [i n, (i+1) n)";
    }
  if (lab::record_run_failure(run.report, result)) return run;
  bool ok = true;
  for (int64_t r = 0; r < ranks; ++r) {
    const auto& pos = p.positions[static_cast<size_t>(r)];
    const std::string where = "rank " + std::to_string(r);
    bool rank_ok = lab::compare_tensor(result, "out", outputs[static_cast<size_t>(r)].out,
                                       lab::rows_of(p.reference.out, pos), fp32_tolerance("out"), where);
    rank_ok &= lab::compare_tensor(result, "lse", outputs[static_cast<size_t>(r)].lse,
                                   lab::lse_rows_of(p.reference.lse, pos), fp32_tolerance("lse"), where);
    if (!rank_ok && s.called[static_cast<size_t>(r)] && s.input_problem[static_cast<size_t>(r)].empty() &&
        !result.divergence) {
      result.diverge({r, 1, -1,
                      "all-to-all back: local_attention got the right inputs on every rank, but rank " +
                          std::to_string(r) + "'s out/lse came back wrong"});
      result.hint =
          "on the way back chunk i (for rank i) holds tokens [i n, (i+1) n) of your heads, and chunk j "
          "received from rank j holds your tokens for heads [j H/P, (j+1) H/P)";
    }
    ok &= rank_ok;
  }
  if (!ok) result.passed = false;
  return run;
}

CriterionResult correctness(int64_t ranks, int64_t heads, int64_t kv_heads, bool causal) {
  return run_ulysses(ranks, heads, kv_heads, causal, 500 + static_cast<uint64_t>(ranks * 10 + heads)).result;
}

// Two all-to-alls' worth of traffic: (P-1)/P of q, k, v in and of out and lse back.
CriterionResult traffic() {
  const int64_t P = 4, H = 4, HKV = 4;
  Run run = run_ulysses(P, H, HKV, false, 599);
  CriterionResult result;
  if (!run.result.passed) {
    result.fail("not correct on this problem (P = 4): " + run.result.message);
    return result;
  }
  const lab::Problem& p = *run.problem;
  const int64_t n = p.tokens_per_rank(), D = p.dims.dim, B = p.dims.batch;
  const int64_t shard =
      B * n * (H * D * 2 + 2 * HKV * D + H) * static_cast<int64_t>(sizeof(float));  // q, out, k, v, lse
  const int64_t allowed = shard * (P - 1) / P;
  for (int64_t r = 0; r < P; ++r) {
    const int64_t sent = run.report.counters[static_cast<size_t>(r)].bytes_sent;
    if (sent > allowed) {
      result.fail("rank " + std::to_string(r) + " sent " + std::to_string(sent) + " bytes; two all-to-alls need " +
                  std::to_string(allowed) + " ((P-1)/P of q, k, v, out and lse)");
      result.hint =
          "all_to_all sends each chunk straight to its rank; gathering everything everywhere costs P times more";
      return result;
    }
  }
  return result;
}

}  // namespace

}  // namespace ringlab::lab05

namespace ringlab::lab {

const char* lab_name() { return "05-ulysses"; }

std::vector<Criterion> lab_criteria() {
  using namespace ringlab::lab05;
  return {
      {"p1", "P = 1: the all-to-alls move nothing", 20, false, false, [] { return correctness(1, 2, 2, false); }},
      {"p2", "P = 2, 4 heads, 2 K/V heads", 20, false, false, [] { return correctness(2, 4, 2, false); }},
      {"p3", "P = 3, 6 heads, 3 K/V heads (a non-power of two)", 20, false, false,
       [] { return correctness(3, 6, 3, false); }},
      {"p4-causal", "P = 4, 4 heads, causal (global token order after the all-to-all)", 20, false, false,
       [] { return correctness(4, 4, 4, true); }},
      {"p4-gqa", "P = 4, GQA: 8 query heads over 4 K/V heads", 20, false, false,
       [] { return correctness(4, 8, 4, true); }},
      {"p8", "P = 8, 16 heads, 8 K/V heads", 30, false, false, [] { return correctness(8, 16, 8, false); }},
      {"uses-messages",
       "P = 3: each rank attends over the heads it received (altered in transit, they change the result)", 20, false,
       false, [] { return lab::uses_received_blocks([] { return correctness(3, 6, 3, false); }, 3, 3); }},
      {"perf-traffic", "performance: no more than two all-to-alls' worth of bytes", 20, true, false, traffic},
  };
}

}  // namespace ringlab::lab
