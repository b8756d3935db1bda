#include "sim/plan/print.hpp"

#include <algorithm>
#include <cstdio>
#include <ostream>

#include "sim/plan/queries.hpp"

namespace ringlab {

namespace {

std::string cell_of(const std::vector<Op>& ops, size_t& cursor, int phase, int64_t step) {
  std::string compute, rest;  // the compute first, then sends and the rest
  auto append_to = [](std::string& text, const std::string& token) {
    if (!text.empty()) text += ' ';
    text += token;
  };
  auto append = [&](const std::string& token) { append_to(rest, token); };
  while (cursor < ops.size() && ops[cursor].phase == phase && ops[cursor].step == step) {
    std::visit(
        [&](const auto& body) {
          using T = std::decay_t<decltype(body)>;
          if constexpr (std::is_same_v<T, ComputeOp>) {
            append_to(compute, "b" + std::to_string(body.kv_block) + " " + block_shape_name(body.shape));
          } else if constexpr (std::is_same_v<T, ExchangeOp>) {
            if (body.send_to >= 0)
              append(std::string(body.payload == Payload::kv ? "kv>" : "dkv>") + std::to_string(body.send_to));
          } else if constexpr (std::is_same_v<T, CollectiveOp>) {
            append(collective_name(body.collective));
          } else if constexpr (std::is_same_v<T, FinalizeOp>) {
            append("finalize");
          } else if constexpr (std::is_same_v<T, StoreGradsOp>) {
            append("store dK/dV");
          }
        },
        ops[cursor].body);
    ++cursor;
  }
  if (!rest.empty()) append_to(compute, rest);
  return compute;
}

}  // namespace

void print_plan(std::ostream& os, const Plan& plan, const PlanPrintOptions& options) {
  const int64_t P = plan.ranks();
  std::vector<int64_t> shown;
  for (int64_t r = 0; r < P; ++r)
    if (P <= options.max_ranks || r < options.max_ranks / 2 || r >= P - options.max_ranks / 2) shown.push_back(r);
  std::vector<std::vector<Op>> ops(static_cast<size_t>(P));
  for (int64_t r : shown) ops[r] = expand(plan, r);
  std::vector<size_t> cursor(static_cast<size_t>(P), 0);

  os << "plan: " << plan.spec().describe() << "\n";
  os << "layout: " << plan.layout().to_string() << ", " << plan.ring() << " ring position(s) of " << plan.block_tokens()
     << " tokens";
  if (plan.ulysses() > 1) os << ", Ulysses groups of " << plan.ulysses() << " ranks";
  os << "\n";
  os << "cells: b<block> <shape> = this step's compute (full, diag, q-half, kv-half, partial, skip, masked);"
        " kv>r / dkv>r = sends to rank r\n";
  if (static_cast<int64_t>(shown.size()) < P) {
    os << "(showing ranks 0.." << options.max_ranks / 2 - 1 << " and " << P - options.max_ranks / 2 << ".." << P - 1
       << " of " << P << ")\n";
  }
  for (size_t p = 0; p < plan.phases().size(); ++p) {
    const Phase& phase = plan.phases()[p];
    std::vector<std::vector<std::string>> cells(static_cast<size_t>(phase.steps));
    int width = 8;
    for (int64_t step = 0; step < phase.steps; ++step)
      for (int64_t r : shown) {
        cells[step].push_back(cell_of(ops[r], cursor[r], static_cast<int>(p), step));
        width = std::max(width, static_cast<int>(cells[step].back().size()));
      }
    width = std::min(width, 44);
    os << "\n" << phase.name << " (" << phase.steps << (phase.steps == 1 ? " step" : " steps") << ")\n";
    char buffer[64];
    std::snprintf(buffer, sizeof buffer, "%5s", "step");
    os << buffer;
    for (int64_t r : shown) {
      std::snprintf(buffer, sizeof buffer, " | %-*s", width, ("rank " + std::to_string(r)).c_str());
      os << buffer;
    }
    os << "\n";
    for (int64_t step = 0; step < phase.steps; ++step) {
      std::snprintf(buffer, sizeof buffer, "%5lld", static_cast<long long>(step));
      os << buffer;
      for (std::string cell : cells[step]) {
        if (static_cast<int>(cell.size()) > width) cell = cell.substr(0, width - 1) + "~";
        std::snprintf(buffer, sizeof buffer, " | %-*s", width, cell.c_str());
        os << buffer;
      }
      os << "\n";
    }
  }

  // Footer: work and K/V traffic per rank, and the balance over all ranks.
  os << "\nper rank  blocks computed (of them masked) / skipped, visible pairs per (batch, head), GFLOP,\n"
        "          K/V MB received, of it MB of blocks the rank never uses\n";
  std::vector<RankWork> work;
  for (int64_t r = 0; r < P; ++r)
    work.push_back(
        rank_work(plan, r, r < static_cast<int64_t>(ops.size()) && !ops[r].empty() ? ops[r] : expand(plan, r)));
  for (int64_t r : shown) {
    const RankWork& w = work[static_cast<size_t>(r)];
    char line[160];
    std::snprintf(line, sizeof line, "  rank %-4lld %4lld (%lld) / %-4lld %14lld %12.3f %10.3f %10.3f\n",
                  static_cast<long long>(r), static_cast<long long>(w.computed), static_cast<long long>(w.partial),
                  static_cast<long long>(w.skipped), static_cast<long long>(w.pairs), w.flops / 1e9,
                  static_cast<double>(w.kv_bytes_received) / 1e6, static_cast<double>(w.kv_bytes_unused) / 1e6);
    os << line;
  }
  int64_t received = 0, unused = 0;
  for (const RankWork& w : work) received += w.kv_bytes_received, unused += w.kv_bytes_unused;
  const FlopsBalance balance = flops_balance(work);
  char line[200];
  std::snprintf(line, sizeof line, "imbalance: max/mean FLOPs %.3f (rank %lld busiest)", balance.ratio,
                static_cast<long long>(balance.busiest));
  os << line;
  if (received > 0) {
    std::snprintf(line, sizeof line, "; K/V received %.3f MB, %.1f%% of it never used by its receiver",
                  static_cast<double>(received) / 1e6,
                  100.0 * static_cast<double>(unused) / static_cast<double>(received));
    os << line;
  }
  os << "\n";
}

}  // namespace ringlab
