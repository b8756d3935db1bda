// Every lab's rubric, validated by negative controls (the way CMU 11-868's grader is): for every
// criterion of every lab, at least one deliberately broken version must fail it and the solution
// must pass it. The table below names the pairs; a criterion with no broken version failing it
// fails its lab's test, and so does a broken version in no row (a patch must say what it breaks).
//
// A broken version is a patch against the lab's solution (broken/NAME.patch), applied here to a
// copy of the solution.cpp of today and graded with the built `ringlab grade ... --json`, once per
// version: every row of the table reads the same report. `compiles` is failed by a file that is not
// C++. The device criterion of lab 07 is asserted only where a GPU is present (elsewhere it is not
// run); its row must exist anyway. Each README's points must be the grader's.
//
// Beyond the table, each lab checks what its hints say (the missing rescale, the deadlock cycle,
// the direction/label mismatch, the missing -inf guard, the first diverging (rank, step, block)).
#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "exercises/grader/patch.hpp"
#include "tests/cli/run_binary.hpp"
#include "tests/exercises/grading_support.hpp"

using ringlab::test::run_binary;

namespace {

const std::string kBinary = RINGLAB_BINARY;

// (lab, criterion, broken version that must fail it). Rows may repeat a version (it breaks several
// criteria) and a criterion (several versions break it); every criterion needs one row at least.
struct Control {
  const char* lab;
  const char* criterion;
  const char* broken;
};

const std::vector<Control> kControls = {
    // 01-softmax-merge
    {"01-softmax-merge", "compiles", "(not C++)"},
    {"01-softmax-merge", "finalize", "lse_without_max"},
    {"01-softmax-merge", "chunk-scale", "missing_scale"},
    {"01-softmax-merge", "chunk-mask", "mask_ignored"},
    {"01-softmax-merge", "merge-two", "missing_rescale"},
    {"01-softmax-merge", "assoc-p3", "missing_rescale"},
    {"01-softmax-merge", "order-p5", "missing_rescale"},
    {"01-softmax-merge", "order-p8", "missing_rescale"},
    {"01-softmax-merge", "identity", "nan_on_empty"},
    {"01-softmax-merge", "large-scores", "no_max"},
    {"01-softmax-merge", "large-scores", "missing_rescale"},
    {"01-softmax-merge", "end-to-end", "missing_scale"},
    {"01-softmax-merge", "end-to-end", "nan_on_empty"},
    // 02-layouts
    {"02-layouts", "compiles", "(not C++)"},
    {"02-layouts", "zigzag-p1", "unit_not_scaled"},
    {"02-layouts", "zigzag-p2", "no_fold"},
    {"02-layouts", "zigzag-p2", "mirror_off_by_one"},
    {"02-layouts", "zigzag-p3", "no_fold"},
    {"02-layouts", "zigzag-token", "no_fold"},
    {"02-layouts", "zigzag-p8", "no_fold"},
    {"02-layouts", "striped-p3", "striped_contiguous"},
    {"02-layouts", "striped-p8", "striped_contiguous"},
    {"02-layouts", "striped-p8", "unit_not_scaled"},
    {"02-layouts", "partition", "unit_not_scaled"},
    {"02-layouts", "causal-pairs", "strict_pairs"},
    {"02-layouts", "balance", "mirror_off_by_one"},
    // 03-ring-forward
    {"03-ring-forward", "compiles", "(not C++)"},
    {"03-ring-forward", "p1", "lse_starts_at_zero"},
    {"03-ring-forward", "p1", "off_by_one"},
    {"03-ring-forward", "p2", "missing_rescale"},
    {"03-ring-forward", "p2", "off_by_one"},
    {"03-ring-forward", "p2", "missing_send"},
    {"03-ring-forward", "p3", "wrong_direction"},
    {"03-ring-forward", "p3", "stale_send"},
    {"03-ring-forward", "p3", "label_mismatch"},
    {"03-ring-forward", "p4-causal", "offset_mask"},
    {"03-ring-forward", "p4-causal", "label_mismatch"},
    {"03-ring-forward", "p5-zigzag", "offset_mask"},
    {"03-ring-forward", "p8", "wrong_direction"},
    {"03-ring-forward", "gqa", "offset_mask"},
    {"03-ring-forward", "empty-rows", "no_inf_guard"},
    {"03-ring-forward", "empty-rows", "missing_rescale"},
    {"03-ring-forward", "uses-messages", "shared_memory"},
    {"03-ring-forward", "rendezvous", "blocking_ring"},
    {"03-ring-forward", "perf-traffic", "sends_last_step"},
    {"03-ring-forward", "perf-overlap", "no_overlap"},
    // 04-ring-backward
    {"04-ring-backward", "compiles", "(not C++)"},
    {"04-ring-backward", "p1", "missing_send"},
    {"04-ring-backward", "p2", "missing_home_hop"},
    {"04-ring-backward", "p2", "missing_send"},
    {"04-ring-backward", "p3-direction", "reverse_dkv"},
    {"04-ring-backward", "p4-causal", "reverse_dkv"},
    {"04-ring-backward", "p5-zigzag", "reverse_dkv"},
    {"04-ring-backward", "p8", "reverse_dkv"},
    {"04-ring-backward", "gqa", "reverse_dkv"},
    {"04-ring-backward", "uses-messages", "shared_memory"},
    {"04-ring-backward", "rendezvous", "missing_send"},
    {"04-ring-backward", "perf-traffic", "sends_last_step"},
    // 05-ulysses
    {"05-ulysses", "compiles", "(not C++)"},
    {"05-ulysses", "p1", "forgets_lse"},
    {"05-ulysses", "p2", "wrong_chunk_order"},
    {"05-ulysses", "p2", "heads_back_misplaced"},
    {"05-ulysses", "p3", "wrong_chunk_order"},
    {"05-ulysses", "p4-causal", "wrong_chunk_order"},
    {"05-ulysses", "p4-gqa", "wrong_chunk_order"},
    {"05-ulysses", "p8", "wrong_chunk_order"},
    {"05-ulysses", "uses-messages", "shared_memory"},
    {"05-ulysses", "perf-traffic", "kv_all_gather"},
    // 06-causal-skip
    {"06-causal-skip", "compiles", "(not C++)"},
    {"06-causal-skip", "classify", "skip_by_first_query"},
    {"06-causal-skip", "contiguous-p3", "skip_stops_sending"},
    {"06-causal-skip", "contiguous-p8", "skip_stops_sending"},
    {"06-causal-skip", "zigzag-p4", "skip_by_rank"},
    {"06-causal-skip", "striped-p3", "skip_by_rank"},
    {"06-causal-skip", "striped-p3", "skip_by_first_query"},
    {"06-causal-skip", "uses-messages", "shared_memory"},
    {"06-causal-skip", "rendezvous", "skip_stops_sending"},
    {"06-causal-skip", "perf-skips", "never_skips"},
    {"06-causal-skip", "perf-no-mask", "always_masks"},
    // 07-block-kernel
    {"07-block-kernel", "compiles", "(not C++)"},
    {"07-block-kernel", "full-s100", "missing_rescale"},
    {"07-block-kernel", "d128", "missing_rescale"},
    {"07-block-kernel", "causal", "missing_rescale"},
    {"07-block-kernel", "gqa", "gqa_modulo"},
    {"07-block-kernel", "zigzag-striped", "mask_by_index"},
    {"07-block-kernel", "empty-rows", "nan_on_empty"},
    {"07-block-kernel", "batch", "gqa_modulo"},
    {"07-block-kernel", "batch", "mask_by_index"},
    {"07-block-kernel", "large-scores", "missing_rescale"},
    {"07-block-kernel", "device", "missing_rescale"},  // where a GPU is present
    // 08-window-ring
    {"08-window-ring", "compiles", "(not C++)"},
    {"08-window-ring", "hops", "floor_hops"},
    {"08-window-ring", "mask", "ignores_documents"},
    {"08-window-ring", "p3-window", "one_hop_short"},
    {"08-window-ring", "p4-docs", "ignores_documents"},
    {"08-window-ring", "p5-wide", "ignores_documents"},
    {"08-window-ring", "p8", "one_hop_short"},
    {"08-window-ring", "p8", "floor_hops"},
    {"08-window-ring", "uses-messages", "shared_memory"},
    {"08-window-ring", "rendezvous", "blocking_ring"},
    {"08-window-ring", "perf-traffic", "full_ring"},
};

constexpr const char* kNotCpp = "(not C++)";

std::string read(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::filesystem::path lab_folder(const std::string& lab) {
  return std::filesystem::path(RINGLAB_TEST_SOURCE_DIR) / "exercises" / "labs" / lab;
}

struct Graded : ringlab::test::GradedReport {
  std::string text(const std::string& id, const char* field) const {
    const nlohmann::json& c = criterion(id);
    return c.contains(field) && c[field].is_string() ? c[field].get<std::string>() : std::string();
  }
  bool correctness_passed() const {
    return report["score"]["correctness_passed"] == report["score"]["correctness_total"];
  }
  double score() const {
    double total = 0;
    for (const auto& c : report["criteria"])
      if (c["status"] == "passed") total += c["points"].get<double>();
    return total;
  }
};

Graded grade(const std::string& lab, const std::string& file) {
  return ringlab::test::grade_json<Graded>(kBinary, lab, file);
}

// The solution.cpp of today with `patch` applied, written where the grader can read it.
std::string patched_copy(const std::string& lab, const std::string& name, const std::filesystem::path& patch) {
  std::string text;
  INFO(patch.string());
  REQUIRE_NOTHROW(text = ringlab::grader::apply_patch(read(lab_folder(lab) / "solution.cpp"), read(patch)));
  const std::filesystem::path copy = std::filesystem::path(RINGLAB_TEST_BROKEN_DIR) / lab / (name + ".cpp");
  std::filesystem::create_directories(copy.parent_path());
  std::ofstream(copy, std::ios::binary) << text;
  return copy.string();
}

// The README's "| `id` | points | what |" rows.
std::map<std::string, double> readme_points(const std::string& lab) {
  std::map<std::string, double> points;
  std::istringstream lines(read(lab_folder(lab) / "README.md"));
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("| `", 0) != 0) continue;
    const size_t id_end = line.find('`', 3);
    const size_t cell = line.find('|', id_end);
    const size_t cell_end = line.find('|', cell + 1);
    INFO(line);
    REQUIRE(id_end != std::string::npos);
    REQUIRE(cell_end != std::string::npos);
    double value = -1;
    REQUIRE_NOTHROW(value = std::stod(line.substr(cell + 1, cell_end - cell - 1)));
    points[line.substr(3, id_end - 3)] = value;
  }
  return points;
}

// One lab's rubric: the solution, the starter and every broken version graded once, then the
// table's rows, its coverage and the README's points checked against the reports.
class Rubric {
 public:
  explicit Rubric(std::string lab) : lab_(std::move(lab)) {
    solution_ = grade(lab_, "solution");
    INFO(solution_.report.dump(2));
    CHECK(solution_.status == 0);
    CHECK(solution_.report["passed"]);
    // Every criterion that ran was judged by a process that holds none of the submission.
    for (const auto& c : solution_.report["criteria"])
      if (c["id"] != "compiles" && c["status"] != "needs-GPU") CHECK(c.value("judged", "") == "outside");
    const Graded starter = grade(lab_, "starter");
    CHECK(starter.status == 1);
    CHECK(starter.report["compiled"] == true);  // it compiles, then fails
    for (const auto& file : std::filesystem::directory_iterator(lab_folder(lab_) / "broken")) {
      const std::string name = file.path().stem().string();
      broken_[name] = grade(lab_, patched_copy(lab_, name, file.path()));
    }
    const std::filesystem::path not_cpp = std::filesystem::path(RINGLAB_TEST_BROKEN_DIR) / lab_ / "not_cpp.cpp";
    std::filesystem::create_directories(not_cpp.parent_path());
    std::ofstream(not_cpp) << "this is not C++\n";
    broken_[kNotCpp] = grade(lab_, not_cpp.string());
  }

  const Graded& solution() const { return solution_; }
  const Graded& broken(const std::string& name) const {
    INFO(lab_ << ": no broken/" << name << ".patch");
    REQUIRE(broken_.count(name) == 1);
    return broken_.at(name);
  }

  // The table's rows for this lab, every criterion covered, every broken version used.
  void check_table() const {
    std::set<std::string> covered, used{kNotCpp};
    for (const Control& row : kControls) {
      if (row.lab != lab_) continue;
      INFO(lab_ << ": " << row.criterion << " must fail with broken/" << row.broken);
      const Graded& g = broken(row.broken);
      INFO(g.report.dump(2));
      CHECK(g.status == 1);
      covered.insert(row.criterion);
      used.insert(row.broken);
      const std::string on_solution = solution_.status_of(row.criterion);
      if (on_solution == "needs-GPU") continue;  // not run here: neither version can fail it
      CHECK(on_solution == "passed");
      CHECK(g.status_of(row.criterion) == "failed");
    }
    for (const auto& c : solution_.report["criteria"]) {
      INFO(lab_ << ": criterion " << c["id"] << " has no broken version in the table that must fail it");
      CHECK(covered.count(c["id"]) == 1);
    }
    for (const auto& [name, graded] : broken_) {
      INFO(lab_ << ": broken/" << name << " is in no row of the table: say which criterion it must fail");
      CHECK(used.count(name) == 1);
    }
    // The README states every criterion's points, as the grader scores them.
    // (A criterion not run for want of a GPU is listed with its points; the grader may leave it
    // out of the score here, so only its presence is compared.)
    std::map<std::string, double> declared = readme_points(lab_);
    std::map<std::string, double> graded;
    for (const auto& c : solution_.report["criteria"]) {
      graded[c["id"]] = c["points"].get<double>();
      if (c["status"] == "needs-GPU" && declared.count(c["id"]) == 1) declared[c["id"]] = graded[c["id"]];
    }
    CHECK(declared == graded);
    // Every broken version scores less than the solution.
    for (const auto& [name, g] : broken_) {
      INFO(name);
      CHECK(g.score() < solution_.score());
    }
  }

  // A broken version also passes these: its failure is the one it was written for.
  void passes(const std::string& name, std::initializer_list<const char*> criteria) const {
    const Graded& g = broken(name);
    for (const char* ok : criteria) {
      INFO(lab_ << " broken/" << name << " must pass " << ok);
      CHECK(g.status_of(ok) == "passed");
    }
  }

 private:
  std::string lab_;
  Graded solution_;
  std::map<std::string, Graded> broken_;
};

bool has(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }

}  // namespace

TEST_CASE("rubric negative controls: 01-softmax-merge", "[exercises][grader]") {
  const Rubric lab("01-softmax-merge");
  lab.check_table();
  lab.passes("missing_scale", {"finalize", "merge-two", "identity"});
  lab.passes("missing_rescale", {"finalize", "chunk-scale", "identity"});
  lab.passes("nan_on_empty", {"finalize", "chunk-scale", "merge-two"});
  lab.passes("no_max", {"chunk-scale", "merge-two", "identity"});
  lab.passes("lse_without_max", {"chunk-scale", "merge-two", "identity"});
  lab.passes("mask_ignored", {"finalize", "chunk-scale", "merge-two", "identity"});
  // large-scores' hint names the function that fails on its own: the merge here, chunk_state below.
  const std::string rescale_hint = lab.broken("missing_rescale").text("large-scores", "hint");
  CHECK(has(rescale_hint, "your merge"));
  CHECK_FALSE(has(rescale_hint, "subtract the row's max"));
  CHECK(has(lab.broken("no_max").text("large-scores", "hint"), "subtract the row's max"));
}

TEST_CASE("rubric negative controls: 02-layouts", "[exercises][grader]") {
  const Rubric lab("02-layouts");
  lab.check_table();
  lab.passes("no_fold", {"zigzag-p1", "striped-p3", "causal-pairs"});
  lab.passes("mirror_off_by_one", {"zigzag-p1", "striped-p8"});
  lab.passes("strict_pairs", {"zigzag-p8", "partition"});
  lab.passes("striped_contiguous", {"zigzag-p1", "zigzag-p8", "causal-pairs", "partition"});
  lab.passes("unit_not_scaled", {"striped-p3", "zigzag-token", "causal-pairs"});
}

TEST_CASE("rubric negative controls: 03-ring-forward", "[exercises][grader]") {
  const Rubric lab("03-ring-forward");
  lab.check_table();
  lab.passes("wrong_direction", {"p1", "p2"});
  CHECK(has(lab.broken("wrong_direction").text("p3", "deadlock"), "cycle of waits"));
  const Graded& rescale = lab.broken("missing_rescale");
  lab.passes("missing_rescale", {"p1"});
  CHECK(rescale.criterion("p2")["observed_error"].get<double>() > rescale.criterion("p2")["tolerance"].get<double>());
  CHECK(lab.broken("off_by_one").criterion("p2")["first_divergence"]["block"] == 1);
  lab.passes("missing_send", {"p1"});
  CHECK(lab.broken("missing_send").criterion("p2").contains("deadlock"));
  lab.passes("offset_mask", {"p1", "p2", "p3", "p8"});
  // `if kv_offset > 0` leaves rank 0's own block, at offset 0, unmasked: rank 0 goes wrong first.
  CHECK(lab.broken("offset_mask").criterion("p4-causal")["first_divergence"]["rank"] == 0);
  CHECK(lab.broken("offset_mask").criterion("p4-causal")["first_divergence"]["block"] == 0);
  lab.passes("blocking_ring", {"p2", "p3", "p8"});
  // A send buffer one step behind: block r - 1 twice, r + 1 never; P = 2 cannot tell.
  lab.passes("stale_send", {"p1", "p2"});
  CHECK(has(lab.broken("stale_send").criterion("p3")["first_divergence"]["what"], "computed a second time"));
  lab.passes("no_overlap", {"perf-traffic"});
  CHECK(lab.broken("no_overlap").correctness_passed());
  lab.passes("sends_last_step", {"perf-overlap"});
  CHECK(lab.broken("sends_last_step").correctness_passed());
  lab.passes("lse_starts_at_zero", {"empty-rows"});
  // Blocks read from memory the ranks share, while the sends go out for show: every other
  // correctness criterion passes (and the traffic counted would too: performance is graded once
  // all of them pass); altering the messages changes nothing.
  lab.passes("shared_memory", {"p1", "p2", "p3", "p4-causal", "p5-zigzag", "p8", "gqa", "empty-rows", "rendezvous"});
  CHECK(has(lab.broken("shared_memory").criterion("uses-messages")["message"], "did not receive"));
  // Blocks sent forward but named as if they came backward (origin = rank + step): full attention
  // cannot see positions and P = 2 cannot tell the directions apart, so p3 is where it shows, and
  // its hint names the mismatch, not the mask.
  const Graded& label = lab.broken("label_mismatch");
  lab.passes("label_mismatch", {"p1", "p2", "empty-rows"});
  CHECK(has(label.text("p3", "hint"), "direction/label mismatch"));
  CHECK(label.criterion("p3")["first_divergence"]["step"] == 1);
  CHECK(has(label.criterion("p3")["first_divergence"]["what"], "the block the other direction brings"));
  CHECK(has(label.text("p4-causal", "hint"), "direction/label mismatch"));
  // A merge with no -inf guard is exact on every ring (the own block comes first, and shows each
  // query its own key); merge_into on rows empty on both sides gives NaN, and the hint says why.
  const Graded& guard = lab.broken("no_inf_guard");
  lab.passes("no_inf_guard", {"p1", "p2", "p3", "p4-causal", "p5-zigzag", "p8", "gqa", "rendezvous"});
  CHECK(has(guard.text("empty-rows", "hint"), "-inf guard is missing"));
  // The ring reversed consistently (send to r - 1, receive from r + 1, origin r + step) is right.
  const std::filesystem::path reversed = std::filesystem::path(RINGLAB_TEST_FIXTURES) / "lab03_reversed_ring.patch";
  const Graded consistent = grade("03-ring-forward", patched_copy("03-ring-forward", "reversed_ring", reversed));
  INFO(consistent.report.dump(2));
  CHECK(consistent.status == 0);
  CHECK(consistent.report["passed"]);
}

TEST_CASE("rubric negative controls: 04-ring-backward", "[exercises][grader]") {
  const Rubric lab("04-ring-backward");
  lab.check_table();
  // K/V read from the ranks' shared memory, the messages sent for show: right everywhere else.
  lab.passes("shared_memory", {"p1", "p2", "p3-direction", "p4-causal", "p5-zigzag", "p8", "gqa", "rendezvous"});
  lab.passes("reverse_dkv", {"p1", "p2"});
  // step 0's accumulators are each rank's own: the first wrong add is at step 1
  CHECK(lab.broken("reverse_dkv").criterion("p3-direction")["first_divergence"]["step"] == 1);
  lab.passes("missing_home_hop", {"p1"});
  CHECK(lab.broken("missing_send").criterion("p2").contains("deadlock"));
  CHECK(lab.broken("sends_last_step").correctness_passed());
}

TEST_CASE("rubric negative controls: 05-ulysses", "[exercises][grader]") {
  const Rubric lab("05-ulysses");
  lab.check_table();
  // q, k and v read from the ranks' shared memory, the all-to-alls made for show: right elsewhere.
  lab.passes("shared_memory", {"p1", "p2", "p3", "p4-causal", "p4-gqa", "p8"});
  lab.passes("wrong_chunk_order", {"p1"});
  CHECK(lab.broken("wrong_chunk_order").criterion("p2")["first_divergence"]["step"] == 0);     // the all-to-all in
  CHECK(lab.broken("heads_back_misplaced").criterion("p2")["first_divergence"]["step"] == 1);  // the all-to-all back
  CHECK(lab.broken("kv_all_gather").correctness_passed());
  CHECK(has(lab.broken("kv_all_gather").text("perf-traffic", "hint"), "gathering everything everywhere"));
}

TEST_CASE("rubric negative controls: 06-causal-skip", "[exercises][grader]") {
  const Rubric lab("06-causal-skip");
  lab.check_table();
  lab.passes("shared_memory", {"classify", "contiguous-p3", "contiguous-p8", "zigzag-p4", "striped-p3", "rendezvous"});
  lab.passes("skip_stops_sending", {"classify"});
  CHECK(lab.broken("skip_stops_sending").criterion("contiguous-p3").contains("deadlock"));
  lab.passes("skip_by_rank", {"classify", "contiguous-p3", "contiguous-p8"});
  CHECK(lab.broken("never_skips").correctness_passed());
  CHECK(lab.broken("always_masks").correctness_passed());
  lab.passes("always_masks", {"perf-skips"});
  lab.passes("skip_by_first_query", {"contiguous-p3", "contiguous-p8"});
}

#ifdef RINGLAB_WITH_LAB07
TEST_CASE("rubric negative controls: 07-block-kernel (kernels under the warp emulator)", "[exercises][grader]") {
  const Rubric lab("07-block-kernel");
  lab.check_table();
  // Without a GPU the device criterion is reported, not run, and does not fail the grade.
  const std::string device = lab.solution().status_of("device");
  CHECK((device == "needs-GPU" || device == "passed"));
  CHECK(grade("07-block-kernel", "starter").text("full-s100", "message").find("wrote nothing") != std::string::npos);
  lab.passes("mask_by_index", {"full-s100", "causal", "gqa"});
  CHECK(has(lab.broken("mask_by_index").text("zigzag-striped", "hint"), "global positions"));
  lab.passes("nan_on_empty", {"full-s100", "causal", "batch"});
  CHECK(has(lab.broken("nan_on_empty").text("empty-rows", "message"), "sees no key"));
  lab.passes("gqa_modulo", {"full-s100", "causal", "zigzag-striped"});
}
#endif

TEST_CASE("rubric negative controls: 08-window-ring", "[exercises][grader]") {
  const Rubric lab("08-window-ring");
  lab.check_table();
  lab.passes("shared_memory", {"hops", "mask", "p3-window", "p4-docs", "p5-wide", "p8", "rendezvous"});
  lab.passes("one_hop_short", {"hops", "mask"});
  CHECK(has(lab.broken("one_hop_short").criterion("p3-window")["first_divergence"]["what"], "never computed"));
  CHECK(lab.broken("floor_hops").status_of("p3-window") == "failed");
  lab.passes("floor_hops", {"mask"});
  lab.passes("ignores_documents", {"hops", "p3-window"});
  CHECK(has(lab.broken("ignores_documents").criterion("p4-docs")["first_divergence"]["what"], "different documents"));
  CHECK(lab.broken("full_ring").correctness_passed());
  lab.passes("blocking_ring", {"hops", "mask"});
}
