// `ringlab compare`: one fixed-width table across algorithms and layouts for one configuration,
// every row costed by the dry executor on the same hardware — and the source material's scenarios
// (the source material's exercises 2, 4 and 5; ring-flash-attention's published benchmark) as named rows.
//
// The table (pinned by tests/cost/test_cli.cpp):
//   case                     layout        U     R    time ms  exposed ms  compute ms  sent MB/rank  peak MB  imbalance  note
//   ...                                                   ms          ms          ms            MB       MB   max/mean
#pragma once

#include <iosfwd>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "executors/dry/dry_executor.hpp"

namespace ringlab {

struct CompareCase {
  std::string label;  // "ring", "hybrid", "ring (no mask)" ...
  PlanSpec spec;
};

struct CompareRow {
  CompareCase what;
  bool ok = false;  // false: the configuration does not fit this case (note says why)
  std::string note;
  int64_t ulysses = 1, ring = 1;
  DrySummary summary;
  int64_t peak_memory_bytes = 0;
  double ideal_fraction = 0;  // (one device's time / P) / time: ring-flash-attention's "% of ideal"
};

struct Scenario {
  std::string name;      // --scenario NAME
  std::string title;     // one line
  std::string source;    // where it comes from
  std::string hardware;  // preset it is costed on
  std::vector<CompareCase> cases;
  std::vector<std::string> notes;  // what the table shows, printed under it
};

std::vector<std::string> scenario_names();
// Throws UsageError listing the scenarios for an unknown name.
Scenario make_scenario(const std::string& name);

// Every algorithm x layout for the configuration `base` (its algo, layout and padding are ignored:
// each case is padded anew for its own, as `ringlab run` pads it; see repadded): ring
// and all-gather in each layout, Ulysses once (the layout does not change its cost), and the
// hybrid in each layout with Ulysses degree `ulysses` (0 = the hardware's ranks per node when it
// divides P and 1 < U < P; no hybrid rows otherwise).
std::vector<CompareCase> compare_cases(const PlanSpec& base, int64_t ulysses, const Hardware& hardware);

// Costs every case (a case whose plan cannot be built becomes a row with ok = false and the
// reason in its note).
std::vector<CompareRow> run_compare(const std::vector<CompareCase>& cases, const Hardware& hardware);

void print_compare_table(std::ostream& os, const std::vector<CompareRow>& rows);
nlohmann::json compare_json(const std::vector<CompareRow>& rows, const Hardware& hardware);

}  // namespace ringlab
