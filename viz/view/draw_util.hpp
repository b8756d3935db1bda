// Small ImGui helpers shared by the panels: colour and geometry conversion, the help marker,
// and the canvas every panel draws into.
#pragma once

#include <imgui.h>

#include <string>

#include "viz/model/controls.hpp"
#include "viz/model/geometry.hpp"
#include "viz/model/palette.hpp"
#include "viz/view/view_state.hpp"

namespace ringlab::viz {

inline ImU32 to_imgui(Rgba c) { return IM_COL32(c.r, c.g, c.b, c.a); }
inline ImU32 to_imgui(Rgba c, uint8_t alpha) { return IM_COL32(c.r, c.g, c.b, alpha); }
inline ImVec2 to_imgui(Vec2 v) { return {v.x, v.y}; }
inline Vec2 from_imgui(ImVec2 v) { return {v.x, v.y}; }

// An opaque rectangle: no rounding, so exactly the pixels of the rect (tests check them).
inline void fill(ImDrawList* list, const Rect& r, Rgba colour) {
  list->AddRectFilled({r.x0, r.y0}, {r.x1, r.y1}, to_imgui(colour));
}

// "(?)" that shows the panel's book chapter and a paragraph on hover.
void help_marker(Panel panel);

// Claims the rest of the window's content region as `panel`'s interactive canvas (an invisible
// button, so it takes hover, clicks and drags), fills its background, records it in the view (the
// panel's canvas, drawn this frame: what the screenshot test's geometry reads) and returns it.
Rect begin_canvas(ViewState& view, Panel panel, const char* id, float min_height = 40);

void text_at(ImDrawList* list, Vec2 at, Rgba colour, const std::string& text);

// Call before an item `width` pixels wide: it goes on the line of the previous item when it fits
// there, else on a new line — a flow layout, so lists of labelled values wrap in narrow panels
// instead of running past their edge.
void flow_same_line(float width, float spacing = -1);

}  // namespace ringlab::viz
