// The hang over the timeline (draw_hang in app.h, docs/hangs.md): pending collectives open-ended and labelled, and
// the culprit's lane marked.
#include <algorithm>
#include <cstdio>

#include <imgui.h>
#include "viewer/app.h"
#include "viewer/palette.h"

namespace dpscope::view {
int draw_hang(const App& app, int trace, const TimeMap& map, float right,
              const std::function<bool(int rank, int lane, float& y0, float& y1)>& lane_row) {
  const OpenTrace& t = app.traces[size_t(trace)];
  if (!t.analysis || !t.analysis->hang || t.shown != analysis::Clock::Measured) return 0;
  const analysis::HangReport& hang = *t.analysis->hang;
  const Model& model = *t.model;
  const double offset = double(t.offset_ns);
  const ImU32 color = theme().error_text;
  ImDrawList* draw = ImGui::GetWindowDrawList();
  int drawn = 0;
  for (const analysis::HangGroup& g : hang.groups) {
    for (const analysis::HangRank& r : g.ranks) {
      for (const analysis::HangCollective& c : r.pending) {
        const CollectiveSpans* spans = t.analysis->match(static_cast<int32_t>(c.seq));
        if (!spans) continue;
        for (const SpanRef& ref : spans->spans) {
          if (ref.rank != c.rank || ref.lane != c.lane) continue;
          const Span& s = span_of(model, ref);
          float y0 = 0, y1 = 0;
          if (!lane_row(ref.rank, ref.lane, y0, y1)) continue;
          const float x0 = std::max(float(map.x0), float(map.x(double(s.begin_ns) + offset)));
          const float x1 = std::min(right, float(map.x(double(s.end_ns) + offset)));
          if (x1 < float(map.x0) || x0 > right) continue;
          draw->AddRect(ImVec2(x0, y0), ImVec2(std::max(x1, x0 + 2), y1), color, 0.0f, 0, 2.0f);
          const std::string label = std::string("never completed (") + std::string(trace::to_string(c.state)) + ")";
          // At the end, where the rank stopped waiting, on the background: the span's own name
          // stays readable at its begin.
          const ImVec2 size = ImGui::CalcTextSize(label.c_str());
          const ImVec2 at(std::max(x0 + 4, x1 - size.x - 6), y0 + 1);
          draw->AddRectFilled(ImVec2(at.x - 2, at.y), ImVec2(at.x + size.x + 2, at.y + size.y), theme().background);
          draw->AddText(at, color, label.c_str());
          ++drawn;
        }
      }
    }
  }
  if (hang.culprit != trace::kNone && hang.culprit < int32_t(model.ranks.size())) {
    float y0 = 0, y1 = 0;
    if (lane_row(hang.culprit, 0, y0, y1)) {
      draw->AddRectFilled(ImVec2(float(map.x0), y0), ImVec2(float(map.x0) + 4, y1), color);
      draw->AddText(ImVec2(float(map.x0) + 8, y0 + 1), color, "culprit");
    }
  }
  return drawn;
}

}  // namespace dpscope::view
