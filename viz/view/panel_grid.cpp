#include <algorithm>

#include "viz/view/draw_util.hpp"
#include "viz/view/panels.hpp"

namespace ringlab::viz {

namespace {

const BlockGrid* chosen_grid(const ScheduleModel& model, const ViewState& view, int64_t step) {
  switch (view.grid_pass) {
    case GridPassChoice::forward: return model.grid_of(Pass::forward);
    case GridPassChoice::backward:  // a schedule without a backward pass shows its forward grid
      if (const BlockGrid* backward = model.grid_of(Pass::backward)) return backward;
      return model.grid_of(Pass::forward);
    case GridPassChoice::current: break;
  }
  return model.grid_at(step);
}

// A computed cell: its visible part in `colour` over the masked-out background (cell_parts: per
// layout unit when the model knows the units, so zig-zag's half blocks show as such, else by the
// block's shape) — the same pieces the book's grid figure draws.
void draw_cell_body(ImDrawList* list, const ScheduleModel& model, const GridCell& cell, const Rect& r, Rgba colour) {
  const std::vector<CellPart> parts = cell_parts(model, cell);
  if (parts.empty()) {
    fill(list, r, colour);
    return;
  }
  fill(list, r, palette::masked_out);
  for (const CellPart& part : parts) {
    const Rect s = part.in(r);
    if (part.kind == CellPartKind::visible || part.kind == CellPartKind::shaded)
      fill(list, s, part_colour(part, colour));
    if (part.kind == CellPartKind::diagonal) {
      list->AddTriangleFilled({s.x0, s.y0}, {s.x0, s.y1}, {s.x1, s.y1}, to_imgui(colour));
    }
  }
}

void draw_axes(ImDrawList* list, const GridGeometry& g) {
  // The corner says which way is which: query blocks down, key blocks across.
  text_at(list, {g.matrix.x0 - GridGeometry::kMargin + 3, g.matrix.y0 - GridGeometry::kMargin + 2}, palette::text_dim,
          "q\\k");
  if (g.cell < 18) return;
  for (int64_t b = 0; b < g.blocks; ++b) {
    const Rect column = g.cell_rect(0, b), row = g.cell_rect(b, 0);
    const std::string label = std::to_string(b);
    text_at(list, {column.centre().x - 4, g.matrix.y0 - 26}, palette::text_dim, label);
    text_at(list, {g.matrix.x0 - 26, row.centre().y - 7}, palette::text_dim, label);
  }
}

// The error colouring's legend (error_legend), flowing over as many lines as the panel needs.
void draw_error_legend() {
  ImDrawList* list = ImGui::GetWindowDrawList();
  const float side = ImGui::GetTextLineHeight() - 2;
  bool first = true;
  for (const LegendSwatch& swatch : error_legend()) {
    const float width = side + 4 + ImGui::CalcTextSize(swatch.label).x;
    if (!first) flow_same_line(width, 10);
    first = false;
    const ImVec2 at = ImGui::GetCursorScreenPos();
    const Rect r{at.x, at.y + 1, at.x + side, at.y + 1 + side};
    switch (swatch.shape) {
      case SwatchShape::fill: fill(list, r, swatch.colour); break;
      case SwatchShape::corner: {
        fill(list, r, palette::error_ok);
        const float s = 0.6f * side;
        list->AddTriangleFilled({r.x1 - s, r.y0}, {r.x1, r.y0}, {r.x1, r.y0 + s}, to_imgui(swatch.colour));
        break;
      }
      case SwatchShape::outline:
        fill(list, r, palette::error_unknown);
        list->AddRect({r.x0, r.y0}, {r.x1, r.y1}, to_imgui(swatch.colour), 0, 0, 2);
        break;
      case SwatchShape::strip: fill(list, {r.x0, r.y0 + 0.35f * side, r.x1, r.y1 - 0.35f * side}, swatch.colour); break;
    }
    ImGui::Dummy({side, side});
    ImGui::SameLine(0, 4);
    ImGui::TextUnformatted(swatch.label);
  }
}

}  // namespace

void draw_grid_panel(const ScheduleModel& model, const Playback& playback, ViewState& view) {
  const int64_t step = std::clamp<int64_t>(playback.step(), 0, std::max<int64_t>(0, model.step_count() - 1));
  help_marker(Panel::grid);
  ImGui::SameLine();
  ImGui::TextUnformatted("colour:");
  for (GridColouring c : {GridColouring::step, GridColouring::rank, GridColouring::error}) {
    ImGui::SameLine();
    if (ImGui::RadioButton(colouring_name(c), view.colouring == c)) view.colouring = c;
  }
  if (model.grids.size() > 1) {
    // On this line when the label and its three choices fit, else on the next.
    const ImGuiStyle& style = ImGui::GetStyle();
    flow_same_line(ImGui::CalcTextSize(" pass: current fwd bwd").x +
                   3 * (ImGui::GetFrameHeight() + style.ItemInnerSpacing.x + style.ItemSpacing.x));
    ImGui::TextUnformatted(" pass:");
    const char* names[] = {"current", "fwd", "bwd"};
    for (int p = 0; p < 3; ++p) {
      ImGui::SameLine();
      if (ImGui::RadioButton(names[p], static_cast<int>(view.grid_pass) == p))
        view.grid_pass = static_cast<GridPassChoice>(p);
    }
  }
  if (view.colouring == GridColouring::error) draw_error_legend();
  if (model.first_error.known()) {
    ImGui::PushStyleColor(ImGuiCol_Text, ImVec4(1.0f, 0.45f, 0.4f, 1.0f));
    ImGui::TextWrapped("error enters at %s", model.first_error.text.c_str());
    ImGui::PopStyleColor();
  } else if (model.diagnosis.present) {
    ImGui::TextUnformatted(model.diagnosis.summary.c_str());
  }

  const Rect canvas = begin_canvas(view, Panel::grid, "##grid");
  const bool hovered = ImGui::IsItemHovered(), clicked = ImGui::IsItemClicked(ImGuiMouseButton_Left);
  view.cell_hover = {};
  const BlockGrid* grid = chosen_grid(model, view, step);
  if (!grid) return;
  view.grid_blocks = grid->blocks;
  ImDrawList* list = ImGui::GetWindowDrawList();
  list->PushClipRect({canvas.x0, canvas.y0}, {canvas.x1, canvas.y1}, true);
  const GridGeometry g = grid_geometry(canvas, grid->blocks);
  draw_axes(list, g);

  for (const GridCell& cell : grid->cells) {
    const Rect r = g.cell_rect(cell.q_block, cell.kv_block);
    const Rgba colour = cell_colour(model, cell, view.colouring, step);
    if (cell.computed() && cell.shape != BlockShape::masked)
      draw_cell_body(list, model, cell, r, colour);
    else
      fill(list, r, colour);
    if (cell.wrong()) {  // a red corner on wrong cells, whatever the colouring
      const float s = std::max(3.0f, r.width() * 0.22f);
      list->AddTriangleFilled({r.x1 - s, r.y0}, {r.x1, r.y0}, {r.x1, r.y0 + s}, to_imgui(palette::error_wrong));
    }
    if (g.cell >= 40 && cell.computed()) {
      // In a colour that stands out on this cell's (dark when dimmed, light when not): the
      // background colour was all but invisible on dimmed cells.
      text_at(list, {r.x0 + 4, r.y1 - 16}, text_on(colour), "t" + std::to_string(cell.phase_step));
    }
  }
  // The current step: its cells outlined.
  for (const GridCell& cell : grid->cells)
    if (cell.planned && cell.step == step)
      for (const Rect& band : g.highlight_bands(cell.q_block, cell.kv_block)) fill(list, band, palette::highlight);
  // Where the error enters.
  if (model.first_error.known() && model.first_error.pass == grid->pass) {
    const Rect r = g.cell_rect(model.first_error.q_block, model.first_error.kv_block).inset(-2);
    list->AddRect({r.x0, r.y0}, {r.x1, r.y1}, to_imgui(palette::error_wrong), 0, 0, 2);
  }
  // Packed documents: each block's tokens coloured by document, left of the rows and above the
  // columns (a run's result strips take their place).
  if (!model.diagnosis.present)
    for (const DocumentStrip& strip : document_strips(model, g)) fill(list, strip.rect, strip.colour);
  // After a run: each block's final result, queries on the left, keys on top (backward).
  if (model.diagnosis.present && static_cast<int64_t>(model.diagnosis.blocks.size()) == grid->blocks) {
    for (int64_t b = 0; b < grid->blocks; ++b) {
      const BlockResult& result = model.diagnosis.blocks[static_cast<size_t>(b)];
      fill(list, g.row_strip(b), block_result_colour(result, false));
      if (grid->pass == Pass::backward) fill(list, g.column_strip(b), block_result_colour(result, true));
    }
  }
  list->PopClipRect();

  int64_t q = -1, k = -1;
  if (hovered && g.hit(from_imgui(ImGui::GetIO().MousePos), q, k)) {
    view.cell_hover = {true, grid->pass, q, k, model.describe_cell(*grid, q, k)};
    if (clicked && grid->at(q, k).step >= 0) view.jump_to_step = grid->at(q, k).step;  // click: go to its step
    ImGui::BeginTooltip();
    for (const std::string& line : view.cell_hover.lines) ImGui::TextUnformatted(line.c_str());
    ImGui::EndTooltip();
  }
}

}  // namespace ringlab::viz
