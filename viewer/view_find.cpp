// The find panel: the matches of the query typed in the toolbar (highlighted on the timeline),
// listed with rank, lane and time; clicking one selects it and brings its iteration into view.
#include <imgui.h>

#include "viewer/app.h"
#include "viewer/lod.h"

namespace dpscope::view {

void draw_find(App& app) {
  const Model& model = *app.traces[0].model;
  if (app.find.empty()) {
    ImGui::TextWrapped("Type in the find box above: a name (forward, verify_model), an op (allreduce, "
                       "reduce_scatter), a unit state (gathering), or kind:hook / kind:collective.");
    return;
  }
  ImGui::Text("'%s': %lld matches%s", app.find.text().c_str(), static_cast<long long>(app.find_result.total),
              app.find_result.total > int64_t(app.find_result.first.size()) ? " (the earliest listed, in time order)" : ", in time order");
  if (!ImGui::BeginTable("found", 4, ImGuiTableFlags_RowBg | ImGuiTableFlags_ScrollY | ImGuiTableFlags_SizingStretchProp)) return;
  for (const char* h : {"name", "rank / lane", "at", "duration"}) ImGui::TableSetupColumn(h);
  table_headers(app, true);
  ImGuiListClipper clipper;
  clipper.Begin(int(app.find_result.first.size()));
  while (clipper.Step()) {
    for (int i = clipper.DisplayStart; i < clipper.DisplayEnd; ++i) {
      const SpanRef& ref = app.find_result.first[size_t(i)];
      const Span& s = span_of(model, ref);
      const RankData& rank = model.ranks[size_t(ref.rank)];
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      ImGui::PushID(i);
      const bool selected = app.selected.trace == 0 && app.selected.span == ref;
      if (ImGui::Selectable(span_label(model, s).c_str(), selected, ImGuiSelectableFlags_SpanAllColumns)) {
        app.selected = {0, ref};
        app.focus_trace = 0;
        app.focus_rank = ref.rank;
        // Its iteration in view (Note [Following the narrated iteration]); outside one, the span.
        if (!app.move_playhead(s.begin_ns + app.traces[0].offset_ns)) {
          const double width = std::max(app.view_t1 - app.view_t0, 4.0 * double(s.end_ns - s.begin_ns));
          const double mid = (double(s.begin_ns) + double(s.end_ns)) / 2;
          app.set_view(mid - width / 2, mid + width / 2);
        }
      }
      ImGui::PopID();
      ImGui::TableNextColumn();
      ImGui::Text("%d / %s", rank.info.rank, lane_label(rank, size_t(ref.lane)).c_str());
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(format_duration(double(s.begin_ns - model.t_begin)).c_str());
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(format_duration(double(s.end_ns - s.begin_ns)).c_str());
    }
  }
  ImGui::EndTable();
}

}  // namespace dpscope::view
