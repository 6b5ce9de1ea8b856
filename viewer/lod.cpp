// Level of detail for the timeline (see lod.h): binary searches over a lane row's begin and
// end_max columns, and the folding of narrow spans into counted blocks.
#include "viewer/lod.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>

#include "viewer/gallop.h"

namespace dpscope::view {

size_t first_visible(const Lane& lane, int row, int64_t t) {
  size_t lo = lane.row_begin(row), hi = lane.row_end(row);
  while (lo < hi) {
    const size_t mid = lo + (hi - lo) / 2;
    if (lane.end_max(row, mid) < t) lo = mid + 1; else hi = mid;
  }
  return lo;
}

namespace {

constexpr size_t kJumpAt = 32;

// The first span in [from, to) of the row whose begin is >= t. Galloping from `from`: a fold
// asks this once a span it takes, and the answer is mostly a few spans on, so a binary search
// over the rest of the row (a million spans, cold in cache) cost most of a mid-zoom frame.
size_t first_beginning_at(const Lane& lane, size_t from, size_t to, double t) {
  return gallop(from, to, [&](size_t i) { return double(lane.spans[i].begin_ns) < t; });
}

}  // namespace

void fold_row(const Lane& lane, int row, const TimeMap& map, double min_px,
              std::vector<DrawItem>& out) {
  const size_t end = lane.row_end(row);
  const auto t_lo = static_cast<int64_t>(std::floor(map.t0));
  size_t i = first_visible(lane, row, t_lo);
  while (i < end) {
    const Span& s = lane.spans[i];
    if (double(s.begin_ns) > map.t1) break;
    const double x0 = map.x(double(s.begin_ns));
    const double x1 = map.x(double(s.end_ns));
    if (x1 - x0 >= min_px) {
      out.push_back({static_cast<uint32_t>(i), 1, float(x0), float(x1)});
      ++i;
      continue;
    }
    // Fold: swallow the spans that begin before the block's right edge plus min_px. Where many
    // do (zoomed out), jump over them by binary search, each jump moving the edge at least
    // min_px to the right; where few do, take them one by one and stop at a wide one.
    const double block_x0 = std::max(x0, map.x0 - min_px);
    double block_x1 = std::max(x1, block_x0 + 1);
    size_t j = i + 1;
    for (;;) {
      const size_t next = first_beginning_at(lane, j, end, map.t(block_x1 + min_px));
      if (next > j + kJumpAt) {
        block_x1 = std::max(block_x1, map.x(double(lane.end_max(row, next - 1))));
        j = next;
        continue;
      }
      if (j >= end) break;
      const Span& n = lane.spans[j];
      const double nx0 = map.x(double(n.begin_ns)), nx1 = map.x(double(n.end_ns));
      if (nx1 - nx0 >= min_px || nx0 > block_x1 + min_px) break;
      block_x1 = std::max(block_x1, nx1);
      ++j;
    }
    out.push_back({static_cast<uint32_t>(i), static_cast<uint32_t>(j - i), float(block_x0),
                   float(std::max(block_x1, block_x0 + 1))});
    i = j;
  }
}

int64_t span_at(const Lane& lane, int row, int64_t t, int64_t slack_ns) {
  size_t i = first_visible(lane, row, t - slack_ns);
  int64_t best = -1;
  int64_t best_distance = INT64_MAX;
  for (; i < lane.row_end(row); ++i) {
    const Span& s = lane.spans[i];
    if (s.begin_ns > t + slack_ns) break;
    if (s.begin_ns <= t && t <= s.end_ns) return static_cast<int64_t>(i);
    const int64_t d = t < s.begin_ns ? s.begin_ns - t : t - s.end_ns;
    if (d <= slack_ns && d < best_distance) {
      best = static_cast<int64_t>(i);
      best_distance = d;
    }
  }
  return best;
}

std::string format_duration(double ns) {
  char text[64];
  const double a = std::fabs(ns);
  // %g turns 1170 s into "1.17e+03 s": whole seconds from 100 s on.
  if (a >= 1e11) std::snprintf(text, sizeof(text), "%.0f s", ns / 1e9);
  else if (a >= 1e9) std::snprintf(text, sizeof(text), "%.3g s", ns / 1e9);
  else if (a >= 1e6) std::snprintf(text, sizeof(text), "%.4g ms", ns / 1e6);
  else if (a >= 1e3) std::snprintf(text, sizeof(text), "%.4g us", ns / 1e3);
  else std::snprintf(text, sizeof(text), "%.0f ns", ns);
  return text;
}

std::string format_tick(double ns, double step) {
  double unit = 1;
  const char* name = "ns";
  if (ns >= 1e9 || step >= 1e8) unit = 1e9, name = "s";
  else if (ns >= 1e6 || step >= 1e5) unit = 1e6, name = "ms";
  else if (ns >= 1e3 || step >= 1e2) unit = 1e3, name = "us";
  const int decimals = std::clamp(int(std::ceil(-std::log10(step / unit) - 1e-9)), 0, 9);
  char text[64];
  std::snprintf(text, sizeof(text), "%.*f %s", decimals, ns / unit, name);
  return text;
}

std::string format_bytes(int64_t bytes) {
  char text[64];
  const double b = static_cast<double>(bytes);
  if (std::llabs(bytes) >= (int64_t{1} << 30)) std::snprintf(text, sizeof(text), "%.2f GiB", b / (1 << 30));
  else if (std::llabs(bytes) >= (1 << 20)) std::snprintf(text, sizeof(text), "%.1f MiB", b / (1 << 20));
  else if (std::llabs(bytes) >= (1 << 10)) std::snprintf(text, sizeof(text), "%.1f KiB", b / (1 << 10));
  else std::snprintf(text, sizeof(text), "%lld B", static_cast<long long>(bytes));
  return text;
}

double tick_step(const TimeMap& map, double min_px) {
  const double wanted = map.ns_per_px() * min_px;
  double step = std::pow(10.0, std::floor(std::log10(std::max(wanted, 1e-3))));
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (step * m >= wanted) return step * m;
  }
  return step * 10;
}

std::string elide(const std::string& text, float max_width,
                  const std::function<float(const std::string&)>& text_width) {
  if (text_width(text) <= max_width) return text;
  // The widths grow with the prefix: binary search for the longest one that fits with "..".
  size_t lo = 0, hi = text.size();
  while (lo < hi) {
    const size_t mid = (lo + hi + 1) / 2;
    if (text_width(text.substr(0, mid) + "..") <= max_width) lo = mid; else hi = mid - 1;
  }
  return lo >= 3 ? text.substr(0, lo) + ".." : "";
}

std::pair<double, double> clamp_view(double t0, double t1, double run0, double run1) {
  const double margin = 0.1 * (run1 - run0);
  const double lo = run0 - margin, hi = run1 + margin;
  const double width = std::min(t1 - t0, hi - lo);
  if (t0 < lo) t0 = lo;
  if (t0 + width > hi) t0 = hi - width;
  return {t0, t0 + width};
}

int first_clear_place(const std::vector<ScreenRect>& candidates, const std::vector<ScreenRect>& taken) {
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (std::none_of(taken.begin(), taken.end(), [&](const ScreenRect& t) { return candidates[i].overlaps(t); })) {
      return int(i);
    }
  }
  return -1;
}

namespace {

// The ruler's iteration row (labels from `first` on) with the playhead's iteration named: when
// the greedy pass left it out, its label goes where the iteration begins (the view's left edge
// if it began before), and the labels it would crowd give way.
void name_playhead_iteration(Ruler& ruler, size_t first, const TimeMap& map, const std::vector<IterationSpan>& iterations,
                             const std::function<float(const std::string&)>& text_width, double playhead) {
  if (std::isnan(playhead) || playhead < map.t0 || playhead > map.t1) return;
  auto it = std::upper_bound(iterations.begin(), iterations.end(), playhead,
                             [](double t, const IterationSpan& s) { return t < double(s.begin_ns); });
  if (it == iterations.begin() || double(std::prev(it)->end_ns) < playhead) return;
  const IterationSpan& own = *std::prev(it);
  RulerLabel label{std::max(float(map.x(double(own.begin_ns))), float(map.x0)) + 2, 0, 1, "it " + std::to_string(own.iteration)};
  label.width = text_width(label.text);
  const float right = float(map.x0 + map.width);
  label.x = std::max(float(map.x0) + 2, std::min(label.x, right - label.width));
  for (size_t i = first; i < ruler.labels.size(); ++i) {
    if (ruler.labels[i].text == label.text && std::abs(ruler.labels[i].x - label.x) < 1) return;
  }
  const auto crowded = [&](const RulerLabel& other) {
    return other.x < label.x + label.width + kRulerLabelGap && label.x < other.x + other.width + kRulerLabelGap;
  };
  ruler.labels.erase(std::remove_if(ruler.labels.begin() + long(first), ruler.labels.end(), crowded), ruler.labels.end());
  const auto at = std::lower_bound(ruler.labels.begin() + long(first), ruler.labels.end(), label.x,
                                   [](const RulerLabel& l, float x) { return l.x < x; });
  ruler.labels.insert(at, std::move(label));
}

}  // namespace

Ruler layout_ruler(const TimeMap& map, double origin, const std::vector<IterationSpan>& iterations,
                   const std::function<float(const std::string&)>& text_width, double playhead) {
  Ruler ruler;
  const double right = map.x0 + map.width;
  // The step: labels of the widest kind (the view's end) fit between neighbouring ticks.
  double step = tick_step(map, 60);
  for (int widen = 0; widen < 4; ++widen) {
    const float widest = std::max(text_width(format_tick(map.t1 - origin, step)),
                                  text_width(format_tick(map.t0 - origin, step)));
    if (step / map.ns_per_px() >= widest + 2 * kRulerLabelGap) break;
    step = tick_step(map, widest + 2 * kRulerLabelGap);
  }
  float last_end = -1e9f;
  for (double t = origin + std::ceil((map.t0 - origin) / step) * step; t <= map.t1; t += step) {
    const float x = float(map.x(t));
    ruler.ticks.push_back(x);
    RulerLabel label{x + 2, 0, 0, format_tick(t - origin, step)};
    label.width = text_width(label.text);
    if (label.x < last_end + kRulerLabelGap || label.x + label.width > right) continue;
    last_end = label.x + label.width;
    ruler.labels.push_back(std::move(label));
  }
  last_end = -1e9f;
  auto it = std::lower_bound(iterations.begin(), iterations.end(), map.t0,
                             [](const IterationSpan& s, double t) { return double(s.begin_ns) < t; });
  const size_t first_iteration_label = ruler.labels.size();
  // Zoomed into an iteration that began left of the view, its name is pinned to the left edge:
  // the row would otherwise be blank, or name only the next one.
  std::optional<RulerLabel> pinned;
  if (it != iterations.begin() && double(std::prev(it)->end_ns) > map.t0) {
    pinned = RulerLabel{float(map.x0) + 2, 0, 1, "it " + std::to_string(std::prev(it)->iteration)};
    pinned->width = text_width(pinned->text);
  }
  for (; it != iterations.end() && double(it->begin_ns) <= map.t1; ++it) {
    RulerLabel label{float(map.x(double(it->begin_ns))) + 2, 0, 1, "it " + std::to_string(it->iteration)};
    if (label.x < last_end + kRulerLabelGap) {
      // Too close to the last label: jump to the first iteration that begins clear of it.
      const double clear_t = map.t(last_end + kRulerLabelGap - 2);
      it = std::lower_bound(it, iterations.end(), clear_t,
                            [](const IterationSpan& s, double t) { return double(s.begin_ns) < t; });
      if (it == iterations.end() || double(it->begin_ns) > map.t1) break;
      label = RulerLabel{float(map.x(double(it->begin_ns))) + 2, 0, 1, "it " + std::to_string(it->iteration)};
    }
    label.width = text_width(label.text);
    if (label.x + label.width > right) break;
    last_end = label.x + label.width;
    ruler.labels.push_back(std::move(label));
  }
  if (pinned) {
    const bool room = ruler.labels.size() == first_iteration_label ||
                      pinned->x + pinned->width + kRulerLabelGap <= ruler.labels[first_iteration_label].x;
    if (room && pinned->x + pinned->width <= right) {
      ruler.labels.insert(ruler.labels.begin() + long(first_iteration_label), std::move(*pinned));
    }
  }
  name_playhead_iteration(ruler, first_iteration_label, map, iterations, text_width, playhead);
  return ruler;
}

}  // namespace dpscope::view
