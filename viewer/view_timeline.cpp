// The timeline panel: a time ruler, then per trace and rank a group of lanes (rows of nested
// spans, folded by lod.h where they are narrower than a few pixels) and a memory graph;
// iteration markers, the playhead, the measured range, flows and highlights on top. Handles
// zoom (wheel, W/S), pan (right or middle drag, A/D), measuring (left drag) and picking (click).
#include <imgui.h>

#include <algorithm>
#include <cmath>

#include "viewer/app.h"
#include "viewer/lod.h"
#include "viewer/memory_labels.h"
#include "viewer/palette.h"

namespace dpscope::view {
namespace {

// The timeline's measures in pixels, in proportion to the font (Ctrl +/-, --font-scale): set
// from ImGui's font size at the start of each draw_timeline. UI thread only.
struct TimelineSizes {
  float label_width = 132;
  float ruler_height = 40;          // two rows of labels (layout_ruler) over the tick marks
  float ruler_iteration_row = 15;   // where the iterations' row starts
  float header_height = 18;
  float row_height = 15;
  float instant_row_height = 9;
  float memory_height = 44;
};
TimelineSizes sz;

float text_width(const std::string& text) { return ImGui::CalcTextSize(text.c_str()).x; }

// The sizes for a font of `font_size` pixels, but the label column's width; `compared`: with
// --compare, where each run's panel has half the height.
TimelineSizes sizes_for(float font_size, bool compared) {
  const float s = font_size / 13;  // the sizes above are for Dear ImGui's 13 px font
  TimelineSizes sizes;
  for (float* v : {&sizes.label_width, &sizes.ruler_height, &sizes.ruler_iteration_row, &sizes.header_height,
                   &sizes.row_height, &sizes.instant_row_height, &sizes.memory_height}) {
    *v = std::round(*v * s);
  }
  // The memory graph grows with the text only to x1.5 (x1 with --compare), and to its two lines
  // of labels beyond: on a projector the lanes need the height more than the graph's detail does.
  sizes.memory_height = std::max(std::round(44 * std::min(s, compared ? 1.0f : 1.5f)), 2 * std::round(font_size) + 4);
  return sizes;
}

// The sizes for the font, the label column wide enough for the open traces' lane names and the
// memory graph's labels (never more than a third of the panel), so that none is cut.
void scale_sizes(const App& app, float font_size, float panel_width) {
  const float s = font_size / 13;
  sz = sizes_for(font_size, app.traces.size() > 1);
  // The widest label: the ranks share their lanes' names, so a few ranks tell them all.
  float widest = text_width("steps 999.9 MiB");
  for (const OpenTrace& t : app.traces) {
    for (size_t ri = 0; ri < std::min<size_t>(t.model->ranks.size(), 8); ++ri) {
      for (const DrawnLane& lane : t.model->ranks[ri].drawn_lanes) widest = std::max(widest, text_width(lane.label));
    }
  }
  sz.label_width = std::min(std::max(sz.label_width, std::ceil(widest + 16 + 4 * s)), std::floor(panel_width / 3));
}
constexpr double kFoldPx = 3;  // spans narrower than this fold into counted blocks

float row_height(const TimelineSizes& sizes, const Lane& lane, int row) {
  return lane.has_instant_row && row == lane.rows() - 1 ? sizes.instant_row_height : sizes.row_height;
}
float row_height(const Lane& lane, int row) { return row_height(sz, lane, row); }

// The height of `rank`'s memory graph: one row that says "no memory samples" for a rank without
// any (a profiler trace recorded without profile_memory), whose lanes need the room more. While
// the samples are read (Note [Memory after the first frame]), a file that has some gets the
// graph's height at once.
float memory_graph_height(const TimelineSizes& sizes, const Model& model, const RankData& rank) {
  const bool sampled = !model.memory_ready() ||
                       std::any_of(rank.memory.begin(), rank.memory.end(),
                                   [](const MemorySeries& series) { return !series.ts.empty(); });
  return sampled ? sizes.memory_height : sizes.row_height;
}

int row_of(const Lane& lane, int64_t index) {
  auto it = std::upper_bound(lane.row_start.begin(), lane.row_start.end(),
                             static_cast<uint32_t>(index));
  return static_cast<int>(it - lane.row_start.begin()) - 1;
}

// Where each drawn row ended up, for flows and picking.
struct RowPlace {
  int trace, rank, lane, row;
  float y0, y1;
};

// One panel of the timeline: one trace's ruler and lanes (with --compare, each run has its own).
struct Frame {
  App& app;
  int trace;  // which of app.traces this panel draws
  ImDrawList* draw;
  TimeMap map;      // axis time <-> screen x
  float right = 0;  // right edge of the lanes
  float clip_y0 = 0, clip_y1 = 0;
  int ranks_visible = 0;  // ranks whose main and comm lanes lie wholly in [clip_y0, clip_y1]
  std::vector<RowPlace> rows;
  std::vector<ScreenRect> span_labels;  // where the spans' labels were drawn, for the skew labels to avoid
  std::vector<DrawItem> items;  // scratch
};

// Axis time -> the trace's own time and back.
double to_trace(const App& app, int trace, double axis) { return axis - double(app.traces[size_t(trace)].offset_ns); }

// Draws one row of `lane`: lane_index is its index in the rank's lanes, or kNotALane for a lane
// the viewer made (the what-if lanes), whose spans cannot be selected, found or mismatched.
constexpr int kNotALane = -1;
void draw_row(Frame& f, int trace, int rank_index, const Lane& lane, int lane_index, int row, float y0) {
  const OpenTrace& t = f.app.traces[size_t(trace)];
  const Model& model = *t.model;
  const float h = row_height(lane, row);
  TimeMap local = f.map;
  local.t0 = to_trace(f.app, trace, f.map.t0);
  local.t1 = to_trace(f.app, trace, f.map.t1);
  f.items.clear();
  fold_row(lane, row, local, kFoldPx, f.items);
  const bool instants = lane.has_instant_row && row == lane.rows() - 1;
  const Pick& sel = f.app.selected;
  const bool is_main = trace == 0;
  for (const DrawItem& item : f.items) {
    const float x0 = std::max(item.x0, float(f.map.x0));
    const float x1 = std::min(std::max(item.x1, item.x0 + 1.0f), f.right);
    if (x1 < f.map.x0) continue;
    if (item.count > 1) {
      f.draw->AddRectFilled(ImVec2(x0, y0 + 1), ImVec2(x1, y0 + h - 1), kFoldColor);
      // The count only where it fits inside the block, never over the next one.
      const std::string count = "x" + std::to_string(item.count);
      if (ImGui::CalcTextSize(count.c_str()).x + 4 <= x1 - x0) {
        f.draw->AddText(ImVec2(x0 + 2, y0), label_color_on(kFoldColor), count.c_str());
      }
      continue;
    }
    const Span& s = lane.spans[item.first];
    const ImU32 color = span_color(model, s);
    if (instants) {
      const float x = item.x0;
      f.draw->AddTriangleFilled(ImVec2(x, y0 + 1), ImVec2(x - 3, y0 + h - 1), ImVec2(x + 3, y0 + h - 1), color);
    } else {
      f.draw->AddRectFilled(ImVec2(x0, y0 + 1), ImVec2(x1, y0 + h - 1), color);
      if (x1 - x0 > 24) {
        // Whole, or cut with ".." ("finalize_back.."), never clipped mid-letter.
        const std::string label = elide(span_label(model, s), x1 - x0 - 5, text_width);
        if (!label.empty()) {
          f.draw->AddText(ImVec2(x0 + 3, y0), label_color_on(color), label.c_str());
          f.span_labels.push_back({x0 + 3, y0, x0 + 3 + text_width(label), y0 + h});
        }
      }
    }
    const SpanRef ref{rank_index, lane_index, int64_t(item.first)};
    ImU32 outline = 0;
    if (lane_index == kNotALane) continue;
    if (sel.trace == trace && sel.span == ref) outline = kSelectedColor;
    else if (is_main && f.app.find.matches(s)) outline = kFoundColor;
    else if (s.kind() == trace::EventKind::Collective && t.analysis) {
      const CollectiveSpans* c = t.analysis->match(s.seq());
      if (c && t.analysis->mismatch(*c)) outline = kMismatchColor;
    }
    if (outline) {
      f.draw->AddRect(ImVec2(x0 - 1, y0), ImVec2(std::max(x1, x0 + 2) + 1, y0 + h), outline, 0, 0, 2);
    }
  }
}

// A lane's name (`label`) in the label column at its top (cut to fit) and the line under it, when
// the lane [y0, y1] is on screen.
void draw_lane_name(Frame& f, float label_x, const std::string& label, ImU32 color, float y0, float y1) {
  if (y0 > f.clip_y1 || y1 < f.clip_y0) return;
  const std::string name = elide(label, sz.label_width - 16, text_width);
  f.app.layout.clipped_labels += name != label;
  f.draw->AddText(ImVec2(label_x + 12, y0), color, name.c_str());
  f.draw->AddLine(ImVec2(label_x, y1), ImVec2(f.right, y1), theme().lane_separator);
}

// The y centre of a drawn span's row, or NAN when that row is not on screen.
float row_y(const Frame& f, int trace, const SpanRef& ref) {
  const Lane& lane = f.app.traces[size_t(trace)].model->ranks[size_t(ref.rank)].lanes[size_t(ref.lane)];
  const int row = row_of(lane, ref.index);
  for (const RowPlace& p : f.rows) {
    if (p.trace == trace && p.rank == ref.rank && p.lane == ref.lane && p.row == row) {
      return (p.y0 + p.y1) / 2;
    }
  }
  return NAN;
}

// A skew's value beside its flow, on a plate of the window's ground (orange straight on a red
// all-reduce was unreadable), in the first place near the flow's middle that covers no span's
// label; where every place would, only while the pointer is near the middle.
void draw_skew_label(Frame& f, float xa, float ya, float xb, float yb, const std::string& skew) {
  const ImVec2 size = ImGui::CalcTextSize(skew.c_str());
  const float mx = (xa + xb) / 2, my = (ya + yb) / 2;
  const auto at = [&](float x, float y) { return ScreenRect{x - 2, y - 1, x + size.x + 2, y + size.y + 1}; };
  const std::vector<ScreenRect> places = {at(mx + 4, my - size.y / 2), at(mx - size.x - 8, my - size.y / 2),
                                          at(mx + 4, my - 1.5f * size.y), at(mx + 4, my + 0.5f * size.y),
                                          at(mx - size.x - 8, my - 1.5f * size.y), at(mx - size.x - 8, my + 0.5f * size.y)};
  int place = first_clear_place(places, f.span_labels);
  if (place < 0) {
    const ImVec2 mouse = ImGui::GetIO().MousePos;
    if (std::abs(mouse.x - mx) > 3 * size.y || std::abs(mouse.y - my) > 3 * size.y) return;
    place = 0;
  }
  const ScreenRect& r = places[size_t(place)];
  f.draw->AddRectFilled(ImVec2(r.x0, r.y0), ImVec2(r.x1, r.y1), theme().background, 2.0f);
  f.draw->AddText(ImVec2(r.x0 + 2, r.y0 + 1), theme().skew, skew.c_str());
}

void draw_flows(Frame& f) {
  const Pick& sel = f.app.selected;
  if (!sel.valid() || sel.trace != f.trace) return;
  const OpenTrace& t = f.app.traces[size_t(sel.trace)];
  if (!t.analysis) return;
  const double offset = double(t.offset_ns);
  for (const Flow& flow : flows_of(*t.model, *t.analysis, sel.span)) {
    const Span& a = span_of(*t.model, flow.from);
    const Span& b = span_of(*t.model, flow.to);
    const float ya = row_y(f, sel.trace, flow.from), yb = row_y(f, sel.trace, flow.to);
    if (std::isnan(ya) || std::isnan(yb)) continue;
    const bool twin = flow.kind == Flow::SameCollective;
    const float xa = float(f.map.x(double(twin ? a.begin_ns : a.end_ns) + offset));
    const float xb = float(f.map.x(double(b.begin_ns) + offset));
    const ImU32 color = twin ? theme().skew : theme().flow;
    f.draw->AddBezierCubic(ImVec2(xa, ya), ImVec2(xa + 30, ya), ImVec2(xb - 30, yb), ImVec2(xb, yb), color, 1.5f);
    f.draw->AddTriangleFilled(ImVec2(xb, yb), ImVec2(xb - 6, yb - 4), ImVec2(xb - 6, yb + 4), color);
    if (twin) draw_skew_label(f, xa, ya, xb, yb, format_duration(double(b.begin_ns - a.begin_ns)));
  }
}

// The panel's trace's iteration starts, as lines from y0 to y1.
void draw_iteration_markers(Frame& f, float y0, float y1) {
  const OpenTrace& t = f.app.traces[size_t(f.trace)];
  const Model& m = *t.model;
  if (m.ranks.empty()) return;
  const auto& its = m.ranks[0].iterations;
  const double offset = double(t.offset_ns);
  auto it = std::lower_bound(its.begin(), its.end(), f.map.t0 - offset,
                             [](const IterationSpan& s, double t) { return double(s.begin_ns) < t; });
  while (it != its.end() && double(it->begin_ns) + offset <= f.map.t1) {
    const float x = float(f.map.x(double(it->begin_ns) + offset));
    f.draw->AddLine(ImVec2(x, y0), ImVec2(x, y1), theme().iteration_line);
    // Next marker at least 4 px further on.
    const double next_t = f.map.t(x + 4) - offset;
    it = std::lower_bound(it + 1, its.end(), next_t,
                          [](const IterationSpan& s, double t) { return double(s.begin_ns) < t; });
  }
}

// The panel's trace's ruler: its own times (from its start) and iterations, its ranks' peaks.
void draw_ruler(Frame& f, float y0) {
  const OpenTrace& panel = f.app.traces[size_t(f.trace)];
  const Model& m = *panel.model;
  f.draw->AddRectFilled(ImVec2(f.map.x0 - sz.label_width, y0), ImVec2(f.right, y0 + sz.ruler_height), theme().ruler);
  static const std::vector<IterationSpan> kNoIterations;
  TimeMap local = f.map;  // the same pixels in the trace's own time
  local.t0 -= double(panel.offset_ns);
  local.t1 -= double(panel.offset_ns);
  const Ruler ruler = layout_ruler(local, double(m.t_begin), m.ranks.empty() ? kNoIterations : m.ranks[0].iterations,
                                   text_width, double(f.app.playhead) - double(panel.offset_ns));
  for (const float x : ruler.ticks) {
    f.draw->AddLine(ImVec2(x, y0 + sz.ruler_height - 6), ImVec2(x, y0 + sz.ruler_height), theme().dim_text);
  }
  for (const RulerLabel& label : ruler.labels) {
    f.draw->AddText(ImVec2(label.x, y0 + 2 + (label.row == 1 ? sz.ruler_iteration_row : 0)),
                    label.row == 1 ? theme().text : theme().dim_text,
                    label.text.c_str());
  }
  const std::string width = "view " + format_duration(f.map.t1 - f.map.t0);
  f.draw->AddText(ImVec2(f.map.x0 - sz.label_width + 4, y0 + 2), theme().text, width.c_str());
  f.draw->AddText(ImVec2(f.map.x0 - sz.label_width + 4, y0 + 2 + sz.ruler_iteration_row), theme().dim_text,
                  "iterations");
  // Each rank's memory peak, marked on the time axis once the samples are in (Note [Memory
  // after the first frame]).
  if (panel.model->memory_ready()) {
    const OpenTrace& t = panel;
    for (const RankData& r : t.model->ranks) {
      if (r.memory_peak_bytes == 0) continue;
      const float x = float(f.map.x(double(r.memory_peak_ns + t.offset_ns)));
      if (x < f.map.x0 || x > f.right) continue;
      const float yb = y0 + sz.ruler_height;
      f.draw->AddTriangleFilled(ImVec2(x, yb - 7), ImVec2(x - 5, yb), ImVec2(x + 5, yb), kPeakColor);
      if (ImGui::IsMouseHoveringRect(ImVec2(x - 5, yb - 8), ImVec2(x + 5, yb))) {
        ImGui::SetTooltip("rank %d memory peak: %s", r.info.rank, format_bytes(r.memory_peak_bytes).c_str());
      }
    }
  }
}

void handle_mouse(Frame& f, bool hovered_area) {
  App& app = f.app;
  ImGuiIO& io = ImGui::GetIO();
  const float mx = io.MousePos.x;
  const bool in_lanes = hovered_area && mx >= f.map.x0 && mx <= f.right;
  if (in_lanes && io.MouseWheel != 0 && !io.KeyShift) {
    const double t = f.map.t(mx);
    const double factor = std::pow(0.8, double(io.MouseWheel));
    app.set_view(t - (t - app.view_t0) * factor, t + (app.view_t1 - t) * factor);
  }
  if (hovered_area && io.MouseWheel != 0 && io.KeyShift) {
    ImGui::SetScrollY(ImGui::GetScrollY() - io.MouseWheel * 3 * sz.row_height);
  }
  if (hovered_area && (ImGui::IsMouseDragging(ImGuiMouseButton_Right) || ImGui::IsMouseDragging(ImGuiMouseButton_Middle))) {
    const double dt = double(io.MouseDelta.x) * f.map.ns_per_px();
    app.set_view(app.view_t0 - dt, app.view_t1 - dt);
    ImGui::SetScrollY(ImGui::GetScrollY() - io.MouseDelta.y);
  }
  if (in_lanes && ImGui::IsMouseClicked(ImGuiMouseButton_Left)) {
    app.measure_from = f.map.t(mx);
    app.measuring = false;
  }
  if (ImGui::IsMouseDragging(ImGuiMouseButton_Left, 4) && (in_lanes || app.measuring)) {
    app.measuring = true;
    const double now = f.map.t(std::clamp(double(mx), f.map.x0, double(f.right)));
    app.has_range = true;
    app.range_t0 = int64_t(std::min(app.measure_from, now));
    app.range_t1 = int64_t(std::max(app.measure_from, now));
  }
  if (ImGui::IsMouseReleased(ImGuiMouseButton_Left)) {
    if (app.measuring) {
      app.update_range();
    } else if (in_lanes) {
      app.selected = app.hovered;
      app.pinned_playhead = true;
      app.playhead = int64_t(f.map.t(mx));
      if (app.selected.valid()) {
        app.focus_trace = app.selected.trace;
        app.focus_rank = app.selected.span.rank;
      }
    }
    app.measuring = false;
  }
}

// The playhead's handle on the ruler: a click on the ruler puts the playhead there and a drag
// moves it (the lanes below keep their own click and drag: select, measure).
void drag_playhead(Frame& f, float y0) {
  App& app = f.app;
  const ImGuiIO& io = ImGui::GetIO();
  const ImVec2 ruler0(f.map.x0, y0), ruler1(f.right, y0 + sz.ruler_height);
  if (ImGui::IsMouseHoveringRect(ruler0, ruler1) && ImGui::IsMouseClicked(ImGuiMouseButton_Left)) {
    app.dragging_playhead = true;
    app.playing = false;
  }
  if (app.dragging_playhead) {
    app.pinned_playhead = true;
    app.playhead = int64_t(f.map.t(std::clamp(double(io.MousePos.x), f.map.x0, double(f.right))));
    if (!ImGui::IsMouseDown(ImGuiMouseButton_Left)) app.dragging_playhead = false;
  }
  const float px = float(f.map.x(double(app.playhead)));
  if (px < f.map.x0 || px > f.right) return;
  const float bottom = y0 + sz.ruler_height;
  const bool hot = app.dragging_playhead || ImGui::IsMouseHoveringRect(ImVec2(px - 6, y0), ImVec2(px + 6, bottom));
  f.draw->AddTriangleFilled(ImVec2(px - 6, bottom - 10), ImVec2(px + 6, bottom - 10), ImVec2(px, bottom),
                            hot ? IM_COL32(255, 255, 255, 255) : kPlayheadColor);
  if (hot) ImGui::SetMouseCursor(ImGuiMouseCursor_ResizeEW);
}

// The pointer over a panel's lanes, for picking (read once per panel).
struct Pointer {
  bool over_lanes = false;  // the lanes' child window is hovered
  float y = 0;
  double t = 0;             // axis time under the pointer
};

// The panel's ruler across the top: time and iterations, the playhead's handle. Sets f.map and
// f.right from the panel's size.
void draw_panel_ruler(Frame& f, ImVec2 origin, ImVec2 avail) {
  // The lanes below scroll vertically: keep their scrollbar's width clear on the right.
  const float lanes_w = avail.x - ImGui::GetStyle().ScrollbarSize;
  f.map = TimeMap{f.app.view_t0, f.app.view_t1, origin.x + sz.label_width, std::max(10.0f, lanes_w - sz.label_width)};
  f.right = origin.x + lanes_w;
  draw_ruler(f, origin.y);
  draw_iteration_markers(f, origin.y + sz.ruler_iteration_row, origin.y + sz.ruler_height);
  drag_playhead(f, origin.y);
  ImGui::Dummy(ImVec2(avail.x, sz.ruler_height));
}

// With --compare, the run's title band ("A: path") at y; returns the y below it.
float draw_run_title(Frame& f, float left, float y) {
  if (f.app.traces.size() <= 1) return y;
  const std::string title = (f.trace == 0 ? "A: " : "B: ") + f.app.traces[size_t(f.trace)].model->path;
  f.draw->AddRectFilled(ImVec2(left, y), ImVec2(f.right, y + sz.header_height), theme().run_title);
  f.draw->AddText(ImVec2(left + 4, y + 2), theme().run_title_text, title.c_str());
  return y + sz.header_height;
}

// Note [The timeline's text size]
// At a projector's text size (--font-scale, Ctrl +) the lanes' rows, headers and ruler grow with
// the text, and in a short window not even two ranks' main and comm lanes fit: at x3 in 1280x800
// not one did. So the timeline takes its text size apart from the rest: the largest of the text
// size and the steps of kTimelineScaleStep below it, down to kTimelineScaleFloor, at which the
// panel holds its ruler and its first two unfolded ranks' lanes down to their first comm lane
// (a profiler trace's rank: down to its last GPU lane, Note [GPU first]).
// With --compare each run's panel has half the height, and what a class compares is rank 0 of
// each run: the text stays at the size asked for, or kComparedLeastScale when that is larger
// than nothing fits, and where two ranks do not fit at it the viewer folds every rank but rank 0
// of both runs (once for each text size and panel height, so that a rank the teacher unfolds
// stays unfolded), so that rank 0's lanes and memory graph fit. The header, the narration, the
// panels, the legend and help keep the text size. The sizes are known before drawing
// (sizes_for, the lanes' rows), so the choice depends on the window and the text size only and
// settles in one frame: the frame that chooses asks the window for the font
// (App::timeline_font_scale), the next draws with it.
constexpr float kTimelineScaleStep = 0.25f;
// The smallest the lanes' text gets, x1.25: at x3 in 1280x800 a three-line narration leaves the
// lanes too little for two ranks at x1.5.
constexpr float kTimelineScaleFloor = 1.25f;
// With --compare: x1.5 is what a projector's back row still reads.
constexpr float kComparedLeastScale = 1.5f;

// The height of a rank's lanes from y on: every unfolded lane's rows (when `to_first_comm`, down
// to its first comm lane after the main one; a GPU-first rank's down to its last GPU lane, Note
// [GPU first]), then unless so, its what-if lanes and memory graph.
float rank_height(const App& app, int trace, const TimelineSizes& sizes, size_t rank_index, bool to_first_comm) {
  const RankData& rank = app.traces[size_t(trace)].model->ranks[rank_index];
  const bool gpu_first = rank.arrangement == LaneArrangement::GpuFirst;
  float height = 0;
  bool main_seen = false;
  for (const DrawnLane& drawn : rank.drawn_lanes) {
    if (app.folded(rank, drawn)) continue;
    if (to_first_comm && gpu_first && !is_gpu_role(drawn.role)) return height;
    const Lane& lane = rank.lanes[drawn.lane];
    for (int row = 0; row < lane.rows(); ++row) height += row_height(sizes, lane, row);
    if (to_first_comm && main_seen && lane.info.kind == trace::LaneKind::Comm) return height;
    main_seen = true;
  }
  if (to_first_comm) return height;
  if (trace == 0) {
    for (const bool waits : {false, true}) {
      const Lane& lane = app.whatif_lane(rank_index, waits);
      for (int row = 0; !lane.spans.empty() && row < lane.rows(); ++row) height += row_height(sizes, lane, row);
    }
  }
  return height + memory_graph_height(sizes, *app.traces[size_t(trace)].model, rank) + 4;
}

// The height `trace`'s panel needs at `sizes` for its ruler and the lanes of its first `ranks`
// unfolded ranks down to each one's first comm lane (the memory graph and what-if lanes of all
// but the last of them included, a folded rank's header too).
float height_for_ranks(const App& app, int trace, const TimelineSizes& sizes, int ranks) {
  float height = sizes.ruler_height + (app.traces.size() > 1 ? sizes.header_height : 0);
  const Model& model = *app.traces[size_t(trace)].model;
  int counted = 0;
  for (size_t ri = 0; ri < model.ranks.size() && counted < ranks; ++ri) {
    height += sizes.header_height;
    const auto folded = app.collapsed.find({trace, int(ri)});
    if (folded != app.collapsed.end() && folded->second) continue;
    const bool last = ++counted == ranks;
    height += rank_height(app, trace, sizes, ri, last);
  }
  return height;
}

// The height `trace`'s panel needs at `sizes` for its ruler and rank 0 whole, lanes and memory
// graph.
float height_for_first_rank(const App& app, int trace, const TimelineSizes& sizes) {
  if (app.traces[size_t(trace)].model->ranks.empty()) return 0;
  return sizes.ruler_height + (app.traces.size() > 1 ? sizes.header_height : 0) + sizes.header_height +
         rank_height(app, trace, sizes, 0, false);
}

// The lanes' text size for panels `panel_height` pixels tall, and whether the other ranks must
// be folded for it; see Note [The timeline's text size].
struct TimelineScale {
  float scale;
  bool fold_other_ranks;
};
TimelineScale choose_timeline_scale(const App& app, float panel_height) {
  const bool compared = app.traces.size() > 1;
  const float least = std::min(app.font_scale, compared ? kComparedLeastScale : kTimelineScaleFloor);
  const auto every_panel = [&](float scale, auto&& height) {
    const TimelineSizes sizes = sizes_for(std::round(13 * scale), compared);
    for (int trace = 0; trace < int(app.traces.size()); ++trace) {
      if (height(trace, sizes) > panel_height) return false;
    }
    return true;
  };
  const auto two_ranks = [&](int trace, const TimelineSizes& sizes) { return height_for_ranks(app, trace, sizes, 2); };
  const auto first_rank = [&](int trace, const TimelineSizes& sizes) { return height_for_first_rank(app, trace, sizes); };
  for (float scale = app.font_scale; scale > least; scale -= kTimelineScaleStep) {
    if (every_panel(scale, two_ranks)) return {scale, false};
  }
  if (!compared || every_panel(least, two_ranks)) return {least, false};
  for (float scale = app.font_scale; scale > least; scale -= kTimelineScaleStep) {
    if (every_panel(scale, first_rank)) return {scale, true};
  }
  return {least, true};
}

// Folds every rank but rank 0 of every open run, once for each text size and panel height.
void fold_other_ranks(App& app, float panel_height) {
  const std::pair<float, float> key{app.font_scale, panel_height};
  if (app.ranks_folded_for == key) return;
  app.ranks_folded_for = key;
  for (size_t t = 0; t < app.traces.size(); ++t) {
    for (size_t ri = 1; ri < app.traces[t].model->ranks.size(); ++ri) app.collapsed[{int(t), int(ri)}] = true;
  }
}

// A folded rank's line, in the Stats panel's words: "  |  step 12.3 ms, exposed comm 4.5 ms, peak
// 642.7 MiB" (the median steady step, exposed communication per step, the run's peak), or ""
// before the analysis is done.
std::string folded_rank_summary(const Frame& f, int rank_index) {
  const OpenTrace& open = f.app.traces[size_t(f.trace)];
  const analysis::RankStats* stats = open.analysis ? open.analysis->rank(*open.model, size_t(rank_index)) : nullptr;
  if (!stats) return "";
  char summary[160];
  std::snprintf(summary, sizeof(summary), "  |  step %.1f ms, exposed comm %.1f ms, peak %s",
                analysis::step_summary(*stats).median_ms, analysis::overlap_per_step(*stats).exposed_comm_ms,
                format_bytes(stats->memory_peak.total_bytes).c_str());
  return summary;
}

// A rank group's header at y ("- rank 0  host cpu  status"; folded, "+ rank 1 ..." and its
// summary); a click on its label folds or
// unfolds the group. Returns whether the group is folded.
bool draw_rank_header(Frame& f, float left, int rank_index, const Pointer& pointer, float y) {
  const RankData& rank = f.app.traces[size_t(f.trace)].model->ranks[size_t(rank_index)];
  bool& collapsed = f.app.collapsed[{f.trace, rank_index}];
  if (y + sz.header_height < f.clip_y0 || y > f.clip_y1) return collapsed;
  const int folded_lanes = int(std::count_if(rank.drawn_lanes.begin(), rank.drawn_lanes.end(),
                                             [&](const DrawnLane& lane) { return f.app.folded(rank, lane); }));
  char folded[48] = "";
  if (folded_lanes > 0) {
    std::snprintf(folded, sizeof(folded), "  (%d lane%s folded: U)", folded_lanes, folded_lanes == 1 ? "" : "s");
  }
  char header[200];
  std::snprintf(header, sizeof(header), "%s rank %d  %s %s  %s%s", collapsed ? "+" : "-", rank.info.rank,
                rank.info.host.c_str(), rank.info.device.c_str(), rank.info.status.c_str(), folded);
  // A folded rank's summary where the line has room for it whole.
  const float room = f.right - left - 8;
  const std::string summarized = header + (collapsed ? folded_rank_summary(f, rank_index) : "");
  const std::string shown = text_width(summarized) <= room ? summarized : elide(header, room, text_width);
  f.app.layout.clipped_labels += shown != header && shown != summarized;
  f.draw->AddRectFilled(ImVec2(left, y), ImVec2(f.right, y + sz.header_height), theme().rank_header);
  f.draw->AddText(ImVec2(left + 4, y + 2), theme().rank_header_text, shown.c_str());
  if (pointer.over_lanes && ImGui::IsMouseClicked(ImGuiMouseButton_Left) &&
      ImGui::IsMouseHoveringRect(ImVec2(left, y), ImVec2(left + sz.label_width, y + sz.header_height))) {
    collapsed = !collapsed;
  }
  return collapsed;
}

// The rank's recorded lanes from y in drawing order (lane_order.h), row by row (its secondary ones
// only when not folded); the span under the pointer becomes the hovered one. Returns the y below
// them.
float draw_recorded_lanes(Frame& f, float left, int rank_index, const Pointer& pointer, float y) {
  const RankData& rank = f.app.traces[size_t(f.trace)].model->ranks[size_t(rank_index)];
  // Whether the rank's main lane (its first) and its first comm lane lie wholly in view; for a
  // GPU-first rank, its GPU lanes (Note [GPU first]).
  bool main_seen = false, main_in_view = false, comm_seen = false, comm_in_view = true;
  bool gpu_seen = false, gpu_in_view = true;
  for (const DrawnLane& drawn : rank.drawn_lanes) {
    if (f.app.folded(rank, drawn)) continue;
    const size_t li = drawn.lane;
    const Lane& lane = rank.lanes[li];
    const float lane_y0 = y;
    for (int row = 0; row < lane.rows(); ++row) {
      const float h = row_height(lane, row);
      if (y + h >= f.clip_y0 && y <= f.clip_y1) {
        draw_row(f, f.trace, rank_index, lane, int(li), row, y);
        f.rows.push_back({f.trace, rank_index, int(li), row, y, y + h});
        if (pointer.over_lanes && pointer.y >= y && pointer.y < y + h && pointer.t >= f.map.t0) {
          const double local = to_trace(f.app, f.trace, pointer.t);
          const int64_t hit = span_at(lane, row, int64_t(local), int64_t(4 * f.map.ns_per_px()));
          if (hit >= 0) f.app.hovered = {f.trace, {rank_index, int(li), hit}};
        }
      }
      y += h;
    }
    draw_lane_name(f, left, drawn.label, theme().text, lane_y0, y);
    const bool in_view = lane_y0 >= f.clip_y0 && y <= f.clip_y1;
    if (is_gpu_role(drawn.role)) {
      gpu_seen = true;
      gpu_in_view = gpu_in_view && in_view;
    }
    if (!main_seen) {
      main_seen = true;
      main_in_view = in_view;
    } else if (!comm_seen && lane.info.kind == trace::LaneKind::Comm) {
      comm_seen = true;
      comm_in_view = in_view;
    }
  }
  f.ranks_visible += rank.arrangement == LaneArrangement::GpuFirst ? gpu_seen && gpu_in_view
                                                                    : main_seen && main_in_view && comm_in_view;
  return y;
}

// The rank's what-if lanes (main trace only, whatif_lanes.h) from y on their own band. Returns
// the y below them.
float draw_whatif_lanes(Frame& f, float left, int rank_index, float y) {
  if (f.trace != 0) return y;
  for (const Lane* whatif_lane : {&f.app.whatif_lane(size_t(rank_index), false),
                                  &f.app.whatif_lane(size_t(rank_index), true)}) {
    if (whatif_lane->spans.empty()) continue;
    const Lane& lane = *whatif_lane;
    const float lane_y0 = y;
    float lane_h = 0;
    for (int row = 0; row < lane.rows(); ++row) lane_h += row_height(lane, row);
    if (y + lane_h >= f.clip_y0 && y <= f.clip_y1) {
      f.draw->AddRectFilled(ImVec2(left, y), ImVec2(f.right, y + lane_h), theme().whatif_band);
    }
    for (int row = 0; row < lane.rows(); ++row) {
      const float h = row_height(lane, row);
      if (y + h >= f.clip_y0 && y <= f.clip_y1) draw_row(f, f.trace, rank_index, lane, kNotALane, row, y);
      y += h;
    }
    draw_lane_name(f, left, lane.info.name, theme().whatif_text, lane_y0, y);
  }
  return y;
}

// The rank's memory graph at y, its peak's size beside it. Returns the y below it.
float draw_rank_memory(Frame& f, float left, int rank_index, float y) {
  const Model& model = *f.app.traces[size_t(f.trace)].model;
  const RankData& rank = model.ranks[size_t(rank_index)];
  const float height = memory_graph_height(sz, model, rank);
  if (y + height >= f.clip_y0 && y <= f.clip_y1) {
    draw_memory_graph(f.app, f.trace, rank, f.map.x0, y, f.map.width, height);
    f.draw->AddText(ImVec2(left + 12, y), theme().text, "memory");
    // The peak's size beside the graph, not on it (its moment: the red line in the graph), named by
    // whose memory the categories are; under it the other memory's peak on a GPU, or the peak in
    // the steps where the Stats panel shows it too (memory_labels.h).
    const Analysis* analysis = f.app.traces[size_t(f.trace)].analysis.get();
    const MemoryGraphLabels labels = memory_graph_labels(
        model, rank, analysis ? analysis->rank(model, size_t(rank_index)) : nullptr,
        analysis && analysis->steps_peak_elsewhere());
    const float line = ImGui::GetTextLineHeight();
    if (!labels.peak.empty()) f.draw->AddText(ImVec2(left + 12, y + line), theme().peak_text, labels.peak.c_str());
    if (!labels.second.empty()) {
      f.draw->AddText(ImVec2(left + 12, y + 2 * line), theme().text, labels.second.c_str());
    }
  }
  return y + height + 4;
}

// One rank's group from y: its header, then unless folded its lanes, what-if lanes and memory.
// Returns the y below it.
float draw_rank_group(Frame& f, float left, int rank_index, const Pointer& pointer, float y) {
  const bool collapsed = draw_rank_header(f, left, rank_index, pointer, y);
  y += sz.header_height;
  if (collapsed) return y;
  y = draw_recorded_lanes(f, left, rank_index, pointer, y);
  y = draw_whatif_lanes(f, left, rank_index, y);
  return draw_rank_memory(f, left, rank_index, y);
}

// What lies over every lane from y0 to y1: iteration lines, the playhead, the measured range and
// the selection's flows.
void draw_overlays(Frame& f, float y0, float y1) {
  const App& app = f.app;
  draw_iteration_markers(f, y0, std::min(y1, f.clip_y1));
  const float px = float(f.map.x(double(app.playhead)));
  if (px >= f.map.x0 && px <= f.right) {
    f.draw->AddLine(ImVec2(px, f.clip_y0), ImVec2(px, f.clip_y1), kPlayheadColor);
  }
  if (app.has_range) {
    const float x0 = std::max(float(f.map.x0), float(f.map.x(double(app.range_t0))));
    const float x1 = std::min(f.right, float(f.map.x(double(app.range_t1))));
    if (x1 > x0) {
      f.draw->AddRectFilled(ImVec2(x0, f.clip_y0), ImVec2(x1, f.clip_y1), kRangeColor);
      const std::string label = format_duration(double(app.range_t1 - app.range_t0));
      f.draw->AddText(ImVec2(x0 + 4, f.clip_y0 + 2), theme().range_text, label.c_str());
    }
  }
  // Flows to spans outside the view run to the lanes' edge, not over the lane names or scrollbar.
  f.draw->PushClipRect(ImVec2(float(f.map.x0), f.clip_y0), ImVec2(f.right, f.clip_y1), true);
  draw_flows(f);
  f.draw->PopClipRect();
  const auto main_row = [&f](int rank, int lane, float& y0, float& y1) {
    for (const RowPlace& p : f.rows) {
      if (p.trace == f.trace && p.rank == rank && p.lane == lane && p.row == 0) {
        y0 = p.y0;
        y1 = p.y1;
        return true;
      }
    }
    return false;
  };
  draw_hang(f.app, f.trace, f.map, f.right, main_row);  // See docs/hangs.md
  draw_critical_path(f.app, f.trace, f.map, f.right, f.clip_y0, main_row);
}

// One trace's panel, `height` pixels tall (0: the rest of the timeline): its ruler, then its
// lanes in a child window that scrolls vertically, the overlays, the mouse and the tooltip.
void draw_trace_panel(App& app, int trace, float height) {
  Frame f{app, trace, ImGui::GetWindowDrawList(), {}, 0, 0, 0, 0, {}, {}, {}};
  const ImVec2 origin = ImGui::GetCursorScreenPos();
  draw_panel_ruler(f, origin, ImGui::GetContentRegionAvail());

  const std::string lanes_id = "lanes " + std::to_string(trace);
  ImGui::BeginChild(lanes_id.c_str(), ImVec2(0, height > 0 ? height - sz.ruler_height : 0), false,
                    ImGuiWindowFlags_NoScrollWithMouse);
  f.draw = ImGui::GetWindowDrawList();
  const ImVec2 top = ImGui::GetCursorScreenPos();
  const ImVec2 win = ImGui::GetWindowPos();
  f.clip_y0 = win.y;
  f.clip_y1 = win.y + ImGui::GetWindowHeight();
  const Pointer pointer{ImGui::IsWindowHovered(), ImGui::GetIO().MousePos.y, f.map.t(ImGui::GetIO().MousePos.x)};
  float y = draw_run_title(f, origin.x, top.y);
  for (size_t ri = 0; ri < app.traces[size_t(trace)].model->ranks.size(); ++ri) {
    y = draw_rank_group(f, origin.x, int(ri), pointer, y);
  }
  draw_overlays(f, top.y, y);
  app.layout.ranks_visible = trace == 0 ? f.ranks_visible : std::min(app.layout.ranks_visible, f.ranks_visible);
  handle_mouse(f, pointer.over_lanes);
  if (app.hovered.valid() && pointer.over_lanes) draw_span_tooltip(app, app.hovered);
  ImGui::SetCursorScreenPos(top);
  ImGui::Dummy(ImVec2(1, y - top.y));
  ImGui::EndChild();
}

}  // namespace

void draw_timeline(App& app) {
  scale_sizes(app, ImGui::GetFontSize(), ImGui::GetContentRegionAvail().x);
  app.hovered = {};
  // With --compare each run gets half the height, its own ruler and iteration grid, and its own
  // vertical scroll, so both are in view at once; time and the playhead are shared.
  const int panels = int(app.traces.size());
  const float total = ImGui::GetContentRegionAvail().y;
  const float panel_height = std::floor(total / float(panels)) - ImGui::GetStyle().ItemSpacing.y;
  const TimelineScale chosen = choose_timeline_scale(app, panel_height);
  app.timeline_font_scale = chosen.scale;
  if (chosen.fold_other_ranks) fold_other_ranks(app, panel_height);
  for (int trace = 0; trace < panels; ++trace) {
    const bool last = trace == panels - 1;
    draw_trace_panel(app, trace, last ? 0 : panel_height);
  }
}

}  // namespace dpscope::view
