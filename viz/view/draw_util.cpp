#include "viz/view/draw_util.hpp"

#include <algorithm>

namespace ringlab::viz {

void help_marker(Panel panel) {
  const HelpTopic topic = help_topic(panel);
  ImGui::TextDisabled("(?)");
  if (ImGui::IsItemHovered()) {
    ImGui::BeginTooltip();
    ImGui::PushTextWrapPos(ImGui::GetFontSize() * 34.0f);
    ImGui::TextUnformatted(topic.chapter);
    ImGui::Separator();
    ImGui::TextUnformatted(topic.text);
    ImGui::PopTextWrapPos();
    ImGui::EndTooltip();
  }
}

Rect begin_canvas(ViewState& view, Panel panel, const char* id, float min_height) {
  const ImVec2 origin = ImGui::GetCursorScreenPos();
  ImVec2 size = ImGui::GetContentRegionAvail();
  size.x = std::max(size.x, 40.0f);
  size.y = std::max(size.y, min_height);
  ImGui::InvisibleButton(id, size);
  const Rect canvas{origin.x, origin.y, origin.x + size.x, origin.y + size.y};
  fill(ImGui::GetWindowDrawList(), canvas, palette::background);
  view.canvas[static_cast<size_t>(panel)] = canvas;
  view.drawn[static_cast<size_t>(panel)] = true;
  return canvas;
}

void text_at(ImDrawList* list, Vec2 at, Rgba colour, const std::string& text) {
  list->AddText({at.x, at.y}, to_imgui(colour), text.c_str());
}

void flow_same_line(float width, float spacing) {
  // Decided before SameLine: a SameLine then NewLine would count the gap after the line's last
  // item as content, past the panel's edge.
  const float gap = spacing >= 0 ? spacing : ImGui::GetStyle().ItemSpacing.x;
  const float right = ImGui::GetWindowPos().x + ImGui::GetWindowContentRegionMax().x;
  if (ImGui::GetItemRectMax().x + gap + width <= right) ImGui::SameLine(0, spacing);
}

}  // namespace ringlab::viz
