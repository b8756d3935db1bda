// Lab 06's hidden tests: the student's classify_block against the truth, and ring_forward_skip on
// P virtual ranks (contiguous, zig-zag and striped layouts) against exact causal attention.
//
// block_attention is defined here and logs every call: which rank's K/V it got (bitwise), the
// positions, and whether the mask was on. Against the truth of each (rank, block) pair that gives
// the first diverging (rank, step, block) of a wrong plan — a block computed without the mask it
// needs, a needed block never computed — and grades the performance criteria: no kernel call on
// a fully masked block, no mask on a fully visible one.
// Every call into the student's code (classify_block on all its cases at once, the ring with the
// block log) goes through lab::across, so that the grader judges from a process that holds none of it.
// Sections: block_attention and merge_into (provided), running the ring, the criteria.
#include <algorithm>
#include <cstring>
#include <memory>
#include <random>
#include <stdexcept>

#include "exercises/labs/06-causal-skip/lab.hpp"
#include "exercises/labs/common/harness.hpp"
#include "reference/flash_attention.hpp"
#include "sim/ranks/world.hpp"

namespace ringlab::lab06 {

namespace {

using lab::CriterionResult;
using lab::Divergence;

struct BlockCall {
  int64_t origin = -1;  // whose K/V (K and V both), -1 = nobody's
  bool mask = true;
  bool positions_ok = true;
};

template <class Ar>
void fields(Ar& ar, BlockCall& c) {
  ar(c.origin, c.mask, c.positions_ok);
}

struct Session {
  std::vector<RankInputs> inputs;
  std::vector<std::vector<BlockCall>> calls;  // [rank]
};

Session* g_session = nullptr;
thread_local int tl_rank = -1;

bool same_bits(const Tensor<float>& a, const Tensor<float>& b) {
  return a.shape() == b.shape() && std::memcmp(a.data(), b.data(), sizeof(float) * static_cast<size_t>(a.size())) == 0;
}

// The truth: visible pairs between two position sets, and how many there are at most.
BlockWork truth(std::span<const int64_t> q_pos, std::span<const int64_t> k_pos) {
  const int64_t pairs = causal_pairs_of_positions(q_pos, k_pos);
  if (pairs == 0) return BlockWork::skip;
  if (pairs == static_cast<int64_t>(q_pos.size() * k_pos.size())) return BlockWork::full;
  return BlockWork::masked;
}

const char* work_name(BlockWork work) {
  return work == BlockWork::skip ? "skip" : work == BlockWork::full ? "full" : "masked";
}

}  // namespace

AttentionOutput<float> block_attention(const Tensor<float>& q, const Tensor<float>& k, const Tensor<float>& v,
                                       std::span<const int64_t> q_pos, std::span<const int64_t> k_pos, bool mask) {
  if (q.rank() != 4 || k.rank() != 4 || v.shape() != k.shape() || static_cast<int64_t>(q_pos.size()) != q.dim(1) ||
      static_cast<int64_t>(k_pos.size()) != k.dim(1)) {
    throw std::invalid_argument("block_attention: q " + shape_string(q.shape()) + " and k " + shape_string(k.shape()) +
                                " do not match their positions");
  }
  if (g_session && tl_rank >= 0) {
    BlockCall call;
    call.mask = mask;
    for (size_t r = 0; r < g_session->inputs.size(); ++r)
      if (same_bits(k, g_session->inputs[r].k) && same_bits(v, g_session->inputs[r].v))
        call.origin = static_cast<int64_t>(r);
    if (call.origin >= 0) {
      const auto& expected = g_session->inputs[0].positions[static_cast<size_t>(call.origin)];
      const auto& mine = g_session->inputs[0].positions[static_cast<size_t>(tl_rank)];
      call.positions_ok = std::equal(k_pos.begin(), k_pos.end(), expected.begin(), expected.end()) &&
                          std::equal(q_pos.begin(), q_pos.end(), mine.begin(), mine.end());
    }
    g_session->calls[static_cast<size_t>(tl_rank)].push_back(call);
  }
  const int64_t B = q.dim(0), n = q.dim(1), H = q.dim(2), D = q.dim(3);
  SoftmaxState<float> acc = make_accumulator(B, H, n, D);
  flash_forward_accumulate(q, k, v, q_pos, k_pos, {0, n}, {0, k.dim(1)}, mask ? MaskKind::causal : MaskKind::none, acc,
                           {1, true});
  return finalize_accumulator(acc, B, H, n, D);
}

void merge_into(AttentionOutput<float>& acc, const AttentionOutput<float>& part) {
  const int64_t B = acc.out.dim(0), n = acc.out.dim(1), H = acc.out.dim(2), D = acc.out.dim(3);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h) {
      std::vector<float> out_a(static_cast<size_t>(n * D)), out_b(static_cast<size_t>(n * D));
      std::vector<float> lse_a(static_cast<size_t>(n)), lse_b(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) {
        lse_a[static_cast<size_t>(i)] = acc.lse(b, h, i), lse_b[static_cast<size_t>(i)] = part.lse(b, h, i);
        for (int64_t d = 0; d < D; ++d)
          out_a[static_cast<size_t>(i * D + d)] = acc.out(b, i, h, d),
                                            out_b[static_cast<size_t>(i * D + d)] = part.out(b, i, h, d);
      }
      merge_lse_form(out_a, lse_a, out_b, lse_b, D);
      for (int64_t i = 0; i < n; ++i) {
        acc.lse(b, h, i) = lse_a[static_cast<size_t>(i)];
        for (int64_t d = 0; d < D; ++d) acc.out(b, i, h, d) = out_a[static_cast<size_t>(i * D + d)];
      }
    }
}

namespace {

struct Run {
  std::unique_ptr<lab::Problem> problem;
  CriterionResult result;
  Session session;
  RunReport report;
  int64_t masked_blocks_computed = 0, full_blocks_masked = 0;
  std::optional<Divergence> first_wasted, first_masked_full;
};

Run run_skip(int64_t ranks, LayoutKind layout, SendMode mode = SendMode::eager) {
  lab::ProblemSpec spec;
  spec.ranks = ranks, spec.layout = layout, spec.causal = true, spec.seed = 600 + static_cast<uint64_t>(ranks);
  Run run;
  run.problem = std::make_unique<lab::Problem>(lab::make_problem(spec));
  const lab::Problem& p = *run.problem;
  Session& s = run.session;
  for (int64_t r = 0; r < ranks; ++r) {
    const auto& pos = p.positions[static_cast<size_t>(r)];
    s.inputs.push_back(
        {lab::rows_of(p.inputs.q, pos), lab::rows_of(p.inputs.k, pos), lab::rows_of(p.inputs.v, pos), p.positions});
  }
  s.calls.resize(static_cast<size_t>(ranks));
  std::vector<AttentionOutput<float>> outputs(static_cast<size_t>(ranks));
  lab::across(
      "ring_forward_skip",
      [&] {
        g_session = &s;
        run.report = lab::run_ranks(ranks, mode, [&](Communicator& comm) {
          tl_rank = comm.rank();
          outputs[static_cast<size_t>(comm.rank())] =
              ring_forward_skip(comm, s.inputs[static_cast<size_t>(comm.rank())]);
        });
        g_session = nullptr;
      },
      run.report, outputs, s.calls);
  const auto P = static_cast<size_t>(ranks);
  lab::refuse_unless(run.report.counters.size() == P && outputs.size() == P && s.calls.size() == P, "ring_forward_skip",
                     "not one report, output and block log per rank");
  for (const auto& calls : s.calls)
    for (const BlockCall& call : calls)
      lab::refuse_unless(call.origin >= -1 && call.origin < ranks, "ring_forward_skip",
                         "a block's origin is not a rank");
  CriterionResult& result = run.result;
  // The plan each rank followed, against the truth of every (rank, block) pair.
  for (int64_t r = 0; r < ranks; ++r) {
    std::vector<bool> computed(static_cast<size_t>(ranks), false);
    const auto& calls = s.calls[static_cast<size_t>(r)];
    for (size_t t = 0; t < calls.size(); ++t) {
      const BlockCall& c = calls[t];
      const int64_t step = static_cast<int64_t>(t);
      if (c.origin < 0) {
        result.diverge({r, step, -1, "block_attention got K/V that are not any rank's block"});
        continue;
      }
      const BlockWork needed = truth(p.positions[static_cast<size_t>(r)], p.positions[static_cast<size_t>(c.origin)]);
      if (!c.positions_ok) {
        result.diverge({r, step, c.origin, "masked with positions that are not the queries' and the block's own"});
      } else if (needed == BlockWork::masked && !c.mask) {
        result.diverge({r, step, c.origin,
                        "block " + std::to_string(c.origin) +
                            " was computed without the mask, but some of its keys are in the future"});
        result.hint = "only a block whose every key is at or before every query may go without the mask";
      } else if (needed == BlockWork::skip) {
        ++run.masked_blocks_computed;
        if (!run.first_wasted)
          run.first_wasted = Divergence{r, step, c.origin, "computed although every pair is masked"};
      } else if (needed == BlockWork::full && c.mask) {
        ++run.full_blocks_masked;
        if (!run.first_masked_full)
          run.first_masked_full = Divergence{r, step, c.origin, "masked although every pair is visible"};
      }
      computed[static_cast<size_t>(c.origin)] = true;
    }
    if (run.report.ok())
      for (int64_t b = 0; b < ranks; ++b)
        if (!computed[static_cast<size_t>(b)] &&
            truth(p.positions[static_cast<size_t>(r)], p.positions[static_cast<size_t>(b)]) != BlockWork::skip) {
          result.diverge({r, -1, b,
                          "block " + std::to_string(b) + " was skipped, but rank " + std::to_string(r) +
                              "'s queries see some of its keys"});
          result.hint =
              "decide by positions, not by rank order: under zig-zag or striped layouts every rank needs "
              "blocks of ranks after it";
          break;
        }
  }
  if (lab::record_run_failure(run.report, result)) {
    if (run.report.deadlock)
      for (const RankWaitReport& w : run.report.deadlock->ranks)
        if (w.state == RankState::blocked) result.diverge({w.rank, w.step, -1, w.describe()});
    if (run.report.deadlock)
      result.hint =
          "a skipped block must still be passed on: the next rank may need it (skip the compute, never the send)";
    return run;
  }
  for (int64_t r = 0; r < ranks; ++r) {
    const auto& pos = p.positions[static_cast<size_t>(r)];
    const std::string where = "rank " + std::to_string(r);
    lab::compare_tensor(result, "out", outputs[static_cast<size_t>(r)].out, lab::rows_of(p.reference.out, pos),
                        fp32_tolerance("out"), where);
    lab::compare_tensor(result, "lse", outputs[static_cast<size_t>(r)].lse, lab::lse_rows_of(p.reference.lse, pos),
                        fp32_tolerance("lse"), where);
  }
  return run;
}

CriterionResult correctness(int64_t ranks, LayoutKind layout, SendMode mode = SendMode::eager) {
  return run_skip(ranks, layout, mode).result;
}

// One block classify_criterion asks about: positions and what they are.
struct ClassifyCase {
  std::vector<int64_t> q, k;
  std::string what;
};

// The blocks of every layout the labs use, then random sets.
std::vector<ClassifyCase> classify_cases() {
  std::vector<ClassifyCase> cases;
  for (LayoutKind kind : {LayoutKind::contiguous, LayoutKind::zigzag, LayoutKind::striped})
    for (int64_t ranks : {2, 3, 4}) {
      const Layout layout(kind, 8 * ranks, ranks);
      for (int64_t a = 0; a < ranks; ++a)
        for (int64_t b = 0; b < ranks; ++b)
          cases.push_back({layout.positions(a), layout.positions(b), std::string(layout_name(kind)) + " blocks"});
    }
  std::mt19937_64 random(61);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<int64_t> q(static_cast<size_t>(1 + random() % 6)), k(static_cast<size_t>(1 + random() % 6));
    for (int64_t& x : q) x = static_cast<int64_t>(random() % 24);
    for (int64_t& x : k) x = static_cast<int64_t>(random() % 24);
    std::sort(q.begin(), q.end());
    std::sort(k.begin(), k.end());
    cases.push_back({std::move(q), std::move(k), "random positions"});
  }
  return cases;
}

CriterionResult classify_criterion() {
  CriterionResult result;
  const std::vector<ClassifyCase> cases = classify_cases();
  // The student's answers, in order, up to and including the first wrong one (the criterion
  // stops there), sent across as one vector.
  std::vector<BlockWork> answers;
  lab::across(
      "classify_block",
      [&] {
        for (const ClassifyCase& c : cases) {
          answers.push_back(classify_block(c.q, c.k));
          if (answers.back() != truth(c.q, c.k)) break;
        }
      },
      answers);
  auto text = [](const std::vector<int64_t>& v) {
    std::string s = "[";
    for (size_t i = 0; i < v.size() && i < 8; ++i) s += (i ? ", " : "") + std::to_string(v[i]);
    return s + (v.size() > 8 ? ", ...]" : "]");
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const ClassifyCase& c = cases[i];
    if (i >= answers.size()) {
      result.fail("the student's process sent " + std::to_string(answers.size()) +
                  " answers of classify_block and stopped before a wrong one");
      return result;
    }
    const BlockWork got = answers[i], expected = truth(c.q, c.k);
    if (got == expected) continue;
    result.fail(c.what + ": queries " + text(c.q) + ", keys " + text(c.k) + " classified " + work_name(got) +
                ", expected " + work_name(expected));
    result.hint = "skip: the first key comes after the last query; full: the last key is at or before the first query";
    return result;
  }
  return result;
}

CriterionResult performance(bool skips) {
  Run run = run_skip(8, LayoutKind::contiguous);
  CriterionResult result;
  if (!run.result.passed) {
    result.fail("not correct on this problem (P = 8): " + run.result.message);
    return result;
  }
  if (skips && run.masked_blocks_computed > 0) {
    result.fail(std::to_string(run.masked_blocks_computed) + " fully masked blocks were computed (of " +
                std::to_string(8 * 7 / 2) + " that a causal contiguous ring can skip)");
    result.divergence = run.first_wasted;
    result.hint = "classify each block and make no kernel call for a skip";
  }
  if (!skips && run.full_blocks_masked > 0) {
    result.fail(std::to_string(run.full_blocks_masked) + " fully visible blocks were computed with the mask");
    result.divergence = run.first_masked_full;
    result.hint = "a full block needs no mask: pass mask = false";
  }
  return result;
}

}  // namespace

}  // namespace ringlab::lab06

namespace ringlab::lab {

const char* lab_name() { return "06-causal-skip"; }

std::vector<Criterion> lab_criteria() {
  using namespace ringlab::lab06;
  return {
      {"classify", "classify_block: skip / full / masked by positions (every layout's blocks, random sets)", 20, false,
       false, classify_criterion},
      {"contiguous-p3", "P = 3, contiguous layout", 20, false, false,
       [] { return correctness(3, LayoutKind::contiguous); }},
      {"contiguous-p8", "P = 8, contiguous layout", 30, false, false,
       [] { return correctness(8, LayoutKind::contiguous); }},
      {"zigzag-p4", "P = 4, zig-zag layout: every rank needs blocks of later ranks", 20, false, false,
       [] { return correctness(4, LayoutKind::zigzag); }},
      {"striped-p3", "P = 3, striped layout: every block is partly visible", 20, false, false,
       [] { return correctness(3, LayoutKind::striped); }},
      {"uses-messages",
       "P = 3: each rank computes with the K/V blocks it received (altered in transit, they change the result)", 20,
       false, false,
       [] { return lab::uses_received_blocks([] { return correctness(3, LayoutKind::contiguous); }, 3, 3); }},
      {"rendezvous", "P = 4 with rendezvous sends: skipping never skips a send", 20, false, false,
       [] { return correctness(4, LayoutKind::contiguous, SendMode::rendezvous); }},
      {"perf-skips", "performance: no kernel call on a fully masked block (P = 8)", 20, true, false,
       [] { return performance(true); }},
      {"perf-no-mask", "performance: fully visible blocks computed without the mask (P = 8)", 20, true, false,
       [] { return performance(false); }},
  };
}

}  // namespace ringlab::lab
