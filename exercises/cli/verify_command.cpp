// `ringlab verify DIR [--layout L] [--ranks P] [--causal]`: outputs computed elsewhere (NumPy,
// PyTorch, a student's code) against exact attention, with the wrong rows, the ranks that own them
// and a likely cause (exercises/verify.hpp). DIR holds q.npy, k.npy, v.npy (and dout.npy for
// gradients) and whichever of out.npy, lse.npy, dq.npy, dk.npy, dv.npy there are. Exit 0 all
// right, 1 some wrong, 2 bad input.
#include <CLI/CLI.hpp>
#include <filesystem>
#include <iostream>
#include <memory>

#include "exercises/cli/commands.hpp"
#include "exercises/verify.hpp"
#include "reference/error.hpp"
#include "reference/npy.hpp"

namespace ringlab::cli {

void add_verify_command(CLI::App& app, Registry& registry) {
  struct VerifyArgs {
    std::string directory, layout = "contiguous";
    int64_t ranks = 1;
    bool causal = false;
  };
  auto args = std::make_shared<VerifyArgs>();
  CLI::App* command = app.add_subcommand(
      "verify", "check outputs computed elsewhere (.npy in DIR) against exact attention: wrong rows, ranks, cause");
  command->add_option("dir", args->directory, "folder with q.npy k.npy v.npy [dout.npy] and out.npy lse.npy ...")
      ->required();
  command->add_option("--layout", args->layout, "how the tokens were split: contiguous, zigzag or striped");
  command->add_option("--ranks", args->ranks, "how many ranks the sequence was split over (names the owners)");
  command->add_flag("--causal", args->causal, "the outputs are causal attention");
  registry.add(command, [args] {
    namespace fs = std::filesystem;
    const fs::path dir(args->directory);
    if (!fs::is_directory(dir))
      throw UsageError("verify: " + args->directory +
                       " is not a folder; give the folder "
                       "that holds q.npy, k.npy, v.npy and your out.npy");
    auto load = [&](const char* name, bool required) {
      const fs::path file = dir / (std::string(name) + ".npy");
      if (!fs::exists(file)) {
        if (required) throw UsageError("verify: " + file.string() + " is missing; save the input " + name + " there");
        return Tensor<double>();
      }
      return read_npy(file.string()).values;
    };
    AttentionInputs<double> inputs{load("q", true), load("k", true), load("v", true), load("dout", false)};
    exercises::StudentOutputs given{load("out", false), load("lse", false), load("dq", false), load("dk", false),
                                    load("dv", false)};
    exercises::VerifyOptions options;
    options.layout = parse_layout(args->layout);
    options.ranks = args->ranks;
    options.causal = args->causal;
    if (options.ranks < 1) throw UsageError("verify: --ranks " + std::to_string(options.ranks) + " must be >= 1");
    const exercises::VerifyReport report = exercises::verify_outputs(inputs, given, options);
    std::cout << report.text();
    return report.ok() ? kExitVerified : kExitMismatch;
  });
}

}  // namespace ringlab::cli
