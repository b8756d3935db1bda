// The viewer's interaction state that is not drawing: the schedule controls (what gets
// re-planned), playback (which step, how fast), how the grid is coloured, the panels and their
// help topics. Plain structs with the rules that change them, so tests drive them directly.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "sim/plan/plan.hpp"
#include "viz/model/palette.hpp"
#include "viz/model/schedule_model.hpp"

namespace ringlab::viz {

// ---- playback --------------------------------------------------------------------------------

// A position along the schedule's global steps: integer part = the step whose state is shown,
// fraction = how far that step's transfers have travelled (the ring panel moves them smoothly).
struct Playback {
  double position = 0;
  bool playing = false;
  double speed = 1.0;  // steps per second
  int64_t steps = 1;

  int64_t step() const { return static_cast<int64_t>(position); }
  float fraction() const { return static_cast<float>(position - static_cast<double>(step())); }
  double last() const { return static_cast<double>(steps > 0 ? steps - 1 : 0); }

  void set_steps(int64_t count);  // keeps the position when it still fits
  void advance(double seconds);   // when playing; stops at the last step
  void toggle();                  // play / pause; playing from the end starts over
  void step_forward();            // to the next whole step
  void step_back();               // to the start of this step, or the previous one
  void scrub(double to);          // clamped to [0, last]
  void reset();                   // step 0, paused
};

// ---- schedule controls -----------------------------------------------------------------------

inline constexpr std::array<const char*, 4> kAlgorithmNames{"ring", "allgather", "ulysses", "hybrid"};
inline constexpr std::array<const char*, 4> kLayoutNames{"contiguous", "zigzag", "striped", "balanced"};
inline constexpr std::array<const char*, 3> kErratumNames{"none", "reverse-dkv", "kv-offset-mask"};

// What the Controls panel edits (ints, as the widgets want them, and the machine's name); any
// change re-plans.
struct ScheduleControls {
  int algo = 0;      // index into kAlgorithmNames
  int layout = 0;    // index into kLayoutNames
  int block = 0;     // tokens per layout unit, 0 = the layout's default
  int ranks = 4;     // P
  int ulysses = 2;   // hybrid only: U
  int batch = 1;     // B
  int seq = 1024;    // S
  int heads = 4;     // H
  int kv_heads = 0;  // HKV, 0 = H
  int dim = 64;      // D
  bool causal = false;
  int window = 0;                  // sliding window W, 0 = none
  std::vector<int64_t> documents;  // packed document lengths (from --docs; not edited in the viewer)
  bool skip = true;
  bool full_ring = false;  // --full-ring: every K/V block makes all R-1 hops, whatever the mask
  bool backward = false;
  int erratum = 0;                          // index into kErratumNames
  std::string hardware = kDefaultHardware;  // the cost model's machine for the timeline: a preset or JSON file

  PlanSpec spec() const;
  static ScheduleControls from_spec(const PlanSpec& spec);
  friend bool operator==(const ScheduleControls&, const ScheduleControls&) = default;
};

// The machines the hardware control offers: the presets of `--hw` (hardware_preset_names), then
// `current` when it is none of them (a JSON file given with --hw).
std::vector<std::string> hardware_choices(const std::string& current);

// ---- grid colouring --------------------------------------------------------------------------

enum class GridColouring : uint8_t { step, rank, error };
const char* colouring_name(GridColouring colouring);
GridColouring parse_colouring(const std::string& name);  // step | rank | error; throws UsageError

// The fill of a cell: by the step (within its phase) that computes it, by rank, or by error;
// skipped and fully masked cells keep their own colours; cells computed after `current_step`
// are dimmed, so the grid fills in as the schedule plays.
Rgba cell_colour(const ScheduleModel& model, const GridCell& cell, GridColouring colouring, int64_t current_step);
// The colour of a ring position's final-result strip (a run): green within tolerance, red not.
Rgba block_result_colour(const BlockResult& result, bool keys);

// The legend of the grid coloured by error: every colour cell_colour gives there, and the marks
// drawn over and beside the cells (the red corner of a wrong cell, the current step's yellow
// outline, the red outline where the error enters, the result strips). Drawn as a filled square,
// a corner, an outline or a strip, so orange "misrouted" reads apart from the yellow outline.
enum class SwatchShape : uint8_t { fill, corner, outline, strip };
struct LegendSwatch {
  SwatchShape shape = SwatchShape::fill;
  Rgba colour;
  const char* label = "";
};
std::vector<LegendSwatch> error_legend();

// ---- panels and help -------------------------------------------------------------------------

enum class Panel : uint8_t { ring, grid, load, timeline, controls, messages, count };
const char* panel_name(Panel panel);
// "ring" | "grid" | "load" | "timeline" | "controls" | "messages"; throws UsageError.
Panel parse_panel(const std::string& name);

// The help marker of a panel: the book chapter that explains what it shows, and one paragraph.
struct HelpTopic {
  const char* chapter;  // "book/ring-attention.md"
  const char* text;
};
HelpTopic help_topic(Panel panel);

}  // namespace ringlab::viz
