// The block grid figure: the viewer's grid panel (viz/view/panel_grid.cpp) on a white page, laid
// out by the viewer's grid_geometry and coloured by its cell_colour.
// Sections: [cells] [axes and legend] [grid figure]
#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <stdexcept>
#include <string>

#include "reference/error.hpp"
#include "viz/figures/book_figures.hpp"
#include "viz/model/geometry.hpp"

namespace ringlab::viz {

namespace {

constexpr double kMatrixLeft = 70, kMatrixTop = 70;  // the matrix's corner: room for the title and axis labels
constexpr int64_t kNoDimming = std::numeric_limits<int64_t>::max();  // a figure shows every step done
constexpr int64_t kLegendEntries = 16;

// ---- [cells] ---------------------------------------------------------------------------------

const char* cell_state(const GridCell& cell) {
  if (!cell.planned) return "unplanned";
  switch (cell.shape) {
    case BlockShape::full: return "visible";
    case BlockShape::diagonal: return "diagonal";
    case BlockShape::q_half:
    case BlockShape::kv_half: return "half";
    case BlockShape::masked: return "masked";
    case BlockShape::skipped: return "skipped";
    case BlockShape::erratum: return "erratum";
    case BlockShape::partial: return "partial";
  }
  return "?";
}

std::string joined(const std::vector<std::string>& lines) {
  std::string text;
  for (const std::string& line : lines) text += (text.empty() ? "" : "; ") + line;
  return text;
}

void draw_part(Figure& figure, const CellPart& part, const Rect& r, Rgba colour) {
  const double w = r.width(), h = r.height();
  const double x0 = r.x0 + part.x0 * w, y0 = r.y0 + part.y0 * h, x1 = r.x0 + part.x1 * w, y1 = r.y0 + part.y1 * h;
  DataAttributes data;
  if (part.q_unit >= 0) data = {{"q-unit", std::to_string(part.q_unit)}, {"k-unit", std::to_string(part.k_unit)}};
  switch (part.kind) {
    case CellPartKind::visible:
      figure.rects.push_back({x0, y0, x1 - x0, y1 - y0, colour, false, "part visible", data, ""});
      break;
    case CellPartKind::hidden:
      figure.rects.push_back({x0, y0, x1 - x0, y1 - y0, palette::masked_out, false, "part hidden", data, ""});
      break;
    case CellPartKind::diagonal:
      figure.triangles.push_back({{x0, y0, x0, y1, x1, y1}, colour, "part diagonal", data});
      break;
    case CellPartKind::shaded:
      data.emplace_back("visible", std::to_string(part.visible));
      figure.rects.push_back({x0, y0, x1 - x0, y1 - y0, part_colour(part, colour), false, "part shaded", data, ""});
      break;
  }
}

// One cell: its square (the masked-out colour under a cell cut by the mask), the parts the mask
// leaves visible, and its step when the cell is large enough to label.
void draw_cell(Figure& figure, const ScheduleModel& model, const BlockGrid& grid, const GridCell& cell, const Rect& r,
               GridColouring colouring) {
  const Rgba colour = cell_colour(model, cell, colouring, kNoDimming);
  const std::vector<CellPart> parts = cell_parts(model, cell);
  const int64_t rank = cell.ranks.empty() ? -1 : cell.ranks.front();
  figure.rects.push_back({r.x0,
                          r.y0,
                          r.width(),
                          r.height(),
                          parts.empty() ? colour : palette::masked_out,
                          false,
                          std::string("cell ") + cell_state(cell),
                          {{"q", std::to_string(cell.q_block)},
                           {"k", std::to_string(cell.kv_block)},
                           {"step", std::to_string(cell.phase_step)},
                           {"rank", std::to_string(rank)}},
                          joined(model.describe_cell(grid, cell.q_block, cell.kv_block))});
  for (const CellPart& part : parts) draw_part(figure, part, r, colour);
  if (r.width() >= 40 && cell.computed()) {  // as the viewer labels large cells: "t" and the step
    figure.texts.push_back({r.x0 + 4, r.y1 - 5, "t" + std::to_string(cell.phase_step), 10, "start", text_on(colour)});
  }
}

// ---- [axes and legend] -----------------------------------------------------------------------

void draw_axes(Figure& figure, const GridGeometry& g) {
  const double middle = (g.matrix.x0 + g.matrix.x1) / 2;
  figure.texts.push_back({middle, kMatrixTop - 26, "key block (ring position)", 11, "middle"});
  figure.texts.push_back({kMatrixLeft - 34, (g.matrix.y0 + g.matrix.y1) / 2, "query block (ring position)", 11,
                          "middle", palette::paper::text, -90});
  for (int64_t b = 0; b < g.blocks; ++b) {
    if (g.cell < 14 && b % 4 != 0) continue;
    const Rect column = g.cell_rect(0, b), row = g.cell_rect(b, 0);
    const std::string name = std::to_string(b);
    figure.texts.push_back({column.centre().x, kMatrixTop - 6, name, 9, "middle", palette::paper::text_dim});
    figure.texts.push_back({kMatrixLeft - 6, row.centre().y + 3, name, 9, "end", palette::paper::text_dim});
  }
}

// The colour entries of the legend: the steps of the phase that computes the grid, or the ranks.
double draw_colour_legend(Figure& figure, const ScheduleModel& model, const BlockGrid& grid, GridColouring colouring,
                          double x, double y) {
  std::vector<std::pair<Rgba, std::string>> entries;
  if (colouring == GridColouring::rank) {
    figure.texts.push_back({x, y - 8, "rank that computes", 11, "start"});
    std::set<int64_t> ranks;
    for (const GridCell& cell : grid.cells)
      if (cell.computed() && !cell.ranks.empty()) ranks.insert(cell.ranks.front());
    for (int64_t rank : ranks) entries.emplace_back(category_colour(rank), "rank " + std::to_string(rank));
  } else {
    figure.texts.push_back({x, y - 8, "step (within its phase)", 11, "start"});
    const auto computed =
        std::find_if(grid.cells.begin(), grid.cells.end(), [](const GridCell& c) { return c.step >= 0; });
    const int64_t steps =
        computed == grid.cells.end()
            ? 1
            : model.phases[static_cast<size_t>(model.steps[static_cast<size_t>(computed->step)].phase)].steps;
    for (int64_t t = 0; t < steps; ++t) entries.emplace_back(step_colour(t, steps), "step " + std::to_string(t));
  }
  const auto shown = std::min<int64_t>(static_cast<int64_t>(entries.size()), kLegendEntries);
  for (int64_t i = 0; i < shown; ++i)
    y = add_legend_item(figure, x, y, entries[static_cast<size_t>(i)].first, entries[static_cast<size_t>(i)].second);
  if (shown < static_cast<int64_t>(entries.size())) {
    figure.texts.push_back(
        {x, y + 10, "... " + std::to_string(static_cast<int64_t>(entries.size()) - shown) + " more", 10});
    y += 18;
  }
  return y;
}

// The legend entries for cells that are not simply computed, for those the grid has.
double draw_state_legend(Figure& figure, const ScheduleModel& model, const BlockGrid& grid, double x, double y) {
  bool cut = false, skipped = false, masked = false;
  for (const GridCell& cell : grid.cells) {
    cut |= cell.computed() && (cell.shape == BlockShape::diagonal || cell.shape == BlockShape::q_half ||
                               cell.shape == BlockShape::kv_half || cell.shape == BlockShape::partial);
    skipped |= !cell.computed();
    masked |= cell.planned && cell.shape == BlockShape::masked;
  }
  y += 10;
  if (cut)
    y = add_legend_item(figure, x, y, palette::masked_out,
                        model.mask.general() ? "hidden by the mask (shaded: partly)" : "hidden by the causal mask");
  if (skipped) y = add_legend_item(figure, x, y, palette::skipped, "skipped: no kernel call");
  if (masked) y = add_legend_item(figure, x, y, palette::masked_computed, "computed, all masked (--no-skip)");
  return y;
}

}  // namespace

// ---- [grid figure] ---------------------------------------------------------------------------

Figure grid_figure(const ScheduleModel& model, GridColouring colouring, Pass pass) {
  check_figure_size(FigureKind::grid_step, model.ring, model.ranks);
  // Not model.grid_of: its const overload falls back to the forward grid when the pass is absent.
  const auto found =
      std::find_if(model.grids.begin(), model.grids.end(), [&](const BlockGrid& g) { return g.pass == pass; });
  if (found == model.grids.end()) throw UsageError("--pass backward needs a plan with a backward pass; add --backward");
  const BlockGrid* grid = &*found;
  if (colouring == GridColouring::error) throw std::logic_error("grid_figure: a figure has no run to colour by error");
  const int64_t N = grid->blocks;
  const double cell = std::clamp(std::floor(480.0 / static_cast<double>(N)), 8.0, 120.0);
  const double side = cell * static_cast<double>(N);
  // The canvas grid_geometry lays the viewer's matrix into, placed so the matrix starts at (kMatrixLeft, kMatrixTop).
  const Rect canvas{static_cast<float>(kMatrixLeft - GridGeometry::kMargin),
                    static_cast<float>(kMatrixTop - GridGeometry::kMargin), static_cast<float>(kMatrixLeft + side + 8),
                    static_cast<float>(kMatrixTop + side + 8)};
  const GridGeometry g = grid_geometry(canvas, N);

  Figure figure;
  figure.title = std::string(colouring == GridColouring::rank ? "blocks by rank" : "blocks by step") + " (" +
                 (pass == Pass::forward ? "forward" : "backward") + "): " + model.title;
  figure.texts.push_back({kMatrixLeft, 22, figure.title, 13});
  draw_axes(figure, g);
  for (const DocumentStrip& strip : document_strips(model, g))  // tokens coloured by document
    figure.rects.push_back({strip.rect.x0,
                            strip.rect.y0,
                            strip.rect.width(),
                            strip.rect.height(),
                            strip.colour,
                            false,
                            "document",
                            {{"document", std::to_string(strip.document)}},
                            ""});
  for (const GridCell& c : grid->cells)
    draw_cell(figure, model, *grid, c, g.cell_rect(c.q_block, c.kv_block), colouring);

  const double legend_x = kMatrixLeft + side + 24;
  double legend_y = draw_colour_legend(figure, model, *grid, colouring, legend_x, kMatrixTop);
  legend_y = draw_state_legend(figure, model, *grid, legend_x, legend_y);
  figure.width = legend_x + 160;
  figure.height = std::max(kMatrixTop + side + 30, legend_y + 20);
  fit_canvas_to_text(figure);
  return figure;
}

}  // namespace ringlab::viz
