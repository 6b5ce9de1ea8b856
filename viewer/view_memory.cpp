// The memory graph drawn under each rank's lanes, on the timeline's time axis: the stacked
// categories (parameters, gradients, buckets, ..., activations, other) as filled areas, the
// allocator's totals as lines, the peak marked; a hover tooltip gives the bytes per category.
#include <imgui.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <string>

#include "viewer/app.h"
#include "viewer/lod.h"
#include "viewer/palette.h"

namespace dpscope::view {
namespace {

constexpr float kColumnPx = 2;  // one sample of the step functions every this many pixels

// A band of the stack (the categories that add up to the total), or a line drawn over it (the
// allocators' own read-outs). Category numbers are appended, never renumbered, so the stacked
// ones are not a prefix: ask the schema.
bool stacked(int category) { return trace::is_stacked(static_cast<trace::MemoryCategory>(category)); }

// The bytes at the top of the graph: the larger of the stacked peak and the allocator lines'
// peaks.
int64_t graph_scale(const RankData& rank) {
  int64_t scale = rank.memory_peak_bytes;
  for (int c = 0; c < trace::kMemoryCategoryCount; ++c) {
    if (!stacked(c)) scale = std::max(scale, rank.memory[size_t(c)].peak);
  }
  return scale;
}

using Used = std::array<bool, trace::kMemoryCategoryCount>;  // the categories with samples

// The graph's geometry: time across, bytes up from `base`.
struct GraphArea {
  TimeMap map;
  float x0 = 0, width = 0, base = 0;
  float scale_px = 0;  // pixels per byte
};

// Samples the step functions every kColumnPx and draws each category's band (or line). They
// stay flat over many columns when zoomed in, so each is drawn as one rectangle per run of equal
// columns, not one per column.
void draw_bands(ImDrawList* draw, const RankData& rank, const GraphArea& area, const Used& used) {
  struct Run {
    float x = 0, bottom = 0, top = 0;
  };
  std::array<Run, trace::kMemoryCategoryCount> run{};
  std::array<size_t, trace::kMemoryCategoryCount> hint{};
  auto flush = [&](int c, float x_end) {
    const Run& r = run[size_t(c)];
    if (x_end <= r.x) return;
    if (stacked(c)) {
      if (r.top < r.bottom) draw->AddRectFilled(ImVec2(r.x, r.top), ImVec2(x_end, r.bottom), memory_color(c));
    } else {
      draw->AddLine(ImVec2(r.x, r.top), ImVec2(x_end, r.top), memory_color(c));
    }
  };
  const int columns = std::max(1, int(area.width / kColumnPx));
  for (int col = 0; col <= columns; ++col) {
    const float x = area.x0 + float(col) * kColumnPx;
    const auto t = static_cast<int64_t>(area.map.t(x));
    float stack = area.base;
    for (int c = 0; c < trace::kMemoryCategoryCount; ++c) {
      if (!used[size_t(c)]) continue;
      const int64_t bytes = rank.memory[size_t(c)].at(t, &hint[size_t(c)]);
      Run next;
      next.x = x;
      if (stacked(c)) {
        next.bottom = stack;
        next.top = stack - float(bytes) * area.scale_px;
        stack = next.top;
      } else {
        next.bottom = next.top = area.base - float(bytes) * area.scale_px;
      }
      Run& current = run[size_t(c)];
      if (col == 0) {
        current = next;
      } else if (std::fabs(next.top - current.top) >= 0.5f || std::fabs(next.bottom - current.bottom) >= 0.5f) {
        flush(c, x);
        if (!stacked(c)) draw->AddLine(ImVec2(x, current.top), ImVec2(x, next.top), memory_color(c));
        current = next;
      }
    }
  }
  for (int c = 0; c < trace::kMemoryCategoryCount; ++c) {
    if (used[size_t(c)]) flush(c, area.x0 + area.width);
  }
}

// The bytes per category at trace time `t`, and the stacked total beside the peak's.
void draw_tooltip(const RankData& rank, int64_t t, int64_t t_begin, const Used& used) {
  ImGui::BeginTooltip();
  ImGui::Text("rank %d memory at %s", rank.info.rank, format_duration(double(t - t_begin)).c_str());
  int64_t total = 0;
  for (int c = 0; c < trace::kMemoryCategoryCount; ++c) {
    if (!used[size_t(c)]) continue;
    size_t h = 0;
    const int64_t bytes = rank.memory[size_t(c)].at(t, &h);
    if (stacked(c)) total += bytes;
    char line[96];
    std::snprintf(line, sizeof(line), "%-16s %s", std::string(trace::to_string(static_cast<trace::MemoryCategory>(c))).c_str(),
                  format_bytes(bytes).c_str());
    color_entry(memory_color(c), line);
  }
  ImGui::Text("stacked total    %s (peak %s)", format_bytes(total).c_str(),
              format_bytes(rank.memory_peak_bytes).c_str());
  ImGui::EndTooltip();
}

}  // namespace

void draw_memory_graph(App& app, int trace, const RankData& rank, float x0, float y0, float width,
                       float height) {
  ImDrawList* draw = ImGui::GetWindowDrawList();
  draw->AddRectFilled(ImVec2(x0, y0), ImVec2(x0 + width, y0 + height), theme().memory_ground);
  const OpenTrace& open = app.traces[size_t(trace)];
  if (!open.model->memory_ready()) {  // See Note [Memory after the first frame]
    const std::string text = open.memory_error.empty()
                                 ? "reading memory samples... " + std::to_string(int(100 * open.memory_load.fraction())) + " %"
                                 : "memory samples unreadable: " + open.memory_error;
    draw->AddText(ImVec2(x0 + 4, y0 + 2), theme().dim_text, text.c_str());
    return;
  }
  const int64_t scale = graph_scale(rank);
  if (scale <= 0) {
    draw->AddText(ImVec2(x0 + 4, y0 + 2), theme().dim_text, "no memory samples");
    return;
  }
  const double offset = double(open.offset_ns);
  GraphArea area;
  area.map = TimeMap{app.view_t0 - offset, app.view_t1 - offset, x0, width};
  // The graph covers the rank's own extent: before its first moment and after its last it held
  // nothing the trace knows of (a sample held on to the edge read as memory kept after the end).
  const auto left = float(std::max<double>(x0, area.map.x(double(rank.t_begin))));
  const auto right = float(std::min<double>(x0 + width, area.map.x(double(rank.t_end))));
  if (right <= left) return;
  area.x0 = left;
  area.width = right - left;
  area.base = y0 + height;
  area.scale_px = (height - 2) / float(scale);
  Used used{};
  for (int c = 0; c < trace::kMemoryCategoryCount; ++c) used[size_t(c)] = !rank.memory[size_t(c)].ts.empty();
  draw_bands(draw, rank, area, used);
  // The peak of the stacked total.
  const float peak_x = float(area.map.x(double(rank.memory_peak_ns)));
  if (peak_x >= x0 && peak_x <= x0 + width) {
    draw->AddLine(ImVec2(peak_x, y0), ImVec2(peak_x, area.base), kPeakColor, 1.5f);
  }
  if (ImGui::IsWindowHovered() && ImGui::IsMouseHoveringRect(ImVec2(left, y0), ImVec2(right, area.base))) {
    draw_tooltip(rank, static_cast<int64_t>(area.map.t(ImGui::GetIO().MousePos.x)), open.model->t_begin, used);
  }
}

}  // namespace dpscope::view
