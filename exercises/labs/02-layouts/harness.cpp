// Lab 02's hidden tests: the student's layouts against reference/layout.hpp at P = 1, 2, 3, 4, 8
// (unit blocks from one token to S/(2P)), the partition property, pair counts against
// causal_pairs_of_positions, and the zig-zag balance measured with the student's own functions.
// Judged from outside: every call into the student's code goes through a criterion's lab::Calls, which
// records what the call produced where the student's code runs and replays it where the judge runs
// (all of a criterion's calls cross in one lab::across).
// Sections: [criteria]
#include <algorithm>
#include <functional>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <utility>

#include "exercises/labs/02-layouts/lab.hpp"
#include "exercises/labs/common/harness.hpp"

namespace ringlab::lab02 {

namespace {

using lab::CriterionResult;
using Positions = std::vector<int64_t>(int64_t, int64_t, int64_t, int64_t);

// ---- [criteria] --------------------------------------------------------------------------------

// A rank's positions by the student's `layout`.
std::vector<int64_t> student_positions(lab::Calls& calls, Positions* layout, int64_t seq, int64_t ranks, int64_t rank,
                                       int64_t block) {
  return calls.value<std::vector<int64_t>>([&] { return layout(seq, ranks, rank, block); });
}

std::string list_text(const std::vector<int64_t>& v, size_t max = 12) {
  std::string text = "[";
  for (size_t i = 0; i < v.size() && i < max; ++i) text += (i ? ", " : "") + std::to_string(v[i]);
  return text + (v.size() > max ? ", ...]" : "]");
}

// Every rank's positions against the library's layout; the first wrong (rank, index) is named.
CriterionResult layout_criterion(lab::Calls& calls, LayoutKind kind, int64_t seq, int64_t ranks, int64_t block) {
  CriterionResult result;
  const Layout reference(kind, seq, ranks, block);
  Positions* student = kind == LayoutKind::zigzag ? zigzag_positions : striped_positions;
  for (int64_t r = 0; r < ranks; ++r) {
    const std::vector<int64_t> got = student_positions(calls, student, seq, ranks, r, block),
                               expected = reference.positions(r);
    if (got == expected) continue;
    size_t i = 0;
    while (i < got.size() && i < expected.size() && got[i] == expected[i]) ++i;
    result.fail(std::string(layout_name(kind)) + " S = " + std::to_string(seq) + ", P = " + std::to_string(ranks) +
                ", block " + std::to_string(block) + ": rank " + std::to_string(r) + " got " + list_text(got) +
                ", expected " + list_text(expected));
    result.divergence = lab::Divergence{
        r, -1, expected.empty() ? -1 : (i < expected.size() ? expected[i] / block : -1),
        i < got.size() && i < expected.size()
            ? "position #" + std::to_string(i) + " is " + std::to_string(got[i]) + ", expected " +
                  std::to_string(expected[i]) + " (unit " + std::to_string(expected[i] / block) + ")"
            : "got " + std::to_string(got.size()) + " positions, expected " + std::to_string(expected.size())};
    result.hint =
        kind == LayoutKind::zigzag
            ? "round k = unit / P: even rounds give unit k P + r to rank r, odd rounds give unit k P + (P-1-r)"
            : "unit u of `block` tokens goes to rank u mod P";
    break;
  }
  return result;
}

CriterionResult partition_criterion(lab::Calls& calls) {
  CriterionResult result;
  for (int64_t ranks : {2, 3, 5, 8})
    for (LayoutKind kind : {LayoutKind::zigzag, LayoutKind::striped})
      for (int64_t block : {int64_t{1}, int64_t{3}}) {
        const int64_t seq = 2 * ranks * block * 3;
        std::vector<int64_t> seen(static_cast<size_t>(seq), -1);
        for (int64_t r = 0; r < ranks; ++r) {
          Positions* student = kind == LayoutKind::zigzag ? zigzag_positions : striped_positions;
          const std::vector<int64_t> mine = student_positions(calls, student, seq, ranks, r, block);
          if (static_cast<int64_t>(mine.size()) != seq / ranks || !std::is_sorted(mine.begin(), mine.end())) {
            result.fail(std::string(layout_name(kind)) + " P = " + std::to_string(ranks) + ": rank " +
                        std::to_string(r) + " holds " + list_text(mine) +
                        "; every rank holds S/P = " + std::to_string(seq / ranks) + " positions, ascending");
            return result;
          }
          for (int64_t p : mine) {
            if (p < 0 || p >= seq || seen[static_cast<size_t>(p)] >= 0) {
              result.fail(std::string(layout_name(kind)) + " S = " + std::to_string(seq) +
                          ", P = " + std::to_string(ranks) + ", block " + std::to_string(block) + ": position " +
                          std::to_string(p) +
                          (p < 0 || p >= seq ? " is out of range"
                                             : " is on rank " + std::to_string(seen[static_cast<size_t>(p)]) +
                                                   " and rank " + std::to_string(r)));
              result.hint = "every position 0..S-1 must be on exactly one rank";
              return result;
            }
            seen[static_cast<size_t>(p)] = r;
          }
        }
      }
  return result;
}

CriterionResult pairs_criterion(lab::Calls& calls) {
  CriterionResult result;
  std::mt19937_64 random(7);
  for (int trial = 0; trial < 40; ++trial) {
    std::vector<int64_t> q(static_cast<size_t>(1 + random() % 20)), k(static_cast<size_t>(1 + random() % 20));
    for (int64_t& x : q) x = static_cast<int64_t>(random() % 50);
    for (int64_t& x : k) x = static_cast<int64_t>(random() % 50);
    if (trial % 2) std::sort(k.begin(), k.end());
    const int64_t got = calls.value<int64_t>([&] { return causal_pairs(q, k); }),
                  expected = causal_pairs_of_positions(q, k);
    if (got != expected) {
      result.fail("causal_pairs(q = " + list_text(q) + ", k = " + list_text(k) + ") = " + std::to_string(got) +
                  ", expected " + std::to_string(expected));
      result.hint = "a query at position i sees the keys at positions <= i, itself included";
      return result;
    }
  }
  return result;
}

// The zig-zag layout balances causal work exactly (with the 2P-chunk block); contiguous does not.
CriterionResult balance_criterion(lab::Calls& calls) {
  CriterionResult result;
  for (int64_t ranks : {3, 4, 8}) {
    const int64_t seq = 2 * ranks * 16, block = seq / (2 * ranks);
    std::vector<int64_t> all(static_cast<size_t>(seq));
    std::iota(all.begin(), all.end(), int64_t{0});
    std::vector<int64_t> work;
    for (int64_t r = 0; r < ranks; ++r) {
      const std::vector<int64_t> mine = student_positions(calls, zigzag_positions, seq, ranks, r, block);
      work.push_back(calls.value<int64_t>([&] { return causal_pairs(mine, all); }));
    }
    const auto [lo, hi] = std::minmax_element(work.begin(), work.end());
    if (*lo != *hi) {
      result.fail("zig-zag P = " + std::to_string(ranks) + ": causal work per rank " + list_text(work) +
                  " is not balanced (max / min = " + std::to_string(double(*hi) / double(*lo)) + ")");
      result.hint = "with block S/(2P), rank r must hold chunks r and 2P-1-r, whose work adds up to the same";
      return result;
    }
  }
  return result;
}

}  // namespace

}  // namespace ringlab::lab02

namespace ringlab::lab {

const char* lab_name() { return "02-layouts"; }

// Each criterion's calls into the student's code cross as one frame, named after the layout or the
// criterion.
std::vector<Criterion> lab_criteria() {
  using namespace ringlab::lab02;
  auto layout = [](LayoutKind kind, int64_t seq, int64_t ranks, int64_t block) {
    return [=] {
      return lab::Calls::across(layout_name(kind),
                                [=](lab::Calls& calls) { return layout_criterion(calls, kind, seq, ranks, block); });
    };
  };
  auto zig = [layout](int64_t seq, int64_t ranks, int64_t block) {
    return layout(LayoutKind::zigzag, seq, ranks, block);
  };
  auto stripe = [layout](int64_t seq, int64_t ranks, int64_t block) {
    return layout(LayoutKind::striped, seq, ranks, block);
  };
  auto judged = [](const char* what, CriterionResult (*criterion)(lab::Calls&)) {
    return [what, criterion] { return lab::Calls::across(what, criterion); };
  };
  return {
      {"zigzag-p1", "zig-zag, P = 1 (one rank holds everything)", 20, false, false, zig(16, 1, 8)},
      {"zigzag-p2", "zig-zag, P = 2, 2P chunks", 20, false, false, zig(32, 2, 8)},
      {"zigzag-p3", "zig-zag, P = 3, 2P chunks", 20, false, false, zig(48, 3, 8)},
      {"zigzag-token", "zig-zag, P = 4, token-level fold (S = 16: rank 0 holds 0, 7, 8, 15)", 20, false, false,
       zig(16, 4, 1)},
      {"zigzag-p8", "zig-zag, P = 8, several folds (block 4, S = 256)", 20, false, false, zig(256, 8, 4)},
      {"striped-p3", "striped, P = 3, one token per unit", 20, false, false, stripe(24, 3, 1)},
      {"striped-p8", "striped, P = 8, units of 2 tokens", 20, false, false, stripe(64, 8, 2)},
      {"partition", "every position on exactly one rank, S/P each, ascending (P = 2, 3, 5, 8)", 20, false, false,
       judged("partition", partition_criterion)},
      {"causal-pairs", "causal_pairs counts the pairs with key <= query, any order", 20, false, false,
       judged("causal-pairs", pairs_criterion)},
      {"balance", "zig-zag balances the causal work exactly (P = 3, 4, 8), by your own functions", 20, false, false,
       judged("balance", balance_criterion)},
  };
}

}  // namespace ringlab::lab
