// `ringlab study precision`: the low-precision study (executors/sim/precision_study.hpp) — the
// run's problem flags and --precision / --merge, a list of rank counts, one table or --json.
#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/ringlab/commands.hpp"
#include "executors/sim/precision_study.hpp"
#include "reference/error.hpp"
#include "sim/pipeline/config.hpp"

namespace ringlab::cli {

namespace {

struct StudyFlags {
  RunConfig config;
  std::vector<int64_t> ranks{1, 2, 4, 8};
};

}  // namespace

void add_study_commands(CLI::App& app, Registry& registry) {
  CLI::App* study = app.add_subcommand("study", "studies that run one problem many ways: precision");
  study->require_subcommand(1);
  auto flags = std::make_shared<StudyFlags>();
  flags->config.precision = "bf16";
  CLI::App* precision = study->add_subcommand(
      "precision",
      "error against float64 at each P, accumulating in fp32 and in the storage precision, forward and backward");
  add_schedule_flags(*precision, flags->config, false);
  precision
      ->add_option(
          "--ranks,-P", flags->ranks,
          "rank counts, e.g. 1,2,4,8,16,32 (P=1 is always run; at most " + std::to_string(kMaxStudiedRanks) + ")")
      ->delimiter(',')
      ->capture_default_str();
  precision->add_option("--in", flags->config.in_dir, "read q.npy k.npy v.npy [dout.npy] from DIR");
  precision->add_option("--precision", flags->config.precision, "storage precision: bf16 | fp16")
      ->capture_default_str();
  precision->add_option("--merge", flags->config.merge, "the LSE merge: exp | logsigmoid")
      ->check(CLI::IsMember({"exp", "logsigmoid"}))
      ->capture_default_str();
  precision->add_flag("--json", flags->config.json, "one JSON object on stdout");
  registry.add(precision, [flags, precision] {
    // The schedule flags include --backward, which the study would ignore: it always runs both passes.
    if (precision->count("--backward") > 0) {
      throw UsageError("ringlab study precision always runs the forward and the backward pass; drop --backward");
    }
    const PrecisionStudy result = run_precision_study(flags->config, flags->ranks);
    if (flags->config.json) {
      std::cout << to_json(result).dump() << "\n";
    } else {
      print_precision_study(std::cout, result);
    }
    return 0;
  });
}

}  // namespace ringlab::cli
