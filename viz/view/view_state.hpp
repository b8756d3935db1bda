// The view's own state (how things are shown, not what), and what the last frame drew: panel
// canvases and hover results, kept so tests, tooltips and the screenshot's geometry file read
// them instead of recomputing. One instance per viewer; nothing here is static.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "viz/model/controls.hpp"
#include "viz/model/geometry.hpp"

namespace ringlab::viz {

enum class GridPassChoice : uint8_t { current, forward, backward };

struct CellHover {
  bool valid = false;
  Pass pass = Pass::forward;
  int64_t q_block = -1, kv_block = -1;
  std::vector<std::string> lines;  // the tooltip, from ScheduleModel::describe_cell
};

struct TimelineHover {
  bool valid = false;
  double time = 0;
  std::vector<std::string> lines;  // one per span under the line, "rank 2 compute: fwd b0xb1 (full)"
};

struct ViewState {
  // how things are shown
  GridColouring colouring = GridColouring::step;
  GridPassChoice grid_pass = GridPassChoice::current;
  bool load_shows_time = false;  // load bars: FLOPs, or busy and blocked seconds
  TimeWindow time_window;
  bool time_window_fitted = false;  // refit when the model changes

  // what the last frame drew
  std::array<Rect, static_cast<size_t>(Panel::count)> canvas{};  // per panel, screen pixels
  std::array<bool, static_cast<size_t>(Panel::count)> drawn{};
  CellHover cell_hover;
  int64_t rank_hover = -1;  // ring node under the mouse
  int64_t bar_hover = -1;   // load bar under the mouse
  TimelineHover timeline_hover;
  int64_t jump_to_step = -1;  // a click asked for this step (a grid cell's); the viewer applies it
  int64_t grid_blocks = 0;    // R of the grid drawn
  const Rect& canvas_of(Panel p) const { return canvas[static_cast<size_t>(p)]; }
};

}  // namespace ringlab::viz
