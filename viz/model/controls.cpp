#include "viz/model/controls.hpp"

#include <algorithm>
#include <cmath>

#include "reference/error.hpp"
#include "reference/names.hpp"
#include "sim/cost/hardware.hpp"
#include "sim/pipeline/config.hpp"

namespace ringlab::viz {

// ---- playback --------------------------------------------------------------------------------

void Playback::set_steps(int64_t count) {
  steps = std::max<int64_t>(1, count);
  position = std::clamp(position, 0.0, last());
  if (position >= last()) playing = false;
}

void Playback::advance(double seconds) {
  if (!playing || seconds <= 0) return;
  position += seconds * speed;
  if (position >= last()) {
    position = last();
    playing = false;
  }
}

void Playback::toggle() {
  if (!playing && position >= last()) position = 0;
  playing = !playing && steps > 1;
}

void Playback::step_forward() {
  playing = false;
  position = std::min(last(), std::floor(position) + 1);
}

void Playback::step_back() {
  playing = false;
  const double whole = std::floor(position);
  position = std::max(0.0, position > whole ? whole : whole - 1);
}

void Playback::scrub(double to) { position = std::clamp(to, 0.0, last()); }

void Playback::reset() {
  position = 0;
  playing = false;
}

// ---- schedule controls -----------------------------------------------------------------------

PlanSpec ScheduleControls::spec() const {
  PlanSpec s;
  s.algo = parse_algorithm(kAlgorithmNames[static_cast<size_t>(std::clamp(algo, 0, 3))]);
  s.layout = parse_layout(kLayoutNames[static_cast<size_t>(std::clamp(layout, 0, 3))]);
  s.block = block;
  s.ranks = ranks;
  s.ulysses = s.algo == Algorithm::hybrid ? ulysses : 1;
  s.dims.batch = batch;
  s.dims.seq = seq;
  s.dims.heads = heads;
  s.dims.kv_heads = kv_heads > 0 ? kv_heads : heads;
  s.dims.dim = dim;
  s.causal = causal;
  s.window = window;
  s.documents = documents;
  s.skip = skip;
  s.full_ring = full_ring;
  s.backward = backward;
  s.erratum = parse_erratum(kErratumNames[static_cast<size_t>(std::clamp(erratum, 0, 2))]);
  // An S (or a document) that does not fit the layout is padded, as ringlab run does.
  pad_to_layout(s);
  pad_heads(s);  // and heads that do not divide over U, as plan_spec does
  return s;
}

ScheduleControls ScheduleControls::from_spec(const PlanSpec& s) {
  ScheduleControls c;
  c.algo = static_cast<int>(s.algo);
  c.layout = static_cast<int>(s.layout);
  c.block = static_cast<int>(s.block);
  c.ranks = static_cast<int>(s.ranks);
  c.ulysses = s.algo == Algorithm::hybrid ? static_cast<int>(s.ulysses) : 2;
  c.batch = static_cast<int>(s.dims.batch);
  c.seq = static_cast<int>(s.tokens());
  // The user's heads, without the padding heads spec() adds back (shown padded, the controls
  // planned another problem: H = 8 instead of ringlab plan's H = 6 with 2 padding heads).
  const AttentionDims real = s.real_dims();
  const int64_t heads = real.heads, kv_heads = real.kv_heads;
  c.heads = static_cast<int>(heads);
  c.kv_heads = kv_heads == heads ? 0 : static_cast<int>(kv_heads);
  c.dim = static_cast<int>(s.dims.dim);
  c.causal = s.causal;
  c.window = static_cast<int>(s.window);
  c.documents = s.documents;
  c.skip = s.skip;
  c.full_ring = s.full_ring;
  c.backward = s.backward;
  c.erratum = static_cast<int>(s.erratum);
  return c;
}

std::vector<std::string> hardware_choices(const std::string& current) {
  std::vector<std::string> choices = hardware_preset_names();
  if (std::find(choices.begin(), choices.end(), current) == choices.end()) choices.push_back(current);
  return choices;
}

// ---- grid colouring --------------------------------------------------------------------------

namespace {

constexpr const char* kColouringNames[] = {"step", "rank", "error"};
constexpr const char* kPanelNames[] = {"ring", "grid", "load", "timeline", "controls", "messages"};

}  // namespace

const char* colouring_name(GridColouring colouring) { return name_of(kColouringNames, colouring); }

GridColouring parse_colouring(const std::string& name) {
  return parse_named<GridColouring>(kColouringNames, name, "grid colouring", "--colour");
}

Rgba cell_colour(const ScheduleModel& model, const GridCell& cell, GridColouring colouring, int64_t current_step) {
  if (!cell.planned) return model.source == SourceKind::trace ? palette::not_traced : palette::skipped;
  if (cell.shape == BlockShape::skipped) return palette::skipped;
  Rgba colour{};
  switch (colouring) {
    case GridColouring::step: {
      const int64_t phase_steps =
          cell.step >= 0 ? model.phases[static_cast<size_t>(model.steps[static_cast<size_t>(cell.step)].phase)].steps
                         : 1;
      colour = step_colour(cell.phase_step, phase_steps);
      break;
    }
    case GridColouring::rank: colour = category_colour(cell.ranks.empty() ? -1 : cell.ranks.front()); break;
    case GridColouring::error:
      switch (cell.cause) {
        case ErrorCause::misrouted_gradient: colour = palette::error_misrouted; break;
        case ErrorCause::wrong_result: colour = error_colour(std::max(2.0, cell.tolerance_used)); break;
        case ErrorCause::wrong_mask: colour = palette::error_wrong; break;
        case ErrorCause::none: colour = cell.measured ? palette::error_ok : palette::error_unknown; break;
      }
      break;
  }
  if (cell.shape == BlockShape::masked && colouring != GridColouring::error) colour = palette::masked_computed;
  return cell.step > current_step ? dimmed(colour) : colour;
}

Rgba block_result_colour(const BlockResult& result, bool keys) {
  return (keys ? result.key_ok : result.query_ok) ? palette::error_ok : palette::error_wrong;
}

std::vector<LegendSwatch> error_legend() {
  return {{SwatchShape::fill, palette::error_ok, "right"},
          {SwatchShape::fill, palette::error_unknown, "not measured (Run)"},
          {SwatchShape::fill, error_colour(2.0), "wrong, near tolerance"},
          {SwatchShape::fill, palette::error_wrong, "wrong, 10^4x it or wrong mask"},
          {SwatchShape::fill, palette::error_misrouted, "misrouted dK/dV (right, wrong block)"},
          {SwatchShape::fill, dimmed(palette::error_misrouted), "faded: after this step"},
          {SwatchShape::fill, palette::skipped, "skipped"},
          {SwatchShape::corner, palette::error_wrong, "wrong block"},
          {SwatchShape::outline, palette::highlight, "this step"},
          {SwatchShape::outline, palette::error_wrong, "error enters"},
          {SwatchShape::strip, palette::error_ok, "final result (left: out/dq, top: dK/dV)"},
          {SwatchShape::strip, palette::error_wrong, "wrong"}};
}

// ---- panels and help -------------------------------------------------------------------------

const char* panel_name(Panel panel) { return name_of(kPanelNames, panel); }

Panel parse_panel(const std::string& name) {
  if (const std::optional<Panel> panel = find_named<Panel>(kPanelNames, name)) return *panel;
  throw UsageError("unknown panel '" + name + "'; use --panel grid, ring, load, timeline, controls, messages or all");
}

HelpTopic help_topic(Panel panel) {
  switch (panel) {
    case Panel::ring:
      return {"book/ring-attention.md",
              "Ranks sit on a ring. Each keeps its queries; the K/V blocks (one colour per origin block) move one "
              "hop per step while the rank computes on the block it holds. In the backward pass the dK/dV "
              "accumulators travel too (outlined diamonds). Ulysses all-to-all and all-gather phases are drawn as "
              "their collectives: see book/ulysses-hybrid.md."};
    case Panel::grid:
      return {"book/causal-balance.md",
              "The attention matrix in blocks: rows are query blocks, columns key blocks (ring positions). Each "
              "cell is computed by one rank at one step, or skipped when the causal mask hides it entirely. "
              "Colour by step, rank or error (with a legend of its colours and marks); the current step's cells "
              "are outlined in yellow. Zig-zag layouts turn "
              "diagonal blocks into half blocks, which is what balances the causal work."};
    case Panel::load:
      return {"book/causal-balance.md",
              "Work per rank: FLOPs of the visible pairs, time computing (busy) and waiting (blocked). max/mean "
              "is the load imbalance: the slowest rank sets the wall-clock time, so a causal schedule with the "
              "contiguous layout saves work but little time. The line below it gives the same problem's "
              "max/mean FLOPs under every layout (the chosen one marked >; n/a where a layout cannot split "
              "the sequence, or cuts it too finely to weigh on every re-plan: hover for why)."};
    case Panel::timeline:
      return {"book/cost-model.md",
              "Per rank, a compute row and a communication row over time: measured for traces and runs; for a "
              "plan, the cost model's prediction for the hardware chosen in Controls (or --hw): the same "
              "simulated timeline as ringlab run --dry-run --hw. Scroll to zoom, drag to pan; the vertical "
              "line follows the mouse across all rows."};
    case Panel::controls:
      return {"book/ring-attention.md",
              "The schedule's parameters, as ringlab plan takes them, and the hardware the timeline is predicted "
              "for; any change re-plans at once. Run executes "
              "the schedule on the simulator at small sizes and measures each block's error. Keys: Space "
              "play/pause, Left/Right step, R restart."};
    case Panel::messages:
      return {"book/backward.md",
              "What went wrong and where: trace and plan errors, the plan checker's findings, the run's "
              "verification, and the step at which a wrong result enters (the reverse-dkv erratum adds dK/dV "
              "into the wrong block's accumulator from step 1 of the backward ring when P >= 3)."};
    case Panel::count: break;
  }
  return {"book/ring-attention.md", ""};
}

}  // namespace ringlab::viz
