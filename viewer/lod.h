// Level of detail for the timeline: mapping time to pixels, finding the visible part of a lane
// row by binary search, and folding spans narrower than a few pixels into one counted block, so
// a frame costs in proportion to the pixels drawn, not to the events in view. Pure functions;
// no ImGui, so tests run them without a window.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "viewer/model.h"

namespace dpscope::view {

// Maps trace time (ns, as double: a 10 M-event run spans ~1e11 ns) to screen x and back.
struct TimeMap {
  double t0 = 0;      // time at x0
  double t1 = 1;      // time at x0 + width
  double x0 = 0;      // left pixel
  double width = 1;   // pixels

  double x(double t) const { return x0 + (t - t0) * width / (t1 - t0); }
  double t(double x) const { return t0 + (x - x0) * (t1 - t0) / width; }
  double ns_per_px() const { return (t1 - t0) / width; }
};

// What to draw for one stretch of a row: one span (count == 1) or a folded block of `count`
// spans starting at lane.spans[first] that were each narrower than the fold width.
struct DrawItem {
  uint32_t first = 0;
  uint32_t count = 0;
  float x0 = 0, x1 = 0;  // screen pixels, x1 >= x0
};

// The index of the first span of `row` whose end is at or after t (its end_max, see Note
// [Lane rows]); row_end(row) when none is.
size_t first_visible(const Lane& lane, int row, int64_t t);

// Appends to `out` what to draw of `row` in [map.t0, map.t1]. Spans at least `min_px` wide come
// one by one; runs of narrower spans become one block each, found by binary search, so at most
// about width / min_px items come out however many spans are in view.
void fold_row(const Lane& lane, int row, const TimeMap& map, double min_px,
              std::vector<DrawItem>& out);

// The span of `row` under time t (within `slack_ns` of it for narrow and instant spans), or -1.
int64_t span_at(const Lane& lane, int row, int64_t t, int64_t slack_ns);

// "1.234 ms", "56.7 us", "812 ns", "2.50 s": a duration for labels and tooltips.
std::string format_duration(double ns);
// A time on the ruler: `ns` in the unit of `step` (s, ms, us, ns) with just enough decimals for
// neighbouring ticks `step` apart to differ ("10.84 s", "10.8412 s").
std::string format_tick(double ns, double step);
// "12.0 MiB", "512 B": a byte count.
std::string format_bytes(int64_t bytes);
// `text` as it fits in `max_width` pixels: whole, or its longest prefix followed by ".." (at
// least three characters of it), or "" when not even that fits. `text_width` measures. Pure.
std::string elide(const std::string& text, float max_width,
                  const std::function<float(const std::string&)>& text_width);

// A rectangle on screen, [x0, x1) x [y0, y1), in pixels.
struct ScreenRect {
  float x0 = 0, y0 = 0, x1 = 0, y1 = 0;
  bool overlaps(const ScreenRect& o) const { return x0 < o.x1 && o.x0 < x1 && y0 < o.y1 && o.y0 < y1; }
};
// The index of the first of `candidates` (places for a label, in order of preference) that
// overlaps none of `taken` (labels already drawn), or -1 when each overlaps one. Pure.
int first_clear_place(const std::vector<ScreenRect>& candidates, const std::vector<ScreenRect>& taken);

// [t0, t1] moved (and narrowed, if wider) to lie within the run [run0, run1] and a margin of
// a tenth of the run's length on either side: pan and zoom never leave the run. Pure.
std::pair<double, double> clamp_view(double t0, double t1, double run0, double run1);

// A round tick spacing (1, 2 or 5 times a power of ten, in ns) with ticks at least `min_px`
// apart on `map`.
double tick_step(const TimeMap& map, double min_px);

// The time ruler over [map.x0, map.x0 + map.width]: tick marks at a round step from `origin`
// (the run's start), each labelled on row 0 ("120 ms"), and the iterations that begin in view
// named on row 1 ("it 3"), so the two never meet. The step is wide enough for its labels; a
// label that would come within kRulerLabelGap of the one before it on its row, or run past the
// right edge, is left out (its tick stays). The iteration the `playhead` (map's time; NaN for
// none) stands in is always named, its neighbours giving way, so that the label nearest the
// playhead on its left names the playhead's own iteration. `text_width` measures a label in
// pixels. Pure.
inline constexpr float kRulerLabelGap = 8;
struct RulerLabel {
  float x = 0;      // left edge of the text
  float width = 0;
  int row = 0;      // 0: time, 1: iteration
  std::string text;
};
struct Ruler {
  std::vector<float> ticks;  // x of every tick mark
  std::vector<RulerLabel> labels;
};
Ruler layout_ruler(const TimeMap& map, double origin, const std::vector<IterationSpan>& iterations,
                   const std::function<float(const std::string&)>& text_width,
                   double playhead = std::numeric_limits<double>::quiet_NaN());

}  // namespace dpscope::view
