// The units panel (FSDP and FSDP2): for one rank, each unit's state over the visible time range
// (sharded, gathering, full, reducing), drawn from the unit lanes with the timeline's folding, the
// state at the playhead, and the units table (a flat parameter's or a parameter group's sizes and
// this rank's shard).
#include <imgui.h>

#include <algorithm>

#include "viewer/app.h"
#include "viewer/lod.h"
#include "viewer/palette.h"

namespace dpscope::view {

namespace {

// Each unit's sizes and `rank`'s shard of it: [begin, end) in the padded flat parameter (FSDP), or
// in the group's all-gather buffer (FSDP2), and how many of its elements are parameters.
void draw_unit_sizes_table(App& app, const Model& model, int32_t rank) {
  if (!model.units.empty() && ImGui::BeginTable("units", 5, ImGuiTableFlags_RowBg | ImGuiTableFlags_SizingStretchProp)) {
    for (const char* h : {"unit", "name", "numel", "padded", "this rank's shard"}) ImGui::TableSetupColumn(h);
    table_headers(app);
    for (const auto& u : model.units) {
      ImGui::TableNextRow();
      ImGui::TableNextColumn(); ImGui::Text("%d", u.index);
      ImGui::TableNextColumn(); ImGui::TextUnformatted(u.name.empty() ? "root" : u.name.c_str());
      // A unit read from a profiler's records has no sizes (Note [FSDP2's units from PyTorch's
      // records]): unknown, not 0.
      if (u.numel == 0 && u.padded_numel == 0) {
        ImGui::TableNextColumn(); ImGui::TextDisabled("?");
        ImGui::TableNextColumn(); ImGui::TextDisabled("?");
      } else {
        ImGui::TableNextColumn(); ImGui::Text("%lld", static_cast<long long>(u.numel));
        ImGui::TableNextColumn(); ImGui::Text("%lld", static_cast<long long>(u.padded_numel));
      }
      ImGui::TableNextColumn();
      for (const auto& s : model.unit_shards) {
        if (s.unit == u.index && s.rank == rank) {
          ImGui::Text("[%lld, %lld) %lld real", static_cast<long long>(s.shard_begin),
                      static_cast<long long>(s.shard_end), static_cast<long long>(s.real_numel));
        }
      }
    }
    ImGui::EndTable();
  }
}

}  // namespace

void draw_units(App& app) {
  OpenTrace& t = app.focused_trace();
  const Model& model = *t.model;
  if (model.ranks.empty()) return;
  app.focus_rank = std::clamp(app.focus_rank, 0, int(model.ranks.size()) - 1);
  const RankData& rank = model.ranks[size_t(app.focus_rank)];
  std::vector<const Lane*> lanes;
  for (const Lane& lane : rank.lanes) {
    if (lane.info.kind == trace::LaneKind::Unit && !lane.spans.empty()) lanes.push_back(&lane);
  }
  if (lanes.empty() && model.units.empty()) {
    ImGui::TextWrapped("No FSDP units in this trace (a DDP run shows its buckets in the Buckets tab).");
    return;
  }
  if (model.strategy() == trace::Strategy::Fsdp2) {
    ImGui::TextWrapped("FSDP2: each unit is a fully_shard parameter group; a rank's shard is its part "
                       "of the group's all-gather buffer, each parameter's dim-0 chunk padded.");
  }
  ImGui::SetNextItemWidth(90);
  ImGui::SliderInt("rank", &app.focus_rank, 0, int(model.ranks.size()) - 1);
  ImGui::SameLine();
  color_entry(unit_state_color(std::nullopt), "sharded");
  for (int s = 0; s < trace::kUnitStateCount; ++s) {
    const auto state = static_cast<trace::UnitState>(s);
    ImGui::SameLine();
    color_entry(unit_state_color(state), std::string(trace::to_string(state)).c_str());
  }
  const int64_t playhead = app.playhead - t.offset_ns;
  const float label_w = 150;
  const float width = std::max(40.0f, ImGui::GetContentRegionAvail().x - label_w - 90);
  const TimeMap map{app.view_t0 - double(t.offset_ns), app.view_t1 - double(t.offset_ns), 0, width};
  ImDrawList* draw = ImGui::GetWindowDrawList();
  std::vector<DrawItem> items;
  for (const Lane* lane : lanes) {
    const ImVec2 p = ImGui::GetCursorScreenPos();
    TimeMap m = map;
    m.x0 = p.x + label_w;
    draw->AddRectFilled(ImVec2(m.x0, p.y), ImVec2(m.x0 + width, p.y + 14), unit_state_color(std::nullopt));
    // A click on the strip: the playhead to that moment, its iteration kept in view (Note
    // [Following the narrated iteration]).
    if (ImGui::IsWindowHovered() && ImGui::IsMouseClicked(ImGuiMouseButton_Left) &&
        ImGui::IsMouseHoveringRect(ImVec2(float(m.x0), p.y), ImVec2(float(m.x0) + width, p.y + 14))) {
      app.move_playhead(int64_t(m.t(ImGui::GetIO().MousePos.x)) + t.offset_ns);
    }
    const char* now = "sharded";
    for (int row = 0; row < lane->rows(); ++row) {
      items.clear();
      fold_row(*lane, row, m, 2, items);
      for (const DrawItem& item : items) {
        const Span& s = lane->spans[item.first];
        const float x0 = std::max(item.x0, float(m.x0));
        const float x1 = std::min(std::max(item.x1, item.x0 + 1), float(m.x0) + width);
        if (x1 > x0) {
          draw->AddRectFilled(ImVec2(x0, p.y), ImVec2(x1, p.y + 14), item.count > 1 ? kFoldColor : unit_state_color(s.state()));
        }
      }
      // The state just after the playhead: on a step where one state ends and the next begins
      // (gathered -> full), the panel says what the narration line says, the new one.
      const int64_t hit = span_at(*lane, row, playhead + 1, 0);
      if (hit < 0) continue;
      if (const auto state = lane->spans[size_t(hit)].state()) now = trace::to_string(*state).data();
    }
    const float px = float(m.x(double(playhead)));
    if (px >= m.x0 && px <= m.x0 + width) draw->AddLine(ImVec2(px, p.y), ImVec2(px, p.y + 14), kPlayheadColor, 2);
    ImGui::TextUnformatted(lane->info.name.c_str());
    ImGui::SameLine(label_w + width + 16);
    ImGui::TextUnformatted(now);
  }
  draw_unit_sizes_table(app, model, rank.info.rank);
}

}  // namespace dpscope::view
