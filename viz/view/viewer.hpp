// The viewer: all of ringlab-viz's state in one object, and one frame of its UI. The GLFW app and
// the headless test loop both call frame() between ImGui::NewFrame() and ImGui::Render(); the
// app owns the window and GL, the viewer owns nothing of either.
#pragma once

#include <string>

#include "viz/model/controls.hpp"
#include "viz/model/live_run.hpp"
#include "viz/model/schedule_model.hpp"
#include "viz/view/view_state.hpp"

namespace ringlab::viz {

struct ViewerOptions {
  bool all_panels = true;     // the dashboard; false: one panel filling the display
  Panel panel = Panel::grid;  // that panel
};

class Viewer {
 public:
  // Plans `controls` at once; a spec that does not build leaves an empty model and the message.
  explicit Viewer(const ScheduleControls& controls, ViewerOptions options = {});

  // One frame: keyboard, playback, a finished live run, then every panel's window.
  void frame(float seconds);

  // Opens a trace file: true when it loads; otherwise the message says why (one line) and the
  // model is unchanged. A trace that names its run (ringlab's traces do) sets the controls to that
  // schedule.
  bool open_trace(const std::string& path);
  // Shows another model (a trace's, a run's), keeping the step when it still fits.
  void show(ScheduleModel model);
  // Runs the current controls' schedule on the simulator now, on this thread (screenshots).
  void run_blocking();
  // Starts the same on a background thread; the frame that finds it done shows it.
  void start_run();

  ScheduleControls& controls() { return controls_; }  // edits re-plan on the next frame
  const ScheduleModel& model() const { return model_; }
  Playback& playback() { return playback_; }
  ViewState& view() { return view_; }
  const std::string& message() const { return message_; }
  const LiveRun& live_run() const { return live_; }
  void wait_for_run() { live_.wait(); }

 private:
  void replan();
  void handle_keys();
  void poll_run();
  void take_outcome(RunOutcome outcome);
  void draw_controls();
  void draw_hardware_choice();
  void draw_messages();
  void begin_panel(Panel panel, const char* title, const Rect& where);

  ViewerOptions options_;
  ScheduleControls controls_, planned_;  // planned_: what model_ was built from
  ScheduleModel model_;
  Playback playback_;
  ViewState view_;
  LiveRun live_;
  std::string message_;
  std::string trace_path_;
  char trace_input_[512] = {};
};

}  // namespace ringlab::viz
