// ringlab-viz — watch and debug sequence-parallel attention schedules (Dear ImGui, GLFW, OpenGL 3).
//
//   ringlab-viz [schedule flags of `ringlab plan`] [--hw PRESET|FILE] [--trace FILE] [--run]
//   ringlab-viz --screenshot OUT.png [--step N] [--panel grid|ring|load|timeline|controls|messages|all]
//               [--size WxH] [--colour step|rank|error] [--geometry OUT.json] [same flags]
//
// Errors a user can cause (a bad flag, a schedule that does not divide, a malformed or unreadable
// trace) print one line "ringlab-viz: error: ..." and exit 2. Interactively, a bad trace is also
// shown in the Messages panel and the plan is shown instead.
#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "reference/error.hpp"
#include "sim/cost/hardware.hpp"
#include "sim/pipeline/command_line.hpp"
#include "sim/pipeline/config.hpp"
#include "sim/pipeline/problem.hpp"
#include "viz/app/gl_app.hpp"
#include "viz/model/live_run.hpp"
#include "viz/model/plan_model.hpp"

namespace {

using namespace ringlab;
using namespace ringlab::viz;

struct AppFlags {
  std::string trace, screenshot, panel = "all", size = "1600x1000", colour = "step", geometry;
  double step = -1;
  bool run = false;
  int frames = 3;
};

void parse_size(const std::string& text, int& width, int& height) {
  char tail = 0;
  if (std::sscanf(text.c_str(), "%dx%d%c", &width, &height, &tail) != 2 || width < 64 || height < 64 || width > 8192 ||
      height > 8192) {
    throw UsageError("--size " + text + " is not WIDTHxHEIGHT between 64 and 8192 pixels; e.g. --size 1600x1000");
  }
}

int run(const RunConfig& given, const AppFlags& flags) {
  const RunConfig config = resolve_problem(given).config;
  const PlanSpec spec = plan_spec(config);
  const Plan plan = build_plan(spec);  // a schedule that does not build is a usage error here, not a panel message
  (void)load_hardware(config.hw, config.dims.dim);  // nor does an unknown machine
  check_viewer_limits(plan);                        // viz/model/plan_model.hpp: the largest plan it draws

  ViewerOptions options;
  options.all_panels = flags.panel == "all";
  if (!options.all_panels) options.panel = parse_panel(flags.panel);
  ScheduleControls controls = ScheduleControls::from_spec(spec);
  controls.hardware = config.hw;
  Viewer viewer(controls, options);
  viewer.view().colouring = parse_colouring(flags.colour);
  const bool screenshot = !flags.screenshot.empty();

  if (!flags.trace.empty() && !viewer.open_trace(flags.trace)) {
    if (screenshot) throw UsageError(viewer.message());
    std::cerr << "ringlab-viz: error: " << viewer.message() << "\n";  // and the Messages panel says it too
  }
  if (flags.run) {
    try {
      const PlanSpec small = small_run_spec(spec);  // what --run verifies: the same blocks at small sizes
      if (!(small.dims.to_string() == spec.dims.to_string())) {
        std::cerr << "ringlab-viz: note: --run verifies the same layout units and steps at small sizes: "
                  << small.dims.to_string() << " (not " << spec.dims.to_string() << ")\n";
      }
    } catch (const UsageError&) {  // a layout too fine to run: run_blocking() says so
    }
    viewer.run_blocking();
    if (!viewer.message().empty()) std::cerr << "ringlab-viz: " << viewer.message() << "\n";
  }
  if (flags.step >= 0) {
    if (flags.step > viewer.playback().last()) {
      char text[200];
      std::snprintf(text, sizeof text,
                    "--step %g is past the last step (%g) of this schedule; steps count across all phases from 0",
                    flags.step, viewer.playback().last());
      throw UsageError(text);
    }
    viewer.playback().scrub(flags.step);
  }
  if (!screenshot) return run_window(viewer);
  ScreenshotOptions shot;
  shot.path = flags.screenshot;
  shot.frames = flags.frames;
  shot.geometry_path = flags.geometry;
  parse_size(flags.size, shot.width, shot.height);
  return take_screenshot(viewer, shot);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ringlab-viz: watch and debug sequence-parallel attention schedules"};
  app.name("ringlab-viz");
  RunConfig config;
  AppFlags flags;
  add_schedule_flags(app, config);
  app.add_option("--hw", config.hw,
                 "the timeline's machine (cost model): h100-nvlink | h100-ib | h100-pcie | cpu, or a JSON file")
      ->capture_default_str();
  app.add_option("--trace", flags.trace, "open a Chrome trace written by ringlab run --trace");
  app.add_flag("--run", flags.run,
               "run the schedule on the simulator and show each block's error: the same layout units and steps at "
               "small sizes (B=1, D=16, at most 512 tokens, fewer heads above 16), whatever --batch, --seq, --dim say; "
               "a note on stderr gives the sizes");
  app.add_option("--screenshot", flags.screenshot, "render off-screen and write this PNG, then exit");
  app.add_option("--step", flags.step, "the step shown (across all phases, from 0; 2.5 = halfway through step 2)")
      ->check(CLI::Validator(
          [](const std::string& text) {
            // A finite number: nan passes every "< 0" test (and was then ignored), inf every step.
            char* end = nullptr;
            const double step = std::strtod(text.c_str(), &end);
            return text.empty() || *end != '\0' || !std::isfinite(step) || step < 0
                       ? std::string("a step is a number 0 or more, e.g. --step 2.5")
                       : std::string();
          },
          "STEP >= 0"));
  app.add_option("--panel", flags.panel, "ring | grid | load | timeline | controls | messages | all")
      ->capture_default_str();
  app.add_option("--size", flags.size, "screenshot size WIDTHxHEIGHT")->capture_default_str();
  app.add_option("--colour,--color", flags.colour, "grid colouring: step | rank | error")->capture_default_str();
  CLI::Option* geometry =
      app.add_option("--geometry", flags.geometry, "with --screenshot: write each panel's canvas rectangle as JSON");
  CLI::Option* frames = cli::whole_number(
      app.add_option("--frames", flags.frames, "with --screenshot: frames rendered before the capture")
          ->capture_default_str(),
      1);
  if (const std::optional<int> status = cli::parse_command_line(
          app, argc, argv, std::cout, std::cerr, "ringlab-viz: ", "run 'ringlab-viz --help' for the flags")) {
    return *status;
  }
  try {
    // Without --screenshot they would be ignored and a window would open: say so instead.
    for (const CLI::Option* option : {geometry, frames}) {
      if (option->count() > 0 && flags.screenshot.empty()) {
        throw UsageError(option->get_name() +
                         " needs --screenshot (it applies to the PNG it writes); add --screenshot "
                         "OUT.png or drop " +
                         option->get_name());
      }
    }
    return run(config, flags);
  } catch (const UsageError& error) {
    std::cerr << "ringlab-viz: error: " << error.what() << "\n";
    return kExitUsage;
  } catch (const std::exception& error) {
    std::cerr << "ringlab-viz: internal error: " << error.what() << " (please report this)\n";
    return 70;
  }
}
