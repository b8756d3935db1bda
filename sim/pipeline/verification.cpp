#include "sim/pipeline/verification.hpp"

#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <ostream>

#include "reference/exact_attention.hpp"

namespace ringlab {

ReferenceOutputs compute_reference(const AttentionInputs<double>& inputs, const Mask& mask, bool backward) {
  ReferenceOutputs reference;
  reference.forward = exact_attention(inputs.q, inputs.k, inputs.v, mask);
  if (backward) reference.grads = exact_attention_backward(inputs.q, inputs.k, inputs.v, inputs.dout, mask);
  return reference;
}

bool Verification::ok() const {
  for (const TensorCheck& check : checks)
    if (!check.result.ok) return false;
  return !checks.empty();
}

void Verification::add_single_rank(const Verification& single_rank) {
  single_rank_executor = single_rank.executor;
  for (size_t i = 0; i < checks.size() && i < single_rank.checks.size(); ++i)
    checks[i].single_rank_max_error = single_rank.checks[i].result.max_abs_error,
    checks[i].single_rank_rms_error = single_rank.checks[i].result.rms_error;
}

Verification verify(const RunOutputs& outputs, const ReferenceOutputs& reference, const std::string& executor,
                    ToleranceFunction tolerance_of) {
  Verification verification{executor, {}, ""};
  auto check = [&](const char* name, const Tensor<float>& actual, const Tensor<double>& expected) {
    const Tolerance tolerance = tolerance_of(name);
    CompareResult result;
    if (actual.shape() != expected.shape()) {
      result.ok = false;
      result.bad = result.count = expected.size();
      result.tolerance_used = INFINITY;
    } else {
      result = compare(actual, expected, tolerance);
    }
    verification.checks.push_back({name, expected.shape(), tolerance, result, -1, -1});
  };
  check("out", outputs.out, reference.forward.out);
  check("lse", outputs.lse, reference.forward.lse);
  if (!reference.grads.dq.empty()) {
    check("dq", outputs.dq, reference.grads.dq);
    check("dk", outputs.dk, reference.grads.dk);
    check("dv", outputs.dv, reference.grads.dv);
  }
  return verification;
}

void print_verification(std::ostream& os, const Verification& verification) {
  char line[256];
  os << "verification: " << verification.executor << " vs exact attention (float64)\n";
  const bool single = !verification.single_rank_executor.empty();
  if (single) os << "P=1 columns: the same problem on " << verification.single_rank_executor << "\n";
  std::snprintf(line, sizeof line, "%-6s %-20s %11s %11s %9s %9s %8s  %s", "tensor", "shape", "max_abs_err",
                "max_rel_err", "tol_abs", "tol_rel", "tol_used", "result");
  os << line << (single ? "   rms_err  P=1_max  P=1_rms  max/P=1  rms/P=1\n" : "\n");
  int passed = 0;
  for (const TensorCheck& check : verification.checks) {
    const CompareResult& r = check.result;
    char used[16];
    if (std::isfinite(r.tolerance_used) && r.tolerance_used < 100) {
      std::snprintf(used, sizeof used, "%.0f%%", 100.0 * r.tolerance_used);
    } else if (std::isfinite(r.tolerance_used)) {
      std::snprintf(used, sizeof used, ">9999%%");
    } else {
      std::snprintf(used, sizeof used, "inf");
    }
    std::snprintf(line, sizeof line, "%-6s %-20s %11.3e %11.3e %9.0e %9.0e %8s  %-4s", check.name.c_str(),
                  shape_string(check.shape).c_str(), r.max_abs_error, r.max_rel_error, check.tolerance.abs,
                  check.tolerance.rel, used, r.ok ? "ok" : "FAIL");
    std::string row = line;
    if (!single) row.erase(row.find_last_not_of(' ') + 1);  // no trailing blanks after "ok"
    os << row;
    if (single && check.single_rank_max_error >= 0) {
      auto ratio = [](double a, double b) { return b > 0 ? a / b : 1.0; };
      char extra[96];
      std::snprintf(extra, sizeof extra, " %9.2e %8.2e %8.2e %7.2fx %7.2fx", r.rms_error, check.single_rank_max_error,
                    check.single_rank_rms_error, ratio(r.max_abs_error, check.single_rank_max_error),
                    ratio(r.rms_error, check.single_rank_rms_error));
      os << extra;
    }
    os << "\n";
    if (!r.ok) os << "       " << r.describe() << "\n";
    passed += r.ok ? 1 : 0;
  }
  os << std::string(96, '-') << "\n";
  const int total = static_cast<int>(verification.checks.size());
  os << (verification.ok() ? "PASS" : "FAIL") << ": " << passed << " of " << total << " tensors within tolerance\n";
}

nlohmann::json to_json(const Verification& verification) {
  nlohmann::json checks = nlohmann::json::array();
  for (const TensorCheck& check : verification.checks) {
    const CompareResult& r = check.result;
    nlohmann::json entry = {{"tensor", check.name},
                            {"shape", check.shape},
                            {"ok", r.ok},
                            {"max_abs_error", r.max_abs_error},
                            {"max_rel_error", r.max_rel_error},
                            {"tol_abs", check.tolerance.abs},
                            {"tol_rel", check.tolerance.rel},
                            {"bad", r.bad},
                            {"count", r.count}};
    entry["tolerance_used"] =
        std::isfinite(r.tolerance_used) ? nlohmann::json(r.tolerance_used) : nlohmann::json("inf");
    if (check.single_rank_max_error >= 0) {
      entry["rms_error"] = r.rms_error;
      entry["single_rank_max_abs_error"] = check.single_rank_max_error;
      entry["single_rank_rms_error"] = check.single_rank_rms_error;
    }
    if (!r.ok) {
      entry["first_bad_index"] = r.first_bad_index;
      entry["first_bad_actual"] = r.first_bad_actual;
      entry["first_bad_expected"] = r.first_bad_expected;
    }
    checks.push_back(entry);
  }
  nlohmann::json result = {{"executor", verification.executor}, {"ok", verification.ok()}, {"checks", checks}};
  if (!verification.single_rank_executor.empty()) result["single_rank_executor"] = verification.single_rank_executor;
  return result;
}

}  // namespace ringlab
