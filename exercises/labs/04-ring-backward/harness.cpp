// Lab 04's hidden tests: the student's ring_backward on P virtual ranks against the exact
// gradients (float64), at P = 1, 2, 3, 4, 5, 8 — P = 3 is where a wrong dK/dV direction shows.
//
// block_backward (the kernel students call) is defined here: it computes each call's dK/dV
// contribution into fresh tensors, logs it with the calling rank, step and the block it belongs
// to, and then adds it to the student's accumulator. When a rank's final dK/dV is wrong, the
// report explains it as a sum of logged contributions (least squares, rounded to 0/1 weights):
// the first contribution that ended on the wrong rank, or never arrived, is the first diverging
// (rank, step, block).
// Every call into the student's code (the ring) goes through lab::across, with the contribution
// log, so that the grader judges from a process that holds none of it.
// Sections: [block_backward] [attribution] [running] [criteria]
#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <stdexcept>

#include "exercises/labs/04-ring-backward/lab.hpp"
#include "exercises/labs/common/harness.hpp"
#include "reference/flash_attention.hpp"
#include "sim/ranks/world.hpp"

namespace ringlab::lab04 {

template <class Ar>
void fields(Ar& ar, RankGrads& g) {
  ar(g.dq, g.dk, g.dv);
}

namespace {

using lab::CriterionResult;

struct Contribution {
  int64_t rank = 0, step = 0;  // who computed it, at its how-many-th block_backward call
  int64_t block = -1;          // whose K/V block it is the gradient of (-1: not any rank's)
  std::vector<double> values;  // dk then dv, flattened
  bool zero = true;            // a fully masked block contributes nothing
  bool positions_ok = true;    // k_pos were the block's own positions
};

template <class Ar>
void fields(Ar& ar, Contribution& c) {
  ar(c.rank, c.step, c.block, c.values, c.zero, c.positions_ok);
}

struct Session {
  std::vector<RankInputs> inputs;
  std::vector<std::vector<Contribution>> calls;  // [rank]
};

Session* g_session = nullptr;
thread_local int tl_rank = -1;

bool same_bits(const Tensor<float>& a, const Tensor<float>& b) {
  return a.shape() == b.shape() && std::memcmp(a.data(), b.data(), sizeof(float) * static_cast<size_t>(a.size())) == 0;
}

}  // namespace

// ---- [block_backward] --------------------------------------------------------------------------

Tensor<float> softmax_delta(const Tensor<float>& dout, const Tensor<float>& out) {
  return ringlab::softmax_delta(dout, out);
}

void block_backward(const Tensor<float>& q, const Tensor<float>& k, const Tensor<float>& v, const Tensor<float>& dout,
                    const Tensor<float>& lse, const Tensor<float>& delta, std::span<const int64_t> q_pos,
                    std::span<const int64_t> k_pos, bool causal, Tensor<float>& dq, Tensor<float>& dk,
                    Tensor<float>& dv) {
  if (q.rank() != 4 || k.rank() != 4 || v.shape() != k.shape() || dq.shape() != q.shape() || dk.shape() != k.shape() ||
      dv.shape() != v.shape() || dout.shape() != q.shape()) {
    throw std::invalid_argument("block_backward: q " + shape_string(q.shape()) + ", k " + shape_string(k.shape()) +
                                ", dq " + shape_string(dq.shape()) + ", dk " + shape_string(dk.shape()) +
                                ": dq must be shaped like q, dk and dv like k");
  }
  if (static_cast<int64_t>(q_pos.size()) != q.dim(1) || static_cast<int64_t>(k_pos.size()) != k.dim(1)) {
    throw std::invalid_argument("block_backward: positions do not match the rows of q and k");
  }
  Tensor<float> dk_part(k.shape()), dv_part(v.shape());
  flash_backward_accumulate(q, k, v, dout, lse, delta, q_pos, k_pos, {0, q.dim(1)}, {0, k.dim(1)},
                            causal ? MaskKind::causal : MaskKind::none, dq, dk_part, dv_part, {1, true});
  if (g_session && tl_rank >= 0) {
    Contribution c;
    c.rank = tl_rank;
    c.step = static_cast<int64_t>(g_session->calls[static_cast<size_t>(tl_rank)].size());
    for (size_t r = 0; r < g_session->inputs.size(); ++r)
      if (same_bits(k, g_session->inputs[r].k) && same_bits(v, g_session->inputs[r].v))
        c.block = static_cast<int64_t>(r);
    if (c.block >= 0) {
      const auto& expected = g_session->inputs[static_cast<size_t>(tl_rank)].positions[static_cast<size_t>(c.block)];
      c.positions_ok = std::equal(k_pos.begin(), k_pos.end(), expected.begin(), expected.end());
    }
    c.values.reserve(static_cast<size_t>(dk_part.size() + dv_part.size()));
    for (float x : dk_part.storage()) c.values.push_back(x), c.zero &= x == 0;
    for (float x : dv_part.storage()) c.values.push_back(x), c.zero &= x == 0;
    g_session->calls[static_cast<size_t>(tl_rank)].push_back(std::move(c));
  }
  for (int64_t i = 0; i < dk.size(); ++i) dk[i] += dk_part[i];
  for (int64_t i = 0; i < dv.size(); ++i) dv[i] += dv_part[i];
}

namespace {

// ---- [attribution] -----------------------------------------------------------------------------

// Explains rank r's final dK/dV as a 0/1 combination of the logged contributions and names the
// first one (in step, then rank order) that is where it should not be, or missing.
void attribute(const Session& s, int64_t r, const std::vector<double>& final_grad, CriterionResult& result) {
  std::vector<const Contribution*> columns;
  for (const auto& calls : s.calls)
    for (const Contribution& c : calls)
      // A call given K/V of another shape than the blocks cannot be part of a block's gradient.
      if (!c.zero && c.values.size() == final_grad.size()) columns.push_back(&c);
  if (columns.empty()) return;
  const Eigen::Index rows = static_cast<Eigen::Index>(final_grad.size()),
                     cols = static_cast<Eigen::Index>(columns.size());
  if (rows < cols) return;  // too few equations to tell contributions apart
  Eigen::MatrixXd a(rows, cols);
  Eigen::VectorXd b(rows);
  for (Eigen::Index i = 0; i < rows; ++i) b(i) = final_grad[static_cast<size_t>(i)];
  for (Eigen::Index j = 0; j < cols; ++j)
    for (Eigen::Index i = 0; i < rows; ++i) a(i, j) = columns[static_cast<size_t>(j)]->values[static_cast<size_t>(i)];
  const Eigen::VectorXd x = a.colPivHouseholderQr().solve(b);
  Eigen::VectorXd rounded = x.array().round().matrix();
  const double residual = (a * rounded - b).norm() / std::max(b.norm(), 1e-30);
  if (!(residual < 1e-3)) {
    result.details.push_back("rank " + std::to_string(r) +
                             "'s dK/dV is not a sum of whole block contributions "
                             "(relative residual " +
                             std::to_string(residual) +
                             "): an accumulator was scaled, "
                             "overwritten or mixed with another tensor");
    return;
  }
  const Contribution* first = nullptr;
  std::string what;
  for (Eigen::Index j = 0; j < cols; ++j) {
    const Contribution& c = *columns[static_cast<size_t>(j)];
    const long weight = std::lround(rounded(j));
    const bool belongs = c.block == r;
    std::string problem;
    if (weight == 1 && !belongs) {
      problem = "the dK/dV that rank " + std::to_string(c.rank) + " computed at step " + std::to_string(c.step) +
                " for block " + std::to_string(c.block) + " ended on rank " + std::to_string(r) + " (block " +
                std::to_string(r) + "'s gradient)";
    } else if (weight == 0 && belongs) {
      problem = "the dK/dV that rank " + std::to_string(c.rank) + " computed at step " + std::to_string(c.step) +
                " for block " + std::to_string(c.block) + " never reached rank " + std::to_string(r);
    } else if (weight != 0 && weight != 1) {
      problem = "the dK/dV that rank " + std::to_string(c.rank) + " computed at step " + std::to_string(c.step) +
                " was added " + std::to_string(weight) + " times into rank " + std::to_string(r) + "'s gradient";
    }
    if (problem.empty()) continue;
    if (!first || c.step < first->step || (c.step == first->step && c.rank < first->rank)) first = &c, what = problem;
  }
  if (first) result.diverge({first->rank, first->step, first->block, what});
}

// ---- [running] ---------------------------------------------------------------------------------

struct Run {
  std::unique_ptr<lab::Problem> problem;
  CriterionResult result;
  Session session;
  RunReport report;
};

// What came back from the ring has one entry per rank and names blocks that exist: a record that
// does not could only have been made up, and the judge will not index past it.
void check_received(const lab::ProblemSpec& spec, const Run& run, const std::vector<RankGrads>& grads) {
  const auto ranks = static_cast<size_t>(spec.ranks);
  bool ok = run.report.counters.size() == ranks && grads.size() == ranks && run.session.calls.size() == ranks;
  for (const auto& calls : run.session.calls)
    for (const Contribution& c : calls) ok &= c.block >= -1 && c.block < spec.ranks;
  if (!ok)
    throw lab::StudentGone(
        "what the process running your code sent for ring_backward does not fit the problem: not one entry per rank, "
        "or a block that no rank holds");
}

Run run_backward(const lab::ProblemSpec& spec, SendMode mode) {
  Run run;
  run.problem = std::make_unique<lab::Problem>(lab::make_problem(spec));
  const lab::Problem& p = *run.problem;
  Session& s = run.session;
  for (int64_t r = 0; r < spec.ranks; ++r) {
    const auto& pos = p.positions[static_cast<size_t>(r)];
    s.inputs.push_back({lab::rows_of(p.inputs.q, pos), lab::rows_of(p.inputs.k, pos), lab::rows_of(p.inputs.v, pos),
                        lab::rows_of(p.forward32.out, pos), gather_rows(p.forward32.lse, pos, 2),
                        lab::rows_of(p.inputs.dout, pos), p.positions, spec.causal});
  }
  s.calls.resize(static_cast<size_t>(spec.ranks));
  std::vector<RankGrads> grads(static_cast<size_t>(spec.ranks));
  lab::across(
      "ring_backward",
      [&] {
        g_session = &s;
        run.report = lab::run_ranks(spec.ranks, mode, [&](Communicator& comm) {
          tl_rank = comm.rank();
          grads[static_cast<size_t>(comm.rank())] = ring_backward(comm, s.inputs[static_cast<size_t>(comm.rank())]);
        });
        g_session = nullptr;
      },
      run.report, grads, s.calls);
  check_received(spec, run, grads);
  CriterionResult& result = run.result;
  // Block calls: every rank computes every block once, with the block's positions.
  for (int64_t r = 0; r < spec.ranks; ++r) {
    std::vector<int64_t> seen(static_cast<size_t>(spec.ranks), -1);
    for (const Contribution& c : s.calls[static_cast<size_t>(r)]) {
      if (c.block < 0) {
        result.diverge({r, c.step, -1, "block_backward got K/V that are not any rank's block"});
      } else if (seen[static_cast<size_t>(c.block)] >= 0) {
        result.diverge({r, c.step, c.block, "block " + std::to_string(c.block) + " computed a second time"});
      } else if (spec.causal && !c.positions_ok) {
        result.diverge(
            {r, c.step, c.block, "block " + std::to_string(c.block) + " masked with another block's positions"});
      }
      if (c.block >= 0) seen[static_cast<size_t>(c.block)] = c.step;
    }
  }
  if (lab::record_run_failure(run.report, result)) {
    if (run.report.deadlock)
      for (const RankWaitReport& w : run.report.deadlock->ranks)
        if (w.state == RankState::blocked) result.diverge({w.rank, w.step, -1, w.describe()});
    return run;
  }
  bool dq_ok = true, dkv_ok = true;
  for (int64_t r = 0; r < spec.ranks; ++r) {
    const auto& pos = p.positions[static_cast<size_t>(r)];
    const std::string where = "rank " + std::to_string(r);
    const RankGrads& g = grads[static_cast<size_t>(r)];
    dq_ok &=
        lab::compare_tensor(result, "dq", g.dq, lab::rows_of(p.reference_grads.dq, pos), fp32_tolerance("dq"), where);
    bool ok =
        lab::compare_tensor(result, "dk", g.dk, lab::rows_of(p.reference_grads.dk, pos), fp32_tolerance("dk"), where);
    ok &= lab::compare_tensor(result, "dv", g.dv, lab::rows_of(p.reference_grads.dv, pos), fp32_tolerance("dv"), where);
    if (!ok && g.dk.shape() == s.inputs[static_cast<size_t>(r)].k.shape() && g.dv.shape() == g.dk.shape()) {
      std::vector<double> final_grad(g.dk.storage().begin(), g.dk.storage().end());
      final_grad.insert(final_grad.end(), g.dv.storage().begin(), g.dv.storage().end());
      attribute(s, r, final_grad, result);
    }
    dkv_ok &= ok;
  }
  if (!dkv_ok && result.hint.empty())
    result.hint =
        "dK/dV accumulators must travel WITH their K/V block (same direction, one step behind) and take "
        "one extra hop home; sending them the other way is right only at P <= 2 (the book's erratum 1)";
  if (!dq_ok && dkv_ok && result.hint.empty())
    result.hint = "dq accumulates locally over all P blocks; it never travels";
  return run;
}

lab::ProblemSpec spec_of(int64_t ranks, bool causal = false, LayoutKind layout = LayoutKind::contiguous) {
  lab::ProblemSpec spec;
  spec.ranks = ranks;
  spec.causal = causal;
  spec.layout = layout;
  spec.backward = true;
  spec.seed = 400 + static_cast<uint64_t>(ranks);
  return spec;
}

// ---- [criteria] --------------------------------------------------------------------------------

CriterionResult correctness(const lab::ProblemSpec& spec, SendMode mode = SendMode::eager) {
  return run_backward(spec, mode).result;
}

CriterionResult traffic() {
  Run run = run_backward(spec_of(4), SendMode::eager);
  CriterionResult result;
  if (!run.result.passed) {
    result.fail("not correct on this problem (P = 4): " + run.result.message);
    return result;
  }
  const int64_t P = 4;
  const int64_t block = 2 * run.session.inputs[0].k.size() * static_cast<int64_t>(sizeof(float));
  for (int64_t r = 0; r < P; ++r) {
    const int64_t sent = run.report.counters[static_cast<size_t>(r)].bytes_sent;
    if (sent > (2 * P - 1) * block) {
      result.fail("rank " + std::to_string(r) + " sent " + std::to_string(sent) +
                  " bytes; the ring backward needs P - 1 "
                  "K/V blocks and P dK/dV accumulators, " +
                  std::to_string((2 * P - 1) * block) + " bytes");
      result.hint = "send each K/V block once per hop and each accumulator once per hop";
      return result;
    }
  }
  return result;
}

}  // namespace

}  // namespace ringlab::lab04

namespace ringlab::lab {

const char* lab_name() { return "04-ring-backward"; }

std::vector<Criterion> lab_criteria() {
  using namespace ringlab::lab04;
  lab::ProblemSpec gqa = spec_of(4, true);
  gqa.heads = 4, gqa.kv_heads = 2;
  return {
      {"p1", "P = 1: one rank, the accumulator is home at once", 20, false, false,
       [] { return correctness(spec_of(1)); }},
      {"p2", "P = 2, full attention (a dK/dV direction bug is invisible here)", 20, false, false,
       [] { return correctness(spec_of(2)); }},
      {"p3-direction", "P = 3, full attention: dK/dV must travel with their K/V block", 20, false, false,
       [] { return correctness(spec_of(3)); }},
      {"p4-causal", "P = 4, causal, contiguous layout", 20, false, false, [] { return correctness(spec_of(4, true)); }},
      {"p5-zigzag", "P = 5, causal, zig-zag layout", 20, false, false,
       [] { return correctness(spec_of(5, true, LayoutKind::zigzag)); }},
      {"p8", "P = 8, full attention", 30, false, false, [] { return correctness(spec_of(8)); }},
      {"gqa", "P = 4, causal, GQA (2 query heads per K/V head: dK/dV sum over the group)", 20, false, false,
       [gqa] { return correctness(gqa); }},
      {"uses-messages",
       "P = 3: each rank computes with the K/V blocks it received (altered in transit, they change the result)", 20,
       false, false, [] { return lab::uses_received_blocks([] { return correctness(spec_of(3)); }, 3, 2); }},
      {"rendezvous", "P = 4 with rendezvous sends: no deadlock", 20, false, false,
       [] { return correctness(spec_of(4), SendMode::rendezvous); }},
      {"perf-traffic", "performance: P - 1 K/V blocks and P dK/dV accumulators per rank, no more", 20, true, false,
       traffic},
  };
}

}  // namespace ringlab::lab
