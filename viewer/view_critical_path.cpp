// The critical path over the timeline (K): the App asks for the narrated iteration's path
// (critical_path_overlay.h) and each trace panel draws it over its lanes, a band under each
// piece's lane joined where the path passes from lane to lane, with its length and keys in the
// lanes' top right corner (docs/critical-path.md, docs/viewer.md).
#include <imgui.h>

#include <cmath>
#include <cstdio>

#include "trace/vocabulary.h"
#include "viewer/app.h"
#include "viewer/lod.h"
#include "viewer/palette.h"

namespace dpscope::view {

void App::update_critical_path() {
  critical_path.poll();
  if (!critical_path.shown()) return;
  const int trace = std::clamp(focus_trace, 0, int(traces.size()) - 1);
  const OpenTrace& t = traces[size_t(trace)];
  const bool imported = !t.model->meta_value(trace::meta_key::kImportedFrom).empty();
  critical_path.want(t.model->path, imported, trace, iteration_at_playhead(trace), clock_,
                     t.cluster ? t.cluster->run : nullptr);
}

namespace {

// The path's segments on the lanes drawn; returns how many lie on lanes not drawn (folded lanes,
// U; folded ranks, a click on the header; compare folds every rank but rank 0 to keep its text).
int draw_segments(App& app, const analysis::CriticalPath& path, int trace, const TimeMap& map, float right, float top,
                  const std::function<bool(int, int, float&, float&)>& lane_row) {
  const OpenTrace& t = app.traces[size_t(trace)];
  const Model& model = *t.model;
  // Segments name ranks and trace lanes; the panel draws rank and lane indices. Each drawn lane's
  // first row, looked up once a frame, not once a segment.
  std::map<std::pair<int32_t, trace::LaneId>, std::pair<float, float>> where;
  for (size_t r = 0; r < model.ranks.size(); ++r) {
    for (size_t l = 0; l < model.ranks[r].lanes.size(); ++l) {
      float y0 = 0, y1 = 0;
      if (lane_row(int(r), int(l), y0, y1)) where[{model.ranks[r].info.rank, model.ranks[r].lanes[l].info.lane}] = {y0, y1};
    }
  }
  ImDrawList* draw = ImGui::GetWindowDrawList();
  draw->PushClipRect(ImVec2(float(map.x0), top), ImVec2(right, top + 1e6f), true);
  const float thickness = std::max(3.0f, std::round(ImGui::GetFontSize() / 4));
  ImVec2 previous_end(NAN, NAN);
  int hidden = 0;
  for (const analysis::PathSegment& s : path.segments) {
    const auto found = where.find({s.rank, s.lane});
    if (found == where.end()) {
      ++hidden;
      previous_end = ImVec2(NAN, NAN);
      continue;
    }
    const auto [y0, y1] = found->second;
    const float x0 = float(map.x(double(s.begin_ns + t.offset_ns)));
    const float x1 = std::max(x0 + 1, float(map.x(double(s.end_ns + t.offset_ns))));
    const float y = y1 - thickness / 2;
    // A path of thousands of pieces (an imported step's operators): only those in view are drawn.
    if (x1 < map.x0 || x0 > right) {
      previous_end = ImVec2(x1, y);
      continue;
    }
    draw->AddRectFilled(ImVec2(x0, y0), ImVec2(x1, y1), (theme().critical_path & 0x00ffffff) | 0x30000000);
    ++app.layout.critical_path_segments_drawn;
    draw->AddLine(ImVec2(x0, y), ImVec2(x1, y), theme().critical_path, thickness);
    if (!std::isnan(previous_end.x) && std::abs(previous_end.y - y) > 0.5f) {
      draw->AddLine(previous_end, ImVec2(x0, y), theme().critical_path, std::max(1.0f, thickness / 2));
    }
    previous_end = ImVec2(x1, y);
  }
  draw->PopClipRect();
  return hidden;
}

// The path's line in the lanes' top right corner, where a rank's header has no text.
void draw_label(const std::string& text, ImU32 color, const TimeMap& map, float right, float top) {
  ImDrawList* draw = ImGui::GetWindowDrawList();
  const ImVec2 size = ImGui::CalcTextSize(text.c_str());
  const ImVec2 at(std::max(float(map.x0) + 4, right - size.x - 8), top + 2);
  draw->AddRectFilled(ImVec2(at.x - 2, at.y - 1), ImVec2(at.x + size.x + 2, at.y + size.y + 1), theme().background);
  draw->AddText(at, color, text.c_str());
}

}  // namespace

void draw_critical_path(App& app, int trace, const TimeMap& map, float right, float top,
                        const std::function<bool(int, int, float&, float&)>& lane_row) {
  if (!app.critical_path.shown()) return;
  const bool focused = trace == std::clamp(app.focus_trace, 0, int(app.traces.size()) - 1);
  const PathOverlay* overlay = app.critical_path.current();
  if (!overlay) {
    if (focused) draw_label("critical path: computing... (K hides it)", theme().dim_text, map, right, top);
    return;
  }
  const bool drawn_here = overlay->path && overlay->trace == trace && overlay->clock == app.clock();
  const int hidden = drawn_here ? draw_segments(app, *overlay->path, trace, map, right, top, lane_row) : 0;
  if (!focused) return;
  std::string text = path_overlay_text(*overlay);
  if (hidden > 0) text += "; part of it on folded lanes (U) or ranks (click the rank's header)";
  // At a projector's text size the whole line would cover the rank's header: its length alone
  // (the keys are in `dpscope stats --critical-path`).
  const float room = (right - float(map.x0)) * 0.7f;
  if (overlay->path && ImGui::CalcTextSize(text.c_str()).x > room) {
    char brief[96];
    std::snprintf(brief, sizeof(brief), "critical path %.3f ms%s (K)", double(overlay->path->length_ns) / 1e6,
                  hidden > 0 ? ", part folded" : "");
    text = brief;
  }
  draw_label(text, overlay->path ? theme().critical_path : theme().dim_text, map, right, top);
}

}  // namespace dpscope::view
