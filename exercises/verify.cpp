// Checking a student's outputs against the oracle (verify.hpp).
#include "exercises/verify.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <optional>
#include <set>
#include <sstream>

#include "reference/error.hpp"
#include "reference/exact_attention.hpp"

namespace ringlab::exercises {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr int64_t kMaxRanksForBlocks = 10;  // subsets of blocks are searched up to 2^10
constexpr size_t kRowsShownPerTensor = 3;

std::string shape_text(const Shape& shape) {
  std::string text = "(";
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + ")";
}

std::string list_text(const std::vector<int64_t>& values) {
  std::string text;
  for (size_t i = 0; i < values.size(); ++i) text += (i ? ", " : "") + std::to_string(values[i]);
  return text;
}

std::string sci(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3e", value);
  return text;
}

bool outside(double given, double exact, const Tolerance& t) {
  if (std::isnan(given) || std::isnan(exact)) return true;
  if (std::isinf(given) || std::isinf(exact)) return given != exact;
  return std::abs(given - exact) > t.abs + t.rel * std::abs(exact);
}

bool has_nan(const Tensor<double>& t) {
  return std::any_of(t.span().begin(), t.span().end(), [](double x) { return std::isnan(x); });
}

// Rows of one (B, S, heads, D) tensor (out, dq, dk, dv) or of lse (B, H, S): a row is one
// (batch, head, position); its elements are the D values (one for lse).
struct RowView {
  const Tensor<double>* given;
  const Tensor<double>* exact;
  bool lse = false;
  int64_t batch() const { return exact->shape()[0]; }
  int64_t positions() const { return exact->shape()[lse ? 2 : 1]; }
  int64_t heads() const { return exact->shape()[lse ? 1 : 2]; }
  int64_t width() const { return lse ? 1 : exact->shape()[3]; }
  int64_t index(int64_t b, int64_t s, int64_t h, int64_t d) const {
    return lse ? (b * heads() + h) * positions() + s : ((b * positions() + s) * heads() + h) * width() + d;
  }
};

// The oracle's partial result of each ring block (the keys one rank holds) for every query.
struct BlockPartials {
  std::vector<AttentionOutput<double>> blocks;  // [block]: out (B, S, H, D), lse (B, H, S)
};

Tensor<double> gather_rows(const Tensor<double>& t, const std::vector<int64_t>& positions) {
  const Shape& s = t.shape();
  const int64_t B = s[0], S = s[1], H = s[2], D = s[3], n = static_cast<int64_t>(positions.size());
  Tensor<double> rows({B, n, H, D});
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < n; ++i)
      std::copy_n(t.data() + ((b * S + positions[static_cast<size_t>(i)]) * H) * D, H * D,
                  rows.data() + ((b * n + i) * H) * D);
  return rows;
}

BlockPartials block_partials(const AttentionInputs<double>& in, const Layout& layout, MaskKind mask) {
  BlockPartials p;
  const std::vector<int64_t> queries = iota_positions(in.q.shape()[1]);
  for (int64_t g = 0; g < layout.ranks(); ++g) {
    const std::vector<int64_t> keys = layout.positions(g);
    p.blocks.push_back(exact_attention(in.q, gather_rows(in.k, keys), gather_rows(in.v, keys), mask, queries, keys));
  }
  return p;
}

// Which whole blocks a wrong forward row is made of: the subset of blocks (among those with keys
// the query may see) whose merged partial results reproduce the given out and lse.
void explain_row(WrongRow& row, const BlockPartials& partials, const StudentOutputs& given, int64_t ranks) {
  const int64_t b = row.batch, h = row.head, s = row.position;
  std::vector<int64_t> visible;
  for (int64_t g = 0; g < ranks; ++g) {
    const Tensor<double>& lse = partials.blocks[static_cast<size_t>(g)].lse;
    if (std::isfinite(lse.data()[(b * lse.shape()[1] + h) * lse.shape()[2] + s])) visible.push_back(g);
  }
  const Tolerance out_tol = fp32_tolerance("out"), lse_tol = fp32_tolerance("lse");
  const int64_t count = static_cast<int64_t>(visible.size());
  for (int64_t subset = (int64_t{1} << count) - 1; subset >= 1; --subset) {  // largest subsets first
    double m = -kInf;
    for (int64_t i = 0; i < count; ++i)
      if (subset >> i & 1) {
        const Tensor<double>& lse = partials.blocks[static_cast<size_t>(visible[static_cast<size_t>(i)])].lse;
        m = std::max(m, lse.data()[(b * lse.shape()[1] + h) * lse.shape()[2] + s]);
      }
    double sum = 0;
    for (int64_t i = 0; i < count; ++i)
      if (subset >> i & 1) {
        const Tensor<double>& lse = partials.blocks[static_cast<size_t>(visible[static_cast<size_t>(i)])].lse;
        sum += std::exp(lse.data()[(b * lse.shape()[1] + h) * lse.shape()[2] + s] - m);
      }
    const double merged_lse = m + std::log(sum);
    bool matches = true;
    if (!given.lse.empty()) {
      const Tensor<double>& l = given.lse;
      matches = !outside(l.data()[(b * l.shape()[1] + h) * l.shape()[2] + s], merged_lse, lse_tol);
    }
    if (matches && !given.out.empty()) {
      const Shape& shape = given.out.shape();
      const int64_t S = shape[1], H = shape[2], D = shape[3];
      for (int64_t d = 0; d < D && matches; ++d) {
        double merged = 0;
        for (int64_t i = 0; i < count; ++i)
          if (subset >> i & 1) {
            const AttentionOutput<double>& part = partials.blocks[static_cast<size_t>(visible[static_cast<size_t>(i)])];
            const double w = std::exp(part.lse.data()[(b * H + h) * S + s] - merged_lse);
            merged += w * part.out.data()[((b * S + s) * H + h) * D + d];
          }
        matches = !outside(given.out.data()[((b * S + s) * H + h) * D + d], merged, out_tol);
      }
    }
    if (!matches) continue;
    row.explained = true;
    for (int64_t i = 0; i < count; ++i) {
      const int64_t g = visible[static_cast<size_t>(i)];
      if (subset >> i & 1) {
        row.blocks_seen.push_back(g);
      } else {
        row.blocks_missed.push_back(g);
        row.steps_missed.push_back(((row.rank - g) % ranks + ranks) % ranks);  // a ring brings block g at this step
      }
    }
    std::sort(row.steps_missed.begin(), row.steps_missed.end());
    return;
  }
}

// Whether `given` matches attention computed another way (a hypothesis about the cause).
bool matches_out(const Tensor<double>& given, const Tensor<double>& other) {
  return !given.empty() && compare(given, other, fp32_tolerance("out")).ok;
}

}  // namespace

bool VerifyReport::ok() const {
  return std::all_of(tensors.begin(), tensors.end(), [](const TensorVerdict& t) { return t.result.ok; });
}

std::string VerifyReport::text() const {
  std::ostringstream out;
  out << "ringlab verify | " << dims.to_string() << " | " << (options.causal ? "causal" : "no mask") << " | "
      << layout_name(options.layout) << " layout, P=" << options.ranks << "\n\n";
  out << "tensor shape                max_abs_err max_rel_err   tol_abs   tol_rel  result\n";
  for (const TensorVerdict& t : tensors) {
    char line[160];
    std::snprintf(line, sizeof line, "%-6s %-20s %11.3e %11.3e %9.0e %9.0e  %s\n", t.name.c_str(),
                  shape_text(t.shape).c_str(), t.result.max_abs_error, t.result.max_rel_error, t.tolerance.abs,
                  t.tolerance.rel, t.result.ok ? "ok" : "WRONG");
    out << line;
    if (!t.result.ok) out << "       " << t.result.bad << " of " << t.result.count << " outside tolerance\n";
  }
  if (ok()) {
    out << "\nOK: every tensor given matches exact attention\n";
    return out.str();
  }
  out << "\n"
      << wrong_rows << " wrong rows, on rank" << (wrong_ranks.size() == 1 ? " " : "s ") << list_text(wrong_ranks)
      << " (" << layout_name(options.layout) << " layout, P = " << options.ranks << ")\n";
  for (const WrongRow& r : rows) {
    out << "  " << r.tensor << " at position " << r.position << " (batch " << r.batch << ", head " << r.head
        << "): rank " << r.rank << ", local row " << r.local_row << ", error " << sci(r.error) << "\n";
    if (r.explained && !r.blocks_missed.empty()) {
      out << "    it is attention over the keys of block" << (r.blocks_seen.size() == 1 ? " " : "s ")
          << list_text(r.blocks_seen) << " only: block" << (r.blocks_missed.size() == 1 ? " " : "s ")
          << list_text(r.blocks_missed) << " missing (a ring brings " << (r.blocks_missed.size() == 1 ? "it" : "them")
          << " to rank " << r.rank << " at step" << (r.steps_missed.size() == 1 ? " " : "s ")
          << list_text(r.steps_missed) << ")\n";
    } else if (!r.explained && (r.tensor == "out" || r.tensor == "lse")) {
      out << "    it is not attention over any set of whole blocks: the error is inside a block\n";
    }
  }
  out << "likely cause: " << cause << "\n";
  return out.str();
}

VerifyReport verify_outputs(const AttentionInputs<double>& inputs, const StudentOutputs& given,
                            const VerifyOptions& options) {
  VerifyReport report;
  report.options = options;
  const bool grads = !given.dq.empty() || !given.dk.empty() || !given.dv.empty();
  report.dims = dims_of(inputs.q.shape(), inputs.k.shape(), inputs.v.shape(), grads ? &inputs.dout.shape() : nullptr);
  const AttentionDims& d = report.dims;
  if (given.out.empty() && given.lse.empty() && !grads)
    throw UsageError("verify: no outputs to check; give out (and lse, dq, dk, dv as you have them)");
  if (grads && inputs.dout.empty())
    throw UsageError("verify: dq, dk or dv given without dout; give the upstream gradient dout (B, S, H, D) too");
  const Layout layout(options.layout, d.seq, options.ranks);
  const MaskKind mask = options.causal ? MaskKind::causal : MaskKind::none;

  const AttentionOutput<double> exact = exact_attention(inputs.q, inputs.k, inputs.v, mask);
  AttentionGrads<double> exact_grads;
  if (grads) exact_grads = exact_attention_backward(inputs.q, inputs.k, inputs.v, inputs.dout, mask);
  struct Pair {
    const char* name;
    const Tensor<double>* given;
    const Tensor<double>* exact;
  };
  const std::vector<Pair> pairs = {{"out", &given.out, &exact.out},
                                   {"lse", &given.lse, &exact.lse},
                                   {"dq", &given.dq, &exact_grads.dq},
                                   {"dk", &given.dk, &exact_grads.dk},
                                   {"dv", &given.dv, &exact_grads.dv}};
  for (const Pair& p : pairs) {
    if (p.given->empty()) continue;
    if (p.given->shape() != p.exact->shape()) {
      throw UsageError(std::string("verify: ") + p.name + " has shape " + shape_text(p.given->shape()) +
                       "; for these inputs it must be " + shape_text(p.exact->shape()) +
                       (std::string(p.name) == "lse" ? " (B, H, S)" : " (B, S, heads, D)"));
    }
    TensorVerdict verdict{p.name, p.exact->shape(), fp32_tolerance(p.name), {}};
    verdict.result = compare(*p.given, *p.exact, verdict.tolerance);
    report.tensors.push_back(verdict);
  }

  // The wrong rows, their owners, and (forward) the blocks they are made of.
  std::optional<BlockPartials> partials;
  std::set<int64_t> ranks;
  for (const Pair& p : pairs) {
    if (p.given->empty()) continue;
    const RowView view{p.given, p.exact, std::string(p.name) == "lse"};
    const Tolerance tolerance = fp32_tolerance(p.name);
    size_t shown = 0;
    for (int64_t b = 0; b < view.batch(); ++b)
      for (int64_t s = 0; s < view.positions(); ++s)
        for (int64_t h = 0; h < view.heads(); ++h) {
          double error = 0;
          bool wrong = false;
          for (int64_t e = 0; e < view.width(); ++e) {
            const int64_t i = view.index(b, s, h, e);
            const double a = p.given->data()[i], r = p.exact->data()[i];
            wrong |= outside(a, r, tolerance);
            error = std::isnan(a) || std::isnan(r) ? kInf : std::max(error, a == r ? 0.0 : std::abs(a - r));
          }
          if (!wrong) continue;
          ++report.wrong_rows;
          ranks.insert(layout.rank_of(s));
          if (shown >= kRowsShownPerTensor) continue;
          ++shown;
          WrongRow row;
          row.tensor = p.name, row.batch = b, row.head = h, row.position = s;
          row.rank = layout.rank_of(s), row.local_row = layout.local_row(s), row.error = error;
          const bool forward = row.tensor == "out" || row.tensor == "lse";
          if (forward && options.ranks <= kMaxRanksForBlocks && !has_nan(*p.given)) {
            if (!partials) partials = block_partials(inputs, layout, mask);
            explain_row(row, *partials, given, options.ranks);
          }
          report.rows.push_back(row);
        }
  }
  report.wrong_ranks.assign(ranks.begin(), ranks.end());
  if (report.ok()) return report;

  // One likely cause, the most specific that fits.
  auto verdict_of = [&](const std::string& name) -> const TensorVerdict* {
    for (const TensorVerdict& t : report.tensors)
      if (t.name == name) return &t;
    return nullptr;
  };
  const TensorVerdict *out = verdict_of("out"), *lse = verdict_of("lse"), *dq = verdict_of("dq");
  const bool out_wrong = out && !out->result.ok, lse_wrong = lse && !lse->result.ok;
  if (has_nan(given.out) || has_nan(given.lse) || has_nan(given.dq) || has_nan(given.dk) || has_nan(given.dv)) {
    report.cause =
        "NaN in the outputs: a row that sees no key at some step has max = -inf, and exp(-inf - (-inf)) is NaN; "
        "treat such a row as empty (out 0, lse -inf) and skip it in the merge";
  } else if (out_wrong && [&] {
               Tensor<double> unscaled_q = inputs.q;
               for (double& x : unscaled_q.span()) x *= std::sqrt(static_cast<double>(d.dim));
               return matches_out(given.out, exact_attention(unscaled_q, inputs.k, inputs.v, mask).out);
             }()) {
    report.cause = "the scores lack the 1/sqrt(D) scale: out is softmax(q k^T) v, not softmax(q k^T / sqrt(D)) v";
  } else if (out_wrong && options.causal &&
             matches_out(given.out, exact_attention(inputs.q, inputs.k, inputs.v, MaskKind::none).out)) {
    report.cause = "the causal mask is missing: every query sees every key";
  } else if (out_wrong && lse && !lse_wrong) {
    report.cause =
        "lse is right but out is not: the partial outputs were merged with the wrong weights (a normalised partial "
        "out_i needs exp(lse_i - lse), not exp(lse_i - max lse))";
  } else if (lse_wrong && out && !out_wrong) {
    report.cause =
        "out is right but lse is not: lse is the natural log of the softmax's sum, m + log l, laid out (B, H, S)";
  } else if (out_wrong || lse_wrong) {
    std::set<int64_t> steps;
    bool all_explained = true;
    for (const WrongRow& r : report.rows)
      if (r.tensor == "out" || r.tensor == "lse") {
        all_explained &= r.explained;
        steps.insert(r.steps_missed.begin(), r.steps_missed.end());
      }
    if (all_explained && !steps.empty()) {
      report.cause = "whole blocks are missing from the wrong rows, those a ring brings at step" +
                     std::string(steps.size() == 1 ? " " : "s ") +
                     list_text(std::vector<int64_t>(steps.begin(), steps.end())) +
                     (*steps.begin() == 0 ? ": a rank's own block is left out"
                                          : ": the loop stops early, or a received block is not the one computed on");
    } else {
      report.cause =
          "the wrong rows are not attention over whole blocks: a mask or a rescale inside a block is wrong (a causal "
          "mask compares global query and key positions, not indices within a block)";
    }
  } else if (dq && dq->result.ok) {
    report.cause =
        "dq is right but dk / dv are not: the dK/dV accumulators are added into the wrong block or not brought home "
        "(send each with its K/V block, one step behind, plus one hop home)";
  } else {
    report.cause =
        "the gradients are wrong while the forward is right: check dS = P o (dP - rowsum(dO o O)) and the 1/sqrt(D) "
        "in dq and dk";
  }
  return report;
}

}  // namespace ringlab::exercises
