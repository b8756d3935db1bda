// The headless ImGui frame loop (Dear ImGui's example_null: a context with a fake display and a
// built font atlas, no renderer): the whole viewer drawn for hundreds of frames under simulated
// mouse and keyboard input, asserting on what the view and the model say — the hovered cell's
// tooltip, playback after keys, the timeline window after wheel and drag, re-planning, a bad
// trace's message, a live run's errors.
#include <imgui.h>
#include <imgui_internal.h>  // a window's extent of the last frame: does its text fit
#include <unistd.h>

#include <catch2/catch.hpp>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "executors/sim/sim_executor.hpp"
#include "reference/inputs.hpp"
#include "sim/pipeline/trace.hpp"
#include "sim/ranks/world_options.hpp"
#include "viz/view/viewer.hpp"
#include "viz_test_support.hpp"

using namespace ringlab;
using namespace ringlab::viz;

namespace {

// Key indices of this fake platform (any distinct values below 512).
constexpr int kSpace = 32, kLeft = 263, kRight = 262;

class HeadlessImGui {
 public:
  explicit HeadlessImGui(float width = 1600, float height = 1000) {
    IMGUI_CHECKVERSION();
    ImGui::CreateContext();
    ImGuiIO& io = ImGui::GetIO();
    io.DisplaySize = {width, height};
    io.IniFilename = nullptr;
    unsigned char* pixels = nullptr;
    int w = 0, h = 0;
    io.Fonts->GetTexDataAsRGBA32(&pixels, &w, &h);  // built, never uploaded
    io.KeyMap[ImGuiKey_Space] = kSpace;
    io.KeyMap[ImGuiKey_LeftArrow] = kLeft;
    io.KeyMap[ImGuiKey_RightArrow] = kRight;
  }
  ~HeadlessImGui() { ImGui::DestroyContext(); }
  HeadlessImGui(const HeadlessImGui&) = delete;
  HeadlessImGui& operator=(const HeadlessImGui&) = delete;

  ImGuiIO& io() { return ImGui::GetIO(); }

  void frame(Viewer& viewer, float seconds = 1.0f / 60) {
    io().DeltaTime = seconds;
    ImGui::NewFrame();
    viewer.frame(seconds);
    ImGui::Render();
    REQUIRE(ImGui::GetDrawData() != nullptr);
  }
  void frames(Viewer& viewer, int count) {
    for (int i = 0; i < count; ++i) frame(viewer);
  }
  // A key goes down for one frame and up on the next.
  void press(Viewer& viewer, int key) {
    io().KeysDown[key] = true;
    frame(viewer);
    io().KeysDown[key] = false;
    frame(viewer);
  }
  void type(Viewer& viewer, char c) {
    io().AddInputCharacter(static_cast<unsigned>(c));
    frame(viewer);
  }
  void move_to(Viewer& viewer, Vec2 at) {
    io().MousePos = {at.x, at.y};
    frame(viewer);
    frame(viewer);  // hover settles on the second frame
  }
  void click(Viewer& viewer, Vec2 at) {
    move_to(viewer, at);
    io().MouseDown[0] = true;
    frame(viewer);
    io().MouseDown[0] = false;
    frame(viewer);
  }
};

ScheduleControls controls_of(const PlanSpec& spec) { return ScheduleControls::from_spec(spec); }

bool contains(const std::vector<std::string>& lines, const std::string& text) {
  for (const std::string& line : lines)
    if (line.find(text) != std::string::npos) return true;
  return false;
}

Vec2 cell_centre(Viewer& viewer, int64_t q, int64_t k) {
  const GridGeometry g = grid_geometry(viewer.view().canvas_of(Panel::grid), viewer.view().grid_blocks);
  return g.cell_rect(q, k).centre();
}

}  // namespace

TEST_CASE("every panel draws for hundreds of frames while playing, under a moving mouse", "[viz][frames]") {
  HeadlessImGui imgui;
  const Algorithm algo = GENERATE(Algorithm::ring, Algorithm::allgather, Algorithm::ulysses, Algorithm::hybrid);
  Viewer viewer(controls_of(test::spec_of(algo, LayoutKind::zigzag, 4, true, true, Erratum::none, 2)));
  REQUIRE(viewer.message().empty());
  viewer.playback().speed = 6;
  viewer.playback().toggle();
  for (int i = 0; i < 300; ++i) {
    // Sweep the mouse over the whole display, a different place each frame.
    imgui.io().MousePos = {static_cast<float>((i * 37) % 1600), static_cast<float>((i * 53) % 1000)};
    imgui.frame(viewer);
  }
  for (int p = 0; p < static_cast<int>(Panel::count); ++p) {
    INFO(panel_name(static_cast<Panel>(p)));
    CHECK(viewer.view().drawn[static_cast<size_t>(p)]);
    CHECK(viewer.view().canvas[static_cast<size_t>(p)].width() >= 0);
  }
  CHECK(viewer.view().canvas_of(Panel::grid).width() > 100);
  CHECK(viewer.playback().position == viewer.playback().last());  // played to the end and stopped
  CHECK_FALSE(viewer.playback().playing);
}

TEST_CASE("hovering a grid cell shows its rank, step, blocks and FLOPs, and a click goes to its step",
          "[viz][frames]") {
  HeadlessImGui imgui;
  Viewer viewer(controls_of(test::spec_of(Algorithm::ring, LayoutKind::contiguous, 4, true)));
  imgui.frame(viewer);
  REQUIRE(viewer.view().grid_blocks == 4);
  imgui.move_to(viewer, cell_centre(viewer, 2, 1));
  const CellHover& hover = viewer.view().cell_hover;
  REQUIRE(hover.valid);
  CHECK(hover.q_block == 2);
  CHECK(hover.kv_block == 1);
  CHECK(contains(hover.lines, "rank 2"));
  CHECK(contains(hover.lines, "ring forward, step 1"));
  CHECK(contains(hover.lines, "queries of block 2"));
  CHECK(contains(hover.lines, "FLOP"));
  imgui.move_to(viewer, cell_centre(viewer, 0, 3));
  CHECK(viewer.view().cell_hover.kv_block == 3);
  CHECK(contains(viewer.view().cell_hover.lines, "skipped"));
  imgui.click(viewer, cell_centre(viewer, 3, 0));
  CHECK(viewer.playback().position == 3);
  imgui.move_to(viewer, {1, 999});  // off the grid
  CHECK_FALSE(viewer.view().cell_hover.valid);
}

TEST_CASE("hovering a ring node and a load bar names the rank", "[viz][frames]") {
  HeadlessImGui imgui;
  Viewer viewer(controls_of(test::spec_of(Algorithm::ring, LayoutKind::contiguous, 4, true)));
  imgui.frame(viewer);
  const RingGeometry ring = ring_geometry(viewer.view().canvas_of(Panel::ring), 4);
  imgui.move_to(viewer, ring.node(3, 4, 1));
  CHECK(viewer.view().rank_hover == 3);
  const BarGeometry bars = bar_geometry(viewer.view().canvas_of(Panel::load), 4);
  imgui.move_to(viewer, bars.slot(2).centre());
  CHECK(viewer.view().bar_hover == 2);
}

TEST_CASE("keyboard: Space plays and pauses, arrows step, R restarts", "[viz][frames]") {
  HeadlessImGui imgui;
  Viewer viewer(controls_of(test::spec_of(Algorithm::ring, LayoutKind::contiguous, 4, false, true)));
  imgui.frame(viewer);
  imgui.press(viewer, kRight);
  imgui.press(viewer, kRight);
  CHECK(viewer.playback().position == 2);
  imgui.press(viewer, kLeft);
  CHECK(viewer.playback().position == 1);
  imgui.press(viewer, kSpace);
  CHECK(viewer.playback().playing);
  imgui.frames(viewer, 30);
  CHECK(viewer.playback().position > 1);
  imgui.press(viewer, kSpace);
  CHECK_FALSE(viewer.playback().playing);
  imgui.type(viewer, 'r');
  CHECK(viewer.playback().position == 0);
}

TEST_CASE("timeline: the wheel zooms around the mouse, a drag pans, the hover line lists every row", "[viz][frames]") {
  HeadlessImGui imgui;
  Viewer viewer(controls_of(test::spec_of(Algorithm::ring, LayoutKind::zigzag, 4, true, true)));
  imgui.frame(viewer);
  const TimelineGeometry g = timeline_geometry(viewer.view().canvas_of(Panel::timeline), 4);
  const Vec2 centre{g.area.centre().x, g.area.y0 + 2 * g.row_height + 2};
  imgui.move_to(viewer, centre);
  const TimeWindow before = viewer.view().time_window;
  REQUIRE(viewer.view().timeline_hover.valid);
  CHECK_FALSE(viewer.view().timeline_hover.lines.empty());
  const double anchor = before.to_time(centre.x, g.area);
  imgui.io().MouseWheel = 2;
  imgui.frame(viewer);
  const TimeWindow zoomed = viewer.view().time_window;
  CHECK(zoomed.end - zoomed.begin == Approx((before.end - before.begin) / 1.5625));
  CHECK(zoomed.to_time(centre.x, g.area) == Approx(anchor));
  // Drag right by 100 px: the window moves to earlier times.
  imgui.io().MouseDown[0] = true;
  for (int i = 1; i <= 10; ++i) {
    imgui.io().MousePos = {centre.x + 10.0f * static_cast<float>(i), centre.y};
    imgui.frame(viewer);
  }
  imgui.io().MouseDown[0] = false;
  imgui.frame(viewer);
  CHECK(viewer.view().time_window.begin < zoomed.begin);
}

TEST_CASE("controls re-plan live, and a schedule that does not divide shows a message", "[viz][frames]") {
  HeadlessImGui imgui;
  Viewer viewer(controls_of(test::spec_of(Algorithm::ring, LayoutKind::contiguous, 4, true)));
  imgui.frame(viewer);
  viewer.controls().ranks = 3;
  viewer.controls().seq = 96;
  viewer.controls().backward = true;
  imgui.frame(viewer);
  CHECK(viewer.message().empty());
  CHECK(viewer.model().ranks == 3);
  CHECK(viewer.model().grids.size() == 2);
  viewer.controls().layout = 1;  // zig-zag
  viewer.controls().seq = 100;   // not divisible by 2P = 6: padded to 102, as ringlab run does
  imgui.frames(viewer, 3);
  CHECK(viewer.message().empty());
  CHECK(viewer.model().title.find("+2 padding tokens") != std::string::npos);
  viewer.controls().block = 7;  // an explicit block that does not fit: refused, with the numbers
  imgui.frames(viewer, 3);
  CHECK(viewer.message().find("100") != std::string::npos);
  CHECK(viewer.model().ranks == 3);  // the last good model stays on screen
  viewer.controls().block = 0;
  viewer.controls().seq = 96;
  imgui.frame(viewer);
  CHECK(viewer.message().empty());
  CHECK(viewer.model().title.find("zigzag") != std::string::npos);

  // A viewer that starts from a bad schedule draws an empty model and says why.
  ScheduleControls bad = controls_of(test::spec_of(Algorithm::hybrid, LayoutKind::contiguous, 4, false));
  bad.ulysses = 3;
  Viewer empty(bad);
  CHECK(empty.message().find("--ulysses 3") != std::string::npos);
  imgui.frames(empty, 10);
  CHECK(empty.model().step_count() == 0);
}

TEST_CASE("the hardware control re-plans: the timeline becomes the cost model's for the new machine", "[viz][frames]") {
  HeadlessImGui imgui;
  Viewer viewer(controls_of(test::spec_of(Algorithm::ring, LayoutKind::zigzag, 4, true, true)));
  imgui.frame(viewer);
  CHECK(viewer.model().timeline.hardware == "h100-nvlink");
  const double nvlink_end = viewer.model().timeline.end;
  viewer.playback().scrub(3);
  viewer.controls().hardware = "h100-pcie";
  imgui.frames(viewer, 3);
  CHECK(viewer.message().empty());
  CHECK(viewer.model().timeline.hardware == "h100-pcie");
  CHECK(viewer.model().timeline.end > nvlink_end);
  CHECK(viewer.playback().position == 3);  // the same schedule: the step stays
  CHECK(viewer.view().drawn[static_cast<size_t>(Panel::timeline)]);
  // A machine file that does not exist: a message, and the last good model stays.
  viewer.controls().hardware = "/nonexistent/machine.json";
  imgui.frame(viewer);
  CHECK(viewer.message().find("/nonexistent/machine.json") != std::string::npos);
  CHECK(viewer.model().timeline.hardware == "h100-pcie");
  CHECK(hardware_choices(viewer.controls().hardware).back() == "/nonexistent/machine.json");
  CHECK(hardware_choices("h100-ib").size() == 4);
}

TEST_CASE("a malformed trace shows one line in the Messages panel, and a good one opens", "[viz][frames]") {
  HeadlessImGui imgui;
  Viewer viewer(controls_of(test::spec_of(Algorithm::ring, LayoutKind::contiguous, 4, true)));
  const std::filesystem::path dir = std::filesystem::temp_directory_path();
  const std::string bad = (dir / ("ringlab_viz_frames_bad_" + std::to_string(getpid()) + ".json")).string();
  std::ofstream(bad) << "{\"traceEvents\": [{\"ph\": \"X\", \"pid\": 0}";
  CHECK_FALSE(viewer.open_trace(bad));
  CHECK(viewer.message().find(bad) != std::string::npos);
  CHECK(viewer.message().find('\n') == std::string::npos);
  CHECK(viewer.model().source == SourceKind::plan);
  imgui.frames(viewer, 5);

  const PlanSpec spec = test::spec_of(Algorithm::ring, LayoutKind::zigzag, 3, true, true);
  SimExecutor sim(make_world_options(3, 10, {}, false), 1);
  ExecuteOptions traced;
  traced.trace = true;
  const ExecutionResult run = sim.execute(build_plan(spec), make_inputs(spec.dims, 0, true), traced);
  REQUIRE(!run.failure);
  const std::string good = (dir / ("ringlab_viz_frames_good_" + std::to_string(getpid()) + ".json")).string();
  write_chrome_trace(good, run.trace, 3);
  REQUIRE(viewer.open_trace(good));
  CHECK(viewer.message().empty());
  CHECK(viewer.model().source == SourceKind::trace);
  imgui.frames(viewer, 60);
  CHECK(viewer.view().grid_blocks == 3);
  std::filesystem::remove(bad);
  std::filesystem::remove(good);
}

TEST_CASE("a trace that names its run sets the controls to that schedule, and keeps its model",
          "[viz][frames][trace]") {
  HeadlessImGui imgui;
  const ScheduleControls start = controls_of(test::spec_of(Algorithm::ring, LayoutKind::contiguous, 4, false));
  Viewer viewer(start);
  PlanSpec spec = test::spec_of(Algorithm::ring, LayoutKind::zigzag, 3, true, true);
  spec.dims.heads = 4, spec.dims.kv_heads = 2;
  SimExecutor sim(make_world_options(3, 10, {}, false), 1);
  ExecuteOptions traced;
  traced.trace = true;
  const ExecutionResult run = sim.execute(build_plan(spec), make_inputs(spec.dims, 0, true), traced);
  REQUIRE(!run.failure);
  const std::filesystem::path dir = std::filesystem::temp_directory_path();
  const std::string named = (dir / ("ringlab_viz_named_" + std::to_string(getpid()) + ".json")).string();
  const std::string bare = (dir / ("ringlab_viz_bare_" + std::to_string(getpid()) + ".json")).string();
  const TraceRun about{"ringlab-gpu run", "gpu-streams, 3 virtual ranks", spec};
  write_chrome_trace(named, run.trace, 3, &about);
  write_chrome_trace(bare, run.trace, 3);

  // A trace without its run (another tool's, an older ringlab's) leaves the controls alone.
  REQUIRE(viewer.open_trace(bare));
  CHECK(viewer.controls() == start);
  REQUIRE(viewer.open_trace(named));
  CHECK(viewer.message().empty());
  ScheduleControls expected = ScheduleControls::from_spec(spec);
  expected.hardware = start.hardware;
  CHECK(viewer.controls() == expected);
  CHECK(kLayoutNames[static_cast<size_t>(viewer.controls().layout)] == std::string("zigzag"));
  CHECK(viewer.controls().ranks == 3);
  CHECK(viewer.controls().backward);
  // Frames do not re-plan over the trace: the model stays the measured one until an edit.
  imgui.frames(viewer, 10);
  CHECK(viewer.model().source == SourceKind::trace);
  viewer.controls().ranks = 4;
  imgui.frame(viewer);
  CHECK(viewer.model().source == SourceKind::plan);
  std::filesystem::remove(named);
  std::filesystem::remove(bare);
}

TEST_CASE("a live run of the reverse-dkv erratum: the grid shows the wrong blocks and the step",
          "[viz][frames][errata]") {
  HeadlessImGui imgui;
  Viewer viewer(
      controls_of(test::spec_of(Algorithm::ring, LayoutKind::contiguous, 3, true, true, Erratum::reverse_dkv)));
  viewer.view().colouring = GridColouring::error;
  imgui.frame(viewer);
  viewer.start_run();
  for (int i = 0; i < 2000 && viewer.model().source != SourceKind::run; ++i) {
    viewer.wait_for_run();
    imgui.frame(viewer);
  }
  REQUIRE(viewer.model().source == SourceKind::run);
  const ErrorEntry& error = viewer.model().first_error;
  REQUIRE(error.known());
  viewer.playback().scrub(static_cast<double>(error.step));
  imgui.frame(viewer);
  CHECK(viewer.view().grid_blocks == 3);
  imgui.move_to(viewer, cell_centre(viewer, error.q_block, error.kv_block));
  REQUIRE(viewer.view().cell_hover.valid);
  CHECK(viewer.view().cell_hover.pass == Pass::backward);
  CHECK(contains(viewer.view().cell_hover.lines, "accumulator of block"));
  CHECK(contains(viewer.view().cell_hover.lines, "final dK/dV"));
  imgui.frames(viewer, 100);
}

TEST_CASE("a P typed past the viewer's limit is refused in the UI at once, and a huge S re-plans at once",
          "[viz][frames]") {
  HeadlessImGui imgui;
  Viewer viewer(controls_of(test::spec_of(Algorithm::ring, LayoutKind::contiguous, 4, true)));
  imgui.frame(viewer);
  // What Ctrl+click on the P slider and typing a number does: the command line's limit holds.
  viewer.controls().ranks = 600;
  viewer.controls().seq = 600 * 64;
  imgui.frames(viewer, 2);
  CHECK_THAT(viewer.message(), Catch::Contains("at most 512 ring positions") && Catch::Contains("has 600"));
  CHECK(viewer.model().ranks == 4);  // not planned: the last good model stays
  viewer.controls().ranks = 8;
  imgui.frame(viewer);
  CHECK(viewer.message().empty());
  CHECK(viewer.model().ranks == 8);
  // S typed as 2 x 10^9 under zig-zag: a re-plan in well under a second (was minutes and 16 GB).
  viewer.controls().layout = 1;
  viewer.controls().seq = 2'000'000'000;
  const auto start = std::chrono::steady_clock::now();
  imgui.frame(viewer);
  CHECK(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < 5.0);
  CHECK(viewer.message().empty());
  CHECK_THAT(viewer.model().title, Catch::Contains("S=2000000000"));
}

TEST_CASE("after a run the controls show the schedule that ran, at its small sizes", "[viz][frames]") {
  HeadlessImGui imgui;
  ScheduleControls controls;  // ringlab-viz's defaults: S = 1024, D = 64
  controls.causal = true;
  Viewer viewer(controls);
  viewer.run_blocking();
  REQUIRE(viewer.model().source == SourceKind::run);
  CHECK(viewer.controls().seq == 512);
  CHECK(viewer.controls().dim == 16);
  CHECK(viewer.controls().causal);
  CHECK(viewer.controls().hardware == controls.hardware);
  imgui.frames(viewer, 3);
  CHECK(viewer.model().source == SourceKind::run);  // the controls count as planned: the run stays
}

TEST_CASE("at 1600 x 1000 the load panel's layout figures, the error legend and the controls fit their panels",
          "[viz][frames]") {
  HeadlessImGui imgui;
  PlanSpec spec = test::spec_of(Algorithm::ring, LayoutKind::zigzag, 4, true, true, Erratum::reverse_dkv);
  Viewer viewer(controls_of(spec));
  viewer.view().colouring = GridColouring::error;
  imgui.frames(viewer, 3);
  REQUIRE(viewer.model().load.layouts.size() == 4);
  for (const char* name : {"Load balance###load", "Block grid###grid", "Controls###controls", "Messages###messages"}) {
    INFO(name);
    const ImGuiWindow* window = ImGui::FindWindowByName(name);
    REQUIRE(window != nullptr);
    // The rightmost point any item of the last frame reached: text past the work rect is cut off.
    CHECK(window->DC.CursorMaxPos.x <= window->WorkRect.Max.x + 0.5f);
  }
}
