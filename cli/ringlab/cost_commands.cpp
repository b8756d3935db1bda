// `ringlab compare` and `ringlab figure`: the cost model's commands.
//   ringlab compare [schedule flags] [--hw PRESET|FILE] [--scenario NAME] [--json]
//       one fixed-width table across algorithms and layouts (executors/dry/compare.hpp); --algo or
//       --layout given restrict the rows to that algorithm or layout
//   ringlab figure KIND [schedule flags] [--hw ...] [--pass forward|backward] --out FILE.svg [--png FILE.png]
//       KIND = grid-step | grid-rank | load | timeline (viz/figures/book_figures.hpp: the viewer's
//       model and colours, the cost model's time on --hw)
//   ringlab calibrate STEPS [--hw FILE] [--out MACHINE.json]
//       fits the device model to measured step times (bench_gpu_ring's per-step tables, the file
//       as printed; executors/dry/calibrate.hpp) and writes the machine `--hw MACHINE.json` loads
// Exit status 0, or 2 for bad input (one line naming the problem and the fix).
// Sections: [compare] [figure] [calibrate] [registration]
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "cli/ringlab/commands.hpp"
#include "executors/dry/calibrate.hpp"
#include "executors/dry/compare.hpp"
#include "executors/sim/precision_study.hpp"
#include "reference/error.hpp"
#include "sim/pipeline/config.hpp"
#include "sim/pipeline/output_files.hpp"
#include "sim/pipeline/problem.hpp"
#include "viz/figures/book_figures.hpp"
#include "viz/model/plan_model.hpp"

namespace ringlab::cli {

namespace {

// ---- [compare] -------------------------------------------------------------------------------

struct CompareFlags {
  RunConfig config;
  std::string scenario;
  bool json = false;
  bool help_hw = false;
};

int compare_command(CompareFlags& flags, const CLI::App& command) {
  if (flags.help_hw) {
    std::cout << "hardware presets: ";
    for (const std::string& name : hardware_preset_names()) std::cout << name << " ";
    std::cout << "\n" << hardware_json_help() << "\n";
    return kExitVerified;
  }
  if (!flags.scenario.empty()) {
    // A scenario is a fixed problem with its own rows: a size or schedule flag beside it would be
    // silently ignored, and the table would not be of what was asked.
    for (const char* flag :
         {"--algo", "--layout", "--block", "--ranks", "--ulysses", "--batch", "--seq", "--heads", "--kv-heads", "--dim",
          "--causal", "--window", "--docs", "--seed", "--no-skip", "--full-ring", "--erratum"}) {
      if (command.count(flag) > 0) {
        throw UsageError("--scenario " + flags.scenario + " fixes the sizes, P and the schedules, so " + flag +
                         " would be ignored; drop " + flag +
                         " (only --hw, --backward and --json apply to a "
                         "scenario), or drop --scenario");
      }
    }
  }
  RunConfig given = flags.config;
  // Random documents are drawn in multiples of 2P, so that every layout compared can take them.
  if (command.count("--layout") == 0) given.layout = "zigzag";
  // --ulysses is the hybrid rows' degree whatever --algo is (validate() refuses it elsewhere).
  const int64_t ulysses = given.ulysses;
  if (given.algo != "hybrid") given.ulysses = 0;
  const RunConfig config = resolve_problem(given).config;
  std::vector<CompareCase> cases;
  std::string hw_name = config.hw;
  Scenario scenario;
  const bool has_scenario = !flags.scenario.empty();
  if (has_scenario) {
    scenario = make_scenario(flags.scenario);
    if (command.count("--hw") == 0) hw_name = scenario.hardware;
    cases = scenario.cases;
    if (command.count("--backward") > 0) {
      for (CompareCase& c : cases) c.spec.backward = true;
    }
  }
  const int64_t head_dim = has_scenario ? cases.front().spec.dims.dim : config.dims.dim;
  const Hardware hardware = load_hardware(hw_name, head_dim);
  if (!has_scenario) {
    cases = compare_cases(plan_spec(config), ulysses, hardware);
    // --algo / --layout given: only those rows (Ulysses has no layout and stays with any layout).
    const PlanSpec asked = plan_spec(config);
    std::erase_if(cases, [&](const CompareCase& c) {
      const bool algo_out = command.count("--algo") > 0 && c.spec.algo != asked.algo;
      const bool layout_out =
          command.count("--layout") > 0 && c.spec.algo != Algorithm::ulysses && c.spec.layout != asked.layout;
      return algo_out || layout_out;
    });
  }
  if (cases.empty()) {
    // Only --algo hybrid can leave no row: without --ulysses compare picks U = ranks per node, and
    // only when P spans more than one whole node.
    throw UsageError(
        "--algo hybrid needs --ulysses U here (compare picks U = " + std::to_string(hardware.ranks_per_node) +
        ", the ranks per node, only when P=" + std::to_string(config.ranks) + " spans whole nodes); e.g. --ulysses 2");
  }
  const std::vector<CompareRow> rows = run_compare(cases, hardware);
  if (flags.json) {
    nlohmann::json document = compare_json(rows, hardware);
    if (has_scenario)
      document["scenario"] = {{"name", scenario.name}, {"title", scenario.title}, {"source", scenario.source}};
    std::cout << document.dump() << "\n";
    return kExitVerified;
  }
  if (has_scenario) {
    std::cout << "ringlab compare --scenario " << scenario.name << " | " << scenario.title << "\n";
    std::cout << "source: " << scenario.source << "\n";
    std::cout << "sizes: " << cases.front().spec.dims.to_string() << ", P=" << cases.front().spec.ranks << " | hw "
              << hardware.name << "\n\n";
  } else {
    // The user's sizes; padding differs row by row (zig-zag pads each document to 2P, striped to P,
    // Ulysses the heads), so each row's note says its own. The mask only where there is one.
    const PlanSpec spec = plan_spec(config);
    const bool masked = spec.causal || spec.window > 0 || spec.documents.size() > 1;
    std::cout << "ringlab compare | P=" << spec.ranks << " | " << spec.real_dims().to_string();
    std::cout << " | " << (masked ? spec.mask().describe() + (spec.skip ? "" : ", no skip") : "full") << " | "
              << (spec.backward ? "fwd+bwd" : "fwd") << " | hw " << hardware.name << "\n\n";
  }
  print_compare_table(std::cout, rows);
  std::cout << "\nof ideal: (the same attention on one device) / P / time, as in ring-flash-attention's "
               "published table; imbalance: max/mean compute time per rank\n";
  for (const std::string& note : scenario.notes) std::cout << "note: " << note << "\n";
  std::cout << "hardware: " << hardware.name << " - " << hardware.description << " (ringlab run --dry-run --hw "
            << hardware.name << " prints the model and its sources)\n";
  return kExitVerified;
}

// ---- [figure] --------------------------------------------------------------------------------

struct FigureFlags {
  RunConfig config;
  std::string kind;
  std::string out;
  std::string png;
  std::string pass = "forward";
};

// Before any work: the SVG (and PNG) can be written, and PNG output is built in. --out is the SVG:
// a .png name there would hold SVG text, and the same file for both would end as the PNG alone.
void check_figure_outputs(const FigureFlags& flags) {
  const auto extension = [](const std::string& path) {
    std::string e = std::filesystem::path(path).extension().string();
    std::transform(e.begin(), e.end(), e.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return e;
  };
  if (extension(flags.out) == ".png") {
    throw UsageError("--out " + flags.out + " would hold SVG text under a .png name; name it .svg and add --png " +
                     flags.out + " for the PNG");
  }
  if (!flags.png.empty()) {
    std::error_code error;
    if (std::filesystem::weakly_canonical(flags.out, error) == std::filesystem::weakly_canonical(flags.png, error)) {
      throw UsageError("--out and --png name the same file, " + flags.out +
                       ", and the PNG would overwrite the SVG; give them different names");
    }
  }
  check_output_file(flags.out);
  if (!flags.png.empty()) {
    if (!viz::png_supported()) {
      std::string error;
      (void)viz::write_png({}, flags.png, error);
      throw UsageError(error);
    }
    check_output_file(flags.png);
  }
}

void write_png_if_asked(const FigureFlags& flags, const viz::Figure& figure) {
  if (flags.png.empty()) return;
  std::string error;
  if (!viz::write_png(figure, flags.png, error)) throw UsageError(error);
  std::cout << "wrote " << flags.png << "\n";
}

// `ringlab figure precision`: the precision study at P = 1, 2, 4, ... up to --ranks, drawn as each
// tensor's RMS error ratio to P = 1: solid with fp32 accumulation, dashed with storage accumulation,
// thin with fused accumulation.
int precision_figure_command(FigureFlags& flags, const CLI::App& command) {
  RunConfig config = flags.config;
  if (command.count("--precision") > 0 && config.precision == "fp32") {
    throw UsageError(
        "figure precision draws the error of a storage precision against fp32 itself; pick --precision "
        "bf16 or fp16");
  }
  if (config.precision == "fp32") config.precision = "bf16";  // the default: the study resolves it at every P
  if (config.ranks < 2) {
    throw UsageError("figure precision draws the error at P = 1, 2, 4, ... up to --ranks: --ranks " +
                     std::to_string(config.ranks) + " leaves one point per line; use --ranks 2 or more, e.g. 16");
  }
  check_figure_outputs(flags);
  std::vector<int64_t> ranks;
  for (int64_t p = 1; p <= config.ranks; p *= 2) ranks.push_back(p);
  const PrecisionStudy study = run_precision_study(config, ranks);
  const std::pair<const char*, viz::Rgba> tensors[] = {{"out", viz::palette::compute_span},
                                                       {"dq", viz::palette::collective_span},
                                                       {"dk", viz::palette::send_span},
                                                       {"dv", viz::palette::wait_span}};
  std::vector<viz::ErrorSeries> series;
  for (const std::string accumulate : kStudiedAccumulations) {
    for (const auto& [tensor, colour] : tensors) {
      viz::ErrorSeries s{std::string(tensor) + ", accumulate " + accumulate,
                         colour,
                         accumulate == "storage",
                         accumulate == "fused" ? 1.0 : 2.0,
                         {}};
      for (const int64_t p : study.ranks) s.points.emplace_back(p, study.row(accumulate, p, tensor).rms_ratio);
      series.push_back(std::move(s));
    }
  }
  const viz::Figure figure = viz::precision_figure("error against P: " + study.config, series);
  write_file_atomically(flags.out, viz::to_svg(figure));
  std::cout << "wrote " << flags.out << " (precision, " << study.ranks.size() << " rank counts, " << figure.lines.size()
            << " line segments)\n";
  write_png_if_asked(flags, figure);
  return kExitVerified;
}

// A flag given to a kind that does not use it would be silently ignored, and the figure would not
// be of what was asked: refused, naming the kinds it applies to.
void refuse_unused_figure_flags(const std::string& kind, const CLI::App& command) {
  const bool grid = kind == "grid-step" || kind == "grid-rank", precision = kind == "precision";
  const struct {
    const char* flag;
    bool unused;
    const char* applies;
  } rules[] = {
      {"--pass", !grid, "to the grids (grid-step, grid-rank)"},
      {"--hw", grid || precision, "to load and timeline"},
      {"--precision", !precision, "to precision"},
      {"--merge", !precision, "to precision"},
      {"--backward", precision, "to the grids, load and timeline (figure precision always runs the backward pass)"},
  };
  for (const auto& rule : rules) {
    if (rule.unused && command.count(rule.flag) > 0) {
      throw UsageError(std::string(rule.flag) + " does not change figure " + kind + ": it applies " + rule.applies +
                       "; drop " + rule.flag);
    }
  }
}

int figure_command(FigureFlags& flags, const CLI::App& command) {
  if (flags.kind == "precision") {
    refuse_unused_figure_flags(flags.kind, command);
    if (flags.out.empty()) throw UsageError("ringlab figure needs --out FILE.svg; e.g. --out precision.svg");
    return precision_figure_command(flags, command);
  }
  viz::FigureKind kind{};
  try {
    kind = viz::parse_figure_kind(flags.kind);
  } catch (const UsageError&) {  // its list lacks precision, which is drawn here
    throw UsageError("unknown figure '" + flags.kind +
                     "'; use ringlab figure grid-step, grid-rank, load, timeline or precision");
  }
  refuse_unused_figure_flags(flags.kind, command);  // once the kind is known to exist
  const RunConfig config = resolve_problem(flags.config).config;
  if (flags.out.empty()) throw UsageError("ringlab figure needs --out FILE.svg; e.g. --out grid.svg");
  check_figure_outputs(flags);
  if (flags.pass != "forward" && flags.pass != "backward") {
    throw UsageError("--pass " + flags.pass + " is not a pass; use --pass forward or --pass backward");
  }
  const Pass pass = flags.pass == "forward" ? Pass::forward : Pass::backward;
  const Hardware hardware = load_hardware(config.hw, config.dims.dim);
  PlanSpec spec = plan_spec(config);
  spec.element_bytes = hardware.element_bytes;
  const Plan plan = build_plan(spec);
  viz::check_figure_size(kind, plan.ring(), plan.ranks());  // before the model: it walks every rank
  if (pass == Pass::backward && !spec.backward) {
    throw UsageError("--pass backward needs a plan with a backward pass; add --backward");
  }
  const viz::Figure figure = viz::draw_figure(kind, viz::model_from_plan(plan, hardware), pass);
  write_file_atomically(flags.out, viz::to_svg(figure));
  std::cout << "wrote " << flags.out << " (" << viz::figure_kind_name(kind) << ", " << figure.rects.size()
            << " rectangles)\n";
  write_png_if_asked(flags, figure);
  return kExitVerified;
}

// ---- [calibrate] -----------------------------------------------------------------------------

struct CalibrateFlags {
  std::string steps;
  std::string hw;
  std::string out;
};

int calibrate_command(const CalibrateFlags& flags) {
  if (!flags.out.empty()) check_output_file(flags.out);  // before any table is printed
  std::error_code error;
  if (std::filesystem::is_directory(flags.steps, error)) {
    throw UsageError(flags.steps + " is a directory; give bench_gpu_ring's output (a file)");
  }
  std::ifstream file(flags.steps, std::ios::binary);
  if (!file) throw UsageError(flags.steps + ": cannot open the step times; give bench_gpu_ring's output (a file)");
  std::ostringstream text;
  text << file.rdbuf();
  const std::vector<StepTable> tables = parse_step_tables(text.str(), flags.steps);
  const StepTable& first = tables.front();
  for (const StepTable& t : tables) {  // P = 1: a whole block's backward, from the ring-efficiency table
    if ((t.spec.ranks != first.spec.ranks && t.spec.ranks != 1) || t.flops_per_s != first.flops_per_s ||
        t.copy_Bps != first.copy_Bps || t.spec.dims.seq != first.spec.dims.seq ||
        t.spec.dims.dim != first.spec.dims.dim) {
      throw UsageError(flags.steps + ": the tables differ in P, S, D or measured figures; calibrate one run's tables");
    }
  }
  Hardware base;
  if (!flags.hw.empty()) {
    base = load_hardware(flags.hw, first.spec.dims.dim);
    if (base.device.ranks_per_device <= 1 && first.spec.ranks > 1) {
      base.device.ranks_per_device = first.spec.ranks;
      std::printf("(%s has no ranks_per_device: set to P = %lld, the tables being of P ranks on one GPU)\n",
                  flags.hw.c_str(), static_cast<long long>(first.spec.ranks));
    }
  } else {
    if (first.flops_per_s <= 0 || first.copy_Bps <= 0) {
      throw UsageError(flags.steps +
                       ": no 'simple model: ...' line with the measured FLOP rate and copy bandwidth; "
                       "give --hw FILE as the base machine");
    }
    base = gpu_streams_machine(first.flops_per_s, first.copy_Bps, first.spec.ranks, 2, "one GPU, " + flags.steps, true,
                               first.spec.dims.seq);
  }
  FitResult fit = fit_device(base, tables);
  const KernelRows rows = parse_kernel_rows(text.str(), flags.steps);
  std::optional<FitResult> floor;  // with one-kernel rows and the device's SM count: the kernels' floor too
  if (!rows.tables.empty() && rows.sms > 0) floor = fit_floor(fit.hardware, rows);
  std::printf(
      "ringlab calibrate | %s | %zu table(s), %d steps | base: %s\n\n", flags.steps.c_str(), tables.size(), fit.points,
      flags.hw.empty() ? "the tables' one-kernel rate and copy bandwidth, P ranks on one device" : base.name.c_str());
  std::printf("%-38s %5s %10s %10s %7s %10s %7s\n", "schedule", "step", "measured", "base", "error", "fitted", "error");
  std::printf("%-38s %5s %10s %10s %7s %10s %7s\n", "", "", "[ms]", "[ms]", "[%]", "[ms]", "[%]");
  for (const StepTable& t : tables) {
    const std::vector<double> before = predicted_steps(t.spec, t.phase, base);
    const std::vector<double> after = predicted_steps(t.spec, t.phase, fit.hardware);
    for (size_t s = 0; s < t.measured.size(); ++s) {
      const double b = s < before.size() ? before[s] : 0, a = s < after.size() ? after[s] : 0;
      std::printf("%-38s %5zu %10.3f %10.3f %+7.1f %10.3f %+7.1f\n", t.schedule.c_str(), s, t.measured[s] * 1e3,
                  b * 1e3, 100 * (b / t.measured[s] - 1), a * 1e3, 100 * (a / t.measured[s] - 1));
    }
  }
  std::printf("\nfitted (%zu unknowns on %d steps: the errors above are in-sample):\n", fit.fitted.size(), fit.points);
  for (const std::string& line : fit.fitted) std::printf("  %s\n", line.c_str());
  std::printf("largest error after the fit: %.1f%%\n", 100 * fit.max_abs_error);
  if (floor) {
    std::printf("\none kernel by block size, the fit above then the forward kernels' floor fitted to these rows:\n");
    std::printf("%-38s %10s %10s %7s %10s %7s\n", "kernel", "measured", "fitted", "error", "floor", "error");
    for (const StepTable& t : rows.tables) {
      const double a = predicted_steps(t.spec, t.phase, fit.hardware).at(0);
      const double f = predicted_steps(t.spec, t.phase, floor->hardware).at(0), m = t.measured.at(0);
      std::printf("%-38s %10.3f %10.3f %+7.1f %10.3f %+7.1f\n", t.schedule.c_str(), m * 1e3, a * 1e3, 100 * (a / m - 1),
                  f * 1e3, 100 * (f / m - 1));
    }
    for (const std::string& line : floor->fitted) std::printf("  %s (in-sample)\n", line.c_str());
    fit.hardware = floor->hardware;
  }
  if (!flags.out.empty()) {
    Hardware out = fit.hardware;
    out.name = flags.out;
    write_file_atomically(flags.out, to_json(out).dump(2) + "\n");
    std::printf("wrote %s (ringlab run --dry-run --hw %s ...)\n", flags.out.c_str(), flags.out.c_str());
  }
  return kExitVerified;
}

}  // namespace

// ---- [registration] --------------------------------------------------------------------------

void add_cost_commands(CLI::App& app, Registry& registry) {
  {
    auto flags = std::make_shared<CompareFlags>();
    CLI::App* command = app.add_subcommand(
        "compare",
        "cost one configuration across algorithms and layouts (dry runs); --algo / --layout restrict the rows");
    add_schedule_flags(*command, flags->config);
    command->add_option("--hw", flags->config.hw, "hardware preset (h100-nvlink, h100-ib, h100-pcie, cpu) or JSON file")
        ->capture_default_str();
    std::string names;
    for (const std::string& name : scenario_names()) names += (names.empty() ? "" : ", ") + name;
    command->add_option("--scenario", flags->scenario, "a scenario of the source material: " + names);
    command->add_flag("--json", flags->json, "one JSON object on stdout");
    command->add_flag("--help-hw", flags->help_hw, "list the presets and the JSON machine format");
    registry.add(command, [flags, command] { return compare_command(*flags, *command); });
  }
  {
    auto flags = std::make_shared<FigureFlags>();
    CLI::App* command =
        app.add_subcommand("figure",
                           "draw a figure for the book: grid-step, grid-rank, load, timeline (SVG, PNG); precision "
                           "(the low-precision study's error against P)");
    command->add_option("kind", flags->kind, "grid-step | grid-rank | load | timeline | precision")->required();
    add_schedule_flags(*command, flags->config);
    command->add_option("--hw", flags->config.hw, "hardware preset or JSON file (load, timeline)")
        ->capture_default_str();
    command
        ->add_option("--precision", flags->config.precision,
                     "precision: the storage precision studied, bf16 | fp16 (P = 1, 2, 4, ... up to --ranks)")
        ->default_str("bf16");
    command->add_option("--merge", flags->config.merge, "precision: the LSE merge studied, exp | logsigmoid")
        ->check(CLI::IsMember({"exp", "logsigmoid"}))
        ->capture_default_str();
    command->add_option("--pass", flags->pass, "grids: forward | backward")->capture_default_str();
    command->add_option("--out", flags->out, "the SVG file to write")->required();
    command->add_option("--png", flags->png, "also write a PNG (needs stb_image_write)");
    registry.add(command, [flags, command] { return figure_command(*flags, *command); });
  }
  {
    auto flags = std::make_shared<CalibrateFlags>();
    CLI::App* command = app.add_subcommand(
        "calibrate",
        "fit the device model to measured step times (bench_gpu_ring's per-step tables) and write a --hw machine file");
    command
        ->add_option(
            "steps", flags->steps,
            "a file holding bench_gpu_ring's output (its per-step tables, and the ring-efficiency table's P = 1 "
            "runs for the backward of one whole block)")
        ->required();
    command->add_option("--hw", flags->hw,
                        "base machine (a JSON file); default: P ranks on one device, from the tables");
    command->add_option("--out", flags->out, "write the fitted machine here (JSON, loaded by --hw FILE)");
    registry.add(command, [flags] { return calibrate_command(*flags); });
  }
}

}  // namespace ringlab::cli
