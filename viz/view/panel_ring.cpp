#include <algorithm>
#include <cmath>
#include <numbers>

#include "viz/view/draw_util.hpp"
#include "viz/view/panels.hpp"

namespace ringlab::viz {

namespace {

// A rank's disc: filled with the colour of the K/V block it computes with at this step; after an
// all-gather a thin rim of every block's colour says it holds them all.
void draw_node(ImDrawList* list, const ScheduleModel& model, const RingGeometry& ring, int64_t rank,
               const RankStep& held) {
  const Vec2 c = ring.node(rank, model.ring, model.ulysses);
  const float r = ring.node_radius;
  const int64_t block = held.kv_block == kAllBlocks ? held.computed : held.kv_block;
  if (held.kv_block == kAllBlocks) {
    for (int64_t g = 0; g < model.ring; ++g) {
      constexpr float pi = std::numbers::pi_v<float>;
      const float a0 = 2 * pi * static_cast<float>(g) / static_cast<float>(model.ring) - pi / 2;
      const float a1 = a0 + 2 * pi / static_cast<float>(model.ring);
      list->PathArcTo(to_imgui(c), r + 3, a0, a1, 8);
      list->PathStroke(to_imgui(category_colour(g)), 0, 3);
    }
  }
  list->AddCircleFilled(to_imgui(c), r, to_imgui(block >= 0 ? category_colour(block) : palette::error_unknown), 32);
  if (held.computed >= 0 && held.shape != BlockShape::skipped)
    list->AddCircle(to_imgui(c), r + 1, to_imgui(palette::highlight), 32, 2);
  if (held.dkv_block >= 0) {  // the dK/dV accumulator it adds into: a small square, outlined
    const float s = r * 0.35f;
    list->AddRectFilled({c.x - s, c.y - s}, {c.x + s, c.y + s}, to_imgui(category_colour(held.dkv_block)));
    list->AddRect({c.x - s, c.y - s}, {c.x + s, c.y + s}, to_imgui(palette::text), 0, 0, 1.5f);
  }
  // The label sits outside the circle, so the disc's centre keeps its block colour; on crowded
  // rings only every few ranks are labelled.
  const int64_t every = std::max<int64_t>(1, model.ranks / 16);
  if (rank % every != 0) return;
  const Vec2 unit = ring_node(rank, model.ring, model.ulysses);
  const std::string label = "r" + std::to_string(rank);
  const ImVec2 size = ImGui::CalcTextSize(label.c_str());
  const Vec2 at{c.x + unit.x * (r + 12) - size.x / 2, c.y + unit.y * (r + 12) - size.y / 2};
  text_at(list, at, palette::text, label);
}

// An arrowhead halfway along the arc from one node to the next, pointing the way it travels.
void draw_direction_arrow(ImDrawList* list, const ScheduleModel& model, const RingGeometry& ring, int64_t from,
                          int64_t to, float lift, Rgba colour) {
  const Vec2 a = ring.to_canvas(ring_arc_point(from, to, 0.42f, model.ring, model.ulysses, lift));
  const Vec2 b = ring.to_canvas(ring_arc_point(from, to, 0.58f, model.ring, model.ulysses, lift));
  const float dx = b.x - a.x, dy = b.y - a.y, length = std::max(1e-3f, std::hypot(dx, dy));
  const float ux = dx / length, uy = dy / length, s = 6;
  const Vec2 tip{(a.x + b.x) / 2 + ux * s, (a.y + b.y) / 2 + uy * s};
  list->AddTriangleFilled({tip.x, tip.y}, {tip.x - ux * 2 * s - uy * s, tip.y - uy * 2 * s + ux * s},
                          {tip.x - ux * 2 * s + uy * s, tip.y - uy * 2 * s - ux * s}, to_imgui(colour, 170));
}

// Where K/V and dK/dV go this step, and the hops a full ring would make that this plan skips.
void draw_directions_and_skips(ImDrawList* list, const ScheduleModel& model, const RingGeometry& ring, int64_t step) {
  const int64_t R = model.ring, U = std::max<int64_t>(1, model.ulysses);
  if (R < 2) return;
  // K/V arrows on the circle, dK/dV arrows inside it (the blocks in flight travel outside).
  for (const auto& [payload, lift] : {std::pair{Payload::kv, 0.0f}, std::pair{Payload::dkv, -0.16f}}) {
    const int direction = ring_direction(model, step, payload);
    if (direction == 0) continue;
    for (int64_t g = 0; g < R; ++g) {
      const int64_t to = ((g + direction) % R + R) % R;
      draw_direction_arrow(list, model, ring, g * U, to * U, lift,
                           payload == Payload::kv ? palette::send_span : palette::wait_span);
    }
  }
  for (const Hop& hop : skipped_hops(model, step)) {  // dotted, with a cross halfway
    for (int i = 0; i <= 10; ++i) {
      const Vec2 p = ring.to_canvas(
          ring_arc_point(hop.from, hop.to, static_cast<float>(i) / 10, model.ring, model.ulysses, 0.16f));
      list->AddCircleFilled({p.x, p.y}, 1.5f, to_imgui(palette::text_dim));
    }
    const Vec2 m = ring.to_canvas(ring_arc_point(hop.from, hop.to, 0.5f, model.ring, model.ulysses, 0.16f));
    list->AddLine({m.x - 4, m.y - 4}, {m.x + 4, m.y + 4}, to_imgui(palette::error_unknown), 2);
    list->AddLine({m.x - 4, m.y + 4}, {m.x + 4, m.y - 4}, to_imgui(palette::error_unknown), 2);
  }
}

}  // namespace

void draw_ring_panel(const ScheduleModel& model, const Playback& playback, ViewState& view) {
  const int64_t step = std::clamp<int64_t>(playback.step(), 0, std::max<int64_t>(0, model.step_count() - 1));
  help_marker(Panel::ring);
  ImGui::SameLine();
  ImGui::TextUnformatted(model.step_label(step).c_str());
  const std::string directions = ring_direction_text(model, step), hops = kv_hop_text(model, step);
  if (!directions.empty() || !hops.empty()) {
    const std::string line = directions + (directions.empty() || hops.empty() ? "" : "; ") + hops;
    ImGui::TextDisabled("%s", line.c_str());
  }
  const Rect canvas = begin_canvas(view, Panel::ring, "##ring");
  const bool hovered = ImGui::IsItemHovered();
  ImDrawList* list = ImGui::GetWindowDrawList();
  list->PushClipRect({canvas.x0, canvas.y0}, {canvas.x1, canvas.y1}, true);
  const RingGeometry ring = ring_geometry(canvas, model.ranks);
  list->AddCircle(to_imgui(ring.centre), ring.radius, to_imgui(palette::grid_line), 96, 2);

  // Collectives of this step: lines between the members of each group, pulsing with the step.
  const float fraction = playback.fraction();
  const std::vector<const CollectiveView*> collectives = model.collectives_at(step);
  for (const CollectiveView* c : collectives) {
    const uint8_t alpha = static_cast<uint8_t>(120 + 100 * std::sin(std::numbers::pi_v<float> * fraction));
    for (size_t i = 0; i < c->members.size(); ++i)
      for (size_t j = i + 1; j < c->members.size(); ++j)
        list->AddLine(to_imgui(ring.node(c->members[i], model.ring, model.ulysses)),
                      to_imgui(ring.node(c->members[j], model.ring, model.ulysses)),
                      to_imgui(palette::collective_span, alpha), 2);
  }

  if (step < model.step_count()) {
    for (int64_t r = 0; r < model.ranks; ++r)
      draw_node(list, model, ring, r, model.rank_steps[static_cast<size_t>(r)][static_cast<size_t>(step)]);
  }

  draw_directions_and_skips(list, model, ring, step);

  // Blocks in flight: K/V as filled squares just outside the ring, dK/dV accumulators as
  // outlined diamonds further out, each in its origin block's colour.
  const float box = std::max(4.0f, ring.node_radius * 0.55f);
  for (const Transfer* t : model.transfers_at(step)) {
    const bool kv = t->payload == Payload::kv;
    const Vec2 p =
        ring.to_canvas(ring_arc_point(t->from, t->to, fraction, model.ring, model.ulysses, kv ? 0.16f : 0.32f));
    const ImU32 colour = to_imgui(t->origin >= 0 ? category_colour(t->origin) : palette::error_unknown);
    if (kv) {
      list->AddRectFilled({p.x - box, p.y - box}, {p.x + box, p.y + box}, colour);
      list->AddRect({p.x - box, p.y - box}, {p.x + box, p.y + box}, to_imgui(palette::background), 0, 0, 1);
    } else {
      const ImVec2 a{p.x, p.y - box * 1.3f}, b{p.x + box * 1.3f, p.y}, c{p.x, p.y + box * 1.3f},
          d{p.x - box * 1.3f, p.y};
      list->AddQuadFilled(a, b, c, d, to_imgui(palette::background));
      list->AddQuad(a, b, c, d, colour, 2.5f);
    }
  }
  if (!collectives.empty()) {
    const std::string name = collectives.front()->name +
                             (collectives.size() > 1 ? " (" + std::to_string(collectives.size()) + " groups)" : "");
    const ImVec2 size = ImGui::CalcTextSize(name.c_str());
    text_at(list, {ring.centre.x - size.x / 2, ring.centre.y - size.y / 2}, palette::text, name);
  }
  list->PopClipRect();

  // Hover: which rank, and what it does at this step.
  view.rank_hover = -1;
  if (hovered && step < model.step_count()) {
    const Vec2 mouse = from_imgui(ImGui::GetIO().MousePos);
    for (int64_t r = 0; r < model.ranks; ++r) {
      const Vec2 c = ring.node(r, model.ring, model.ulysses);
      if (std::hypot(mouse.x - c.x, mouse.y - c.y) <= ring.node_radius + 2) view.rank_hover = r;
    }
    if (view.rank_hover >= 0) {
      const RankStep& held = model.rank_steps[static_cast<size_t>(view.rank_hover)][static_cast<size_t>(step)];
      ImGui::BeginTooltip();
      ImGui::Text("rank %lld (ring position %lld)", static_cast<long long>(view.rank_hover),
                  static_cast<long long>(view.rank_hover / std::max<int64_t>(1, model.ulysses)));
      if (held.kv_block == kAllBlocks)
        ImGui::TextUnformatted("holds every block's K/V (all-gather)");
      else if (held.kv_block >= 0)
        ImGui::Text("holds the K/V of block %lld", static_cast<long long>(held.kv_block));
      if (held.computed >= 0)
        ImGui::Text("computes with block %lld: %s, %.3g FLOP", static_cast<long long>(held.computed),
                    block_shape_name(held.shape), held.flops);
      if (held.dkv_block >= 0)
        ImGui::Text("adds into the dK/dV accumulator of block %lld", static_cast<long long>(held.dkv_block));
      ImGui::EndTooltip();
    }
  }
}

}  // namespace ringlab::viz
