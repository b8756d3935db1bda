// Sections: [model changes] [frame and layout] [keyboard] [controls panel] [messages panel]
#include "viz/view/viewer.hpp"

#include <imgui.h>

#include <algorithm>
#include <cstring>

#include "reference/error.hpp"
#include "sim/pipeline/trace.hpp"
#include "viz/model/plan_model.hpp"
#include "viz/model/trace_model.hpp"
#include "viz/view/draw_util.hpp"
#include "viz/view/panels.hpp"

namespace ringlab::viz {

// ---- [model changes] -------------------------------------------------------------------------

Viewer::Viewer(const ScheduleControls& controls, ViewerOptions options) : options_(options), controls_(controls) {
  replan();
}

void Viewer::replan() {
  planned_ = controls_;
  try {
    const Plan plan = build_plan(controls_.spec());
    // The limit of the command line, here too: a typed P (or a trace's schedule, for "Back to the
    // plan") past it would hang the UI for minutes. The message says why; the model stays.
    check_viewer_limits(plan);
    ScheduleModel model = model_from_plan(plan, controls_.hardware);
    model.load.layouts = layout_balances(plan.spec());  // only the load panel shows them: not in every model
    show(std::move(model));
    message_.clear();
  } catch (const UsageError& error) {
    message_ = error.what();
  }
}

void Viewer::show(ScheduleModel model) {
  model_ = std::move(model);
  playback_.set_steps(model_.step_count());
  view_.time_window_fitted = false;
}

bool Viewer::open_trace(const std::string& path) {
  try {
    const TraceFile trace = read_trace_file(path);
    show(model_from_trace_file(trace, path));
    trace_path_ = path;
    // The controls show the schedule that ran (the trace says which, when its writer knew), and
    // count as planned: the trace's model stays until the user edits them.
    if (trace.run) {
      const std::string hardware = controls_.hardware;
      controls_ = ScheduleControls::from_spec(trace.run->spec);
      controls_.hardware = hardware;
      planned_ = controls_;
    }
    message_.clear();
    return true;
  } catch (const UsageError& error) {
    message_ = error.what();
    return false;
  }
}

void Viewer::take_outcome(RunOutcome outcome) {
  message_ = outcome.error.empty() ? std::string() : "run: " + outcome.error;
  if (outcome.model.step_count() == 0) return;
  show(std::move(outcome.model));
  // The controls show the schedule that ran — small_run_spec's sizes, not the plan's — and count
  // as planned, as after a trace: the run's model stays until the user edits them.
  const std::string hardware = controls_.hardware;
  controls_ = ScheduleControls::from_spec(outcome.spec);
  controls_.hardware = hardware;
  planned_ = controls_;
}

void Viewer::run_blocking() {
  try {
    take_outcome(run_schedule(small_run_spec(controls_.spec())));
  } catch (const UsageError& error) {
    message_ = std::string("run: ") + error.what();
  }
}

void Viewer::start_run() {
  try {
    if (!live_.start(small_run_spec(controls_.spec()))) message_ = "run: one is still running";
  } catch (const UsageError& error) {
    message_ = std::string("run: ") + error.what();
  }
}

void Viewer::poll_run() {
  if (std::optional<RunOutcome> outcome = live_.take()) take_outcome(std::move(*outcome));
}

// ---- [frame and layout] ----------------------------------------------------------------------

void Viewer::begin_panel(Panel panel, const char* title, const Rect& where) {
  ImGui::SetNextWindowPos({where.x0, where.y0}, ImGuiCond_Always);
  ImGui::SetNextWindowSize({where.width(), where.height()}, ImGuiCond_Always);
  constexpr ImGuiWindowFlags kFlags = ImGuiWindowFlags_NoMove | ImGuiWindowFlags_NoResize |
                                      ImGuiWindowFlags_NoCollapse | ImGuiWindowFlags_NoSavedSettings |
                                      ImGuiWindowFlags_NoScrollWithMouse;
  ImGui::Begin(title, nullptr, kFlags);
  view_.drawn[static_cast<size_t>(panel)] = false;
}

void Viewer::frame(float seconds) {
  if (!(controls_ == planned_)) replan();
  poll_run();
  handle_keys();
  playback_.advance(seconds);

  const ImVec2 display = ImGui::GetIO().DisplaySize;
  const float W = display.x, H = display.y;
  struct Placement {
    Panel panel;
    const char* title;
    Rect where;
  };
  std::vector<Placement> placements;
  if (options_.all_panels) {
    // The dashboard: controls and messages on the left; ring, grid and load on top; the
    // timeline along the bottom.
    const float left = std::min(320.0f, 0.3f * W), top = std::floor(0.6f * H), right = W - left;
    const float ring_w = std::floor(0.33f * right), grid_w = std::floor(0.4f * right);
    placements = {{Panel::controls, "Controls###controls", {0, 0, left, std::floor(0.64f * H)}},
                  {Panel::messages, "Messages###messages", {0, std::floor(0.64f * H), left, H}},
                  {Panel::ring, "Ring###ring", {left, 0, left + ring_w, top}},
                  {Panel::grid, "Block grid###grid", {left + ring_w, 0, left + ring_w + grid_w, top}},
                  {Panel::load, "Load balance###load", {left + ring_w + grid_w, 0, W, top}},
                  {Panel::timeline, "Timeline###timeline", {left, top, W, H}}};
  } else {
    const char* const titles[] = {"Ring###ring",         "Block grid###grid",   "Load balance###load",
                                  "Timeline###timeline", "Controls###controls", "Messages###messages"};
    placements = {{options_.panel, titles[static_cast<size_t>(options_.panel)], {0, 0, W, H}}};
  }
  for (const Placement& p : placements) {
    begin_panel(p.panel, p.title, p.where);
    switch (p.panel) {
      case Panel::ring: draw_ring_panel(model_, playback_, view_); break;
      case Panel::grid: draw_grid_panel(model_, playback_, view_); break;
      case Panel::load: draw_load_panel(model_, playback_, view_); break;
      case Panel::timeline: draw_timeline_panel(model_, playback_, view_); break;
      case Panel::controls: draw_controls(); break;
      case Panel::messages: draw_messages(); break;
      case Panel::count: break;
    }
    ImGui::End();
  }
  if (view_.jump_to_step >= 0) {
    playback_.playing = false;
    playback_.scrub(static_cast<double>(view_.jump_to_step));
    view_.jump_to_step = -1;
  }
}

// ---- [keyboard] ------------------------------------------------------------------------------

void Viewer::handle_keys() {
  const ImGuiIO& io = ImGui::GetIO();
  if (io.WantTextInput) return;  // typing into a field: keys are text
  auto pressed = [](ImGuiKey key, bool repeat) {
    const int index = ImGui::GetKeyIndex(key);
    return index >= 0 && ImGui::IsKeyPressed(index, repeat);
  };
  if (pressed(ImGuiKey_Space, false)) playback_.toggle();
  if (pressed(ImGuiKey_RightArrow, true)) playback_.step_forward();
  if (pressed(ImGuiKey_LeftArrow, true)) playback_.step_back();
  // R has no ImGuiKey in this ImGui version: read it from the character queue.
  for (int i = 0; i < io.InputQueueCharacters.Size; ++i)
    if (io.InputQueueCharacters[i] == 'r' || io.InputQueueCharacters[i] == 'R') playback_.reset();
}

// ---- [controls panel] ------------------------------------------------------------------------

void Viewer::draw_controls() {
  view_.drawn[static_cast<size_t>(Panel::controls)] = true;
  help_marker(Panel::controls);
  ImGui::SameLine();
  ImGui::TextUnformatted("schedule (re-planned on every change)");
  ImGui::PushItemWidth(-110);
  ImGui::Combo("algorithm", &controls_.algo, kAlgorithmNames.data(), static_cast<int>(kAlgorithmNames.size()));
  ImGui::Combo("layout", &controls_.layout, kLayoutNames.data(), static_cast<int>(kLayoutNames.size()));
  ImGui::SliderInt("P (ranks)", &controls_.ranks, 1, 32);
  if (controls_.algo == static_cast<int>(Algorithm::hybrid))
    ImGui::SliderInt("U (Ulysses)", &controls_.ulysses, 1, controls_.ranks);
  ImGui::InputInt("S (tokens)", &controls_.seq, 64, 1024);
  ImGui::InputInt("block", &controls_.block, 1, 16);
  ImGui::InputInt("H (heads)", &controls_.heads, 1, 4);
  ImGui::InputInt("HKV (0 = H)", &controls_.kv_heads, 1, 4);
  ImGui::PopItemWidth();
  ImGui::Checkbox("causal", &controls_.causal);
  ImGui::SameLine();
  ImGui::BeginDisabled(!controls_.causal);
  ImGui::Checkbox("skip", &controls_.skip);
  ImGui::EndDisabled();
  ImGui::SameLine();
  ImGui::Checkbox("backward", &controls_.backward);
  ImGui::PushItemWidth(-110);
  ImGui::InputInt("window (0=none)", &controls_.window, 16, 256);
  controls_.window = std::max(0, controls_.window);
  // --full-ring: the ring algorithms' K/V make every hop, even where the mask needs none.
  ImGui::BeginDisabled(controls_.algo == static_cast<int>(Algorithm::allgather) ||
                       controls_.algo == static_cast<int>(Algorithm::ulysses));
  ImGui::Checkbox("full ring", &controls_.full_ring);
  ImGui::EndDisabled();
  if (ImGui::IsItemHovered(ImGuiHoveredFlags_AllowWhenDisabled))
    ImGui::SetTooltip("--full-ring: every K/V block makes all hops of the ring, whatever the mask");
  if (!controls_.documents.empty()) ImGui::Text("%zu packed documents (--docs)", controls_.documents.size());
  ImGui::Combo("erratum", &controls_.erratum, kErratumNames.data(), static_cast<int>(kErratumNames.size()));
  draw_hardware_choice();
  ImGui::PopItemWidth();

  ImGui::Separator();
  if (ImGui::Button(playback_.playing ? "pause" : "play")) playback_.toggle();
  ImGui::SameLine();
  if (ImGui::Button("<")) playback_.step_back();
  ImGui::SameLine();
  if (ImGui::Button(">")) playback_.step_forward();
  ImGui::SameLine();
  if (ImGui::Button("restart")) playback_.reset();
  float position = static_cast<float>(playback_.position), speed = static_cast<float>(playback_.speed);
  ImGui::PushItemWidth(-110);
  if (ImGui::SliderFloat("step", &position, 0.0f, static_cast<float>(playback_.last()), "%.2f"))
    playback_.scrub(position);
  if (ImGui::SliderFloat("speed", &speed, 0.25f, 8.0f, "%.2f steps/s")) playback_.speed = speed;
  ImGui::PopItemWidth();
  ImGui::TextWrapped("%s", model_.step_label(playback_.step()).c_str());

  ImGui::Separator();
  ImGui::BeginDisabled(live_.running());
  if (ImGui::Button("Run on the simulator")) start_run();
  ImGui::EndDisabled();
  if (live_.running()) {
    ImGui::SameLine();
    ImGui::ProgressBar(static_cast<float>(live_.progress()), {-1, 0});
  }
  ImGui::TextDisabled("small sizes; measures every block's error");
  ImGui::PushItemWidth(-110);
  ImGui::InputText("trace file", trace_input_, sizeof trace_input_);
  ImGui::PopItemWidth();
  if (ImGui::Button("Open trace")) open_trace(trace_input_);
  if (model_.source != SourceKind::plan) {
    ImGui::SameLine();
    if (ImGui::Button("Back to the plan")) replan();
  }
}

// The machine the timeline is predicted for: the presets of --hw, and a JSON file given there.
void Viewer::draw_hardware_choice() {
  const std::vector<std::string> choices = hardware_choices(controls_.hardware);
  std::vector<const char*> names;
  int current = 0;
  for (size_t i = 0; i < choices.size(); ++i) {
    names.push_back(choices[i].c_str());
    if (choices[i] == controls_.hardware) current = static_cast<int>(i);
  }
  if (ImGui::Combo("hardware", &current, names.data(), static_cast<int>(names.size()))) {
    controls_.hardware = choices[static_cast<size_t>(current)];
  }
  if (ImGui::IsItemHovered()) {
    ImGui::SetTooltip(
        "the timeline is the cost model's prediction for this machine (ringlab run --dry-run --hw);\n"
        "cpu measures this machine first, which takes a few seconds");
  }
}

// ---- [messages panel] ------------------------------------------------------------------------

void Viewer::draw_messages() {
  view_.drawn[static_cast<size_t>(Panel::messages)] = true;
  help_marker(Panel::messages);
  ImGui::SameLine();
  ImGui::Text("showing a %s", source_name(model_.source));
  ImGui::TextWrapped("%s", model_.title.c_str());
  const ImVec4 red(1.0f, 0.45f, 0.4f, 1.0f);
  if (!message_.empty()) {
    ImGui::PushStyleColor(ImGuiCol_Text, red);
    ImGui::TextWrapped("%s", message_.c_str());
    ImGui::PopStyleColor();
  }
  if (model_.first_error.known()) {
    ImGui::PushStyleColor(ImGuiCol_Text, red);
    ImGui::TextWrapped("error enters at %s", model_.first_error.text.c_str());
    ImGui::PopStyleColor();
    if (ImGui::SmallButton("go to that step")) playback_.scrub(static_cast<double>(model_.first_error.step));
  }
  if (model_.diagnosis.present) {
    ImGui::TextUnformatted(model_.diagnosis.summary.c_str());
    for (const std::string& line : model_.diagnosis.tensors) ImGui::TextUnformatted(line.c_str());
  }
  if (!model_.findings.empty()) {
    ImGui::Text("plan checker: %zu finding(s)", model_.findings.size());
    for (size_t i = 0; i < model_.findings.size() && i < 12; ++i)
      ImGui::TextWrapped("- %s", model_.findings[i].describe().c_str());
  }
}

}  // namespace ringlab::viz
