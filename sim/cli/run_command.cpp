// `ringlab run`: run one schedule and verify it against exact attention.
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "reference/error.hpp"
#include "reference/flash_attention.hpp"
#include "reference/npy.hpp"
#include "sim/cli/commands.hpp"
#include "sim/output_files.hpp"
#include "sim/run_config.hpp"
#include "sim/run_inputs.hpp"
#include "sim/verification.hpp"

namespace ringlab::cli {
namespace {

// P = 1: the blockwise kernel on the whole sequence — the local reference path.
RunOutputs run_local(const AttentionInputs<double>& inputs, MaskKind mask, bool backward) {
  const AttentionInputs<float> x = inputs.cast<float>();
  RunOutputs outputs;
  AttentionOutput<float> forward = flash_attention(x.q, x.k, x.v, mask);
  if (backward) {
    AttentionGrads<float> grads = flash_attention_backward(x.q, x.k, x.v, forward, x.dout, mask);
    outputs.dq = std::move(grads.dq);
    outputs.dk = std::move(grads.dk);
    outputs.dv = std::move(grads.dv);
  }
  outputs.out = std::move(forward.out);
  outputs.lse = std::move(forward.lse);
  return outputs;
}

void save_outputs(const std::string& directory, const RunOutputs& outputs) {
  StagedDirectory staged(directory);
  write_npy(staged.path("out.npy"), outputs.out);
  write_npy(staged.path("lse.npy"), outputs.lse);
  if (outputs.has_backward()) {
    write_npy(staged.path("dq.npy"), outputs.dq);
    write_npy(staged.path("dk.npy"), outputs.dk);
    write_npy(staged.path("dv.npy"), outputs.dv);
  }
  staged.commit();
}

int run(RunConfig& config) {
  validate(config);
  if (!config.save_dir.empty()) check_output_directory(config.save_dir);
  const AttentionInputs<double> inputs = load_inputs(config);
  if (config.ranks != 1) {
    throw UsageError("--ranks " + std::to_string(config.ranks) +
                     " needs the simulator executor, which this build does not have yet; use --ranks 1");
  }
  const RunOutputs outputs = run_local(inputs, config.mask(), config.backward);
  const ReferenceOutputs reference = compute_reference(inputs, config.mask(), config.backward);
  const Verification verification = verify(outputs, reference, "local blockwise kernel (fp32)");
  if (!config.save_dir.empty()) save_outputs(config.save_dir, outputs);

  if (config.json) {
    nlohmann::json summary = {{"command", "run"},
                              {"config", config.describe()},
                              {"verification", to_json(verification)},
                              {"exit_status", verification.ok() ? kExitVerified : kExitMismatch}};
    std::cout << summary.dump() << "\n";
  } else {
    std::cout << "ringlab run | " << config.describe() << "\n\n";
    print_verification(std::cout, verification);
  }
  return verification.ok() ? kExitVerified : kExitMismatch;
}

}  // namespace

void add_sim_commands(CLI::App& app, Registry& registry) {
  auto config = std::make_shared<RunConfig>();
  CLI::App* command = app.add_subcommand("run", "run one schedule and verify it against exact attention");
  add_run_flags(*command, *config);
  registry.add(command, [config] { return run(*config); });
  add_plan_command(app, registry);
}

}  // namespace ringlab::cli
