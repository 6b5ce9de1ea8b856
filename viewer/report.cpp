// The --screenshot JSON line (see report.h): each part read from the App's state the way its
// panel reads it, so that the line and the picture cannot disagree.
#include "viewer/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>

#include "analysis/clock_choice.h"
#include "analysis/stragglers.h"

namespace dpscope::view {
namespace {

std::string number(const char* format, double value) {
  char text[64];
  std::snprintf(text, sizeof(text), format, value);
  return text;
}

std::string ms(double value) { return number("%.6f", value); }

// `text` inside a JSON string: quotes, backslashes and control characters escaped.
std::string json_escaped(const std::string& text) {
  std::string out;
  for (const char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char code[8];
      std::snprintf(code, sizeof(code), "\\u%04x", c);
      out += code;
    } else {
      out += c;
    }
  }
  return out;
}

// The Stats panel's figures as drawn: per rank the whole run's overlap, each iteration's and
// each bucket's exposed communication.
std::string overlap_json(const Analysis& analysis) {
  std::string out = "[";
  for (const analysis::RankStats& r : analysis.stats.ranks) {
    if (out.size() > 1) out += ", ";
    out += "{\"rank\": " + std::to_string(r.rank) + ", \"compute_ms\": " + ms(r.overlap.compute_ms) +
           ", \"comm_ms\": " + ms(r.overlap.comm_ms) + ", \"exposed_comm_ms\": " +
           ms(r.overlap.exposed_comm_ms) + ", \"iterations_exposed_comm_ms\": [";
    for (size_t i = 0; i < r.iterations.size(); ++i) {
      out += (i ? ", " : "") + ms(r.iterations[i].overlap.exposed_comm_ms);
    }
    out += "], \"buckets\": [";
    for (size_t b = 0; b < r.buckets.size(); ++b) {
      out += std::string(b ? ", " : "") + "{\"bucket\": " + std::to_string(r.buckets[b].bucket) +
             ", \"exposed_comm_ms\": " + ms(r.buckets[b].exposed_comm_ms) + "}";
    }
    out += "]}";
  }
  return out + "]";
}

// The Stats panel's memory tables and the memory lanes' labels as drawn: per rank the peak's
// total and, when they show the peak in the steps too, that one's (null otherwise).
std::string memory_json(const Analysis& analysis) {
  const bool steps_shown = analysis.steps_peak_elsewhere();
  std::string out = "[";
  for (const analysis::RankStats& r : analysis.stats.ranks) {
    if (out.size() > 1) out += ", ";
    out += "{\"rank\": " + std::to_string(r.rank) + ", \"peak_bytes\": " +
           std::to_string(r.memory_peak.total_bytes) + ", \"steps_peak_bytes\": " +
           (steps_shown && r.step_memory_peak.found() ? std::to_string(r.step_memory_peak.total_bytes) : "null") +
           "}";
  }
  return out + "]";
}

// The Stats panel's straggler line as drawn: "" with one rank.
std::string stragglers_line(const Analysis& analysis) {
  if (analysis.stats.ranks.size() < 2) return "";
  return analysis::stragglers_text(analysis.stats.stragglers);
}

// The what-if lanes' prediction as the What-if tab shows it, or null without one.
std::string whatif_json(const App& app) {
  if (!app.whatif) return "null";
  const WhatifLanes& w = *app.whatif;
  if (!w.error.empty()) return "{\"error\": \"" + json_escaped(w.error) + "\"}";
  return "{\"buckets\": " + std::to_string(w.bucket_bytes.size()) + ", \"measured_step_ms\": " +
         ms(w.measured_step_ms) + ", \"predicted_step_ms\": " + ms(w.predicted_step_ms) +
         ", \"measured_exposed_comm_ms\": " + ms(w.measured_exposed_comm_ms) +
         ", \"predicted_exposed_comm_ms\": " + ms(w.predicted_exposed_comm_ms) + "}";
}

// The main run's lanes per rank as the timeline arranges them (lane_order.h): each lane with
// spans under its label in drawing order, and those of them folded now (U).
std::string lanes_json(const App& app) {
  std::string out = "[";
  for (const RankData& rank : app.traces[0].model->ranks) {
    std::string lanes, folded;
    for (const DrawnLane& lane : rank.drawn_lanes) {
      const std::string quoted = "\"" + json_escaped(lane.label) + "\"";
      lanes += (lanes.empty() ? "" : ", ") + quoted;
      if (app.folded(rank, lane)) folded += (folded.empty() ? "" : ", ") + quoted;
    }
    out += (out.size() > 1 ? ", " : "") + std::string("{\"rank\": ") + std::to_string(rank.info.rank) +
           ", \"lanes\": [" + lanes + "], \"folded\": [" + folded + "]}";
  }
  return out + "]";
}

// What the frame's layout left visible (LayoutReport, measured where it was drawn), the text size
// the lanes were drawn at and their order.
std::string layout_json(const App& app) {
  const LayoutReport& layout = app.layout;
  return std::string("{\"controls_visible\": ") + (layout.controls_visible ? "true" : "false") +
         ", \"narration_clipped\": " + (layout.narration_clipped ? "true" : "false") +
         ", \"ranks_visible\": " + std::to_string(layout.ranks_visible) +
         ", \"clipped_labels\": " + std::to_string(layout.clipped_labels) +
         ", \"clipped_headers\": " + std::to_string(layout.clipped_headers) +
         ", \"timeline_font_scale\": " + number("%.2f", app.shown_timeline_font_scale) +
         ", \"lanes\": " + lanes_json(app) + "}";
}

// Per open trace, the ruler's visible range (ms from the run's start, on the clock shown) and
// the iteration at the playhead: the narrated one for the focused run.
std::string view_json(const App& app) {
  std::string out = "[";
  for (size_t i = 0; i < app.traces.size(); ++i) {
    const OpenTrace& t = app.traces[i];
    const double start = double(t.model->t_begin + t.offset_ns);
    const int32_t iteration = app.iteration_at_playhead(int(i));
    out += std::string(i ? ", " : "") + "{\"begin_ms\": " + ms((app.view_t0 - start) / 1e6) +
           ", \"end_ms\": " + ms((app.view_t1 - start) / 1e6) + ", \"iteration\": " +
           (iteration == trace::kNone ? "null" : std::to_string(iteration)) + "}";
  }
  return out + "]";
}

// The critical path shown (K): its region, length and keys as `dpscope stats --critical-path`
// gives them, how many of its segments were drawn, or why there is none; null when not shown.
std::string critical_path_json(const App& app) {
  if (!app.critical_path.shown()) return "null";
  const PathOverlay* overlay = app.critical_path.current();
  if (!overlay) return "{\"computing\": true}";
  if (!overlay->path) return "{\"why_none\": \"" + json_escaped(overlay->why_none) + "\"}";
  const analysis::CriticalPath& p = *overlay->path;
  std::string keys;
  for (const auto& [key, ns] : p.bound_ns) {
    keys += (keys.empty() ? "\"" : ", \"") + std::string(analysis::to_string(key)) + "\": " + number("%.6f", double(ns) / 1e6);
  }
  return "{\"region\": \"" + json_escaped(p.region) + "\", \"rank\": " + std::to_string(p.rank) +
         ", \"clock\": \"" + p.clock + "\", \"length_ms\": " + number("%.6f", double(p.length_ns) / 1e6) +
         ", \"bound_by_ms\": {" + keys + "}, \"segments\": " + std::to_string(p.segments.size()) +
         ", \"segments_drawn\": " + std::to_string(app.layout.critical_path_segments_drawn) + "}";
}

}  // namespace

// The process's peak resident memory so far (VmHWM, which counts the file pages it mapped too),
// MB, as JSON; null where /proc does not say.
std::string peak_resident_json() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    long long kb = 0;
    if (std::sscanf(line.c_str(), "VmHWM: %lld kB", &kb) == 1) return number("%.1f", double(kb) / 1024);
  }
  return "null";
}

// Each open trace's extent on the clock drawn, ms: [main] or [main, compare].
std::string run_ms_json(const App& app) {
  std::string out = "[";
  for (const OpenTrace& t : app.traces) {
    out += (out.size() > 1 ? ", " : "") + number("%.3f", double(t.model->t_end - t.model->t_begin) / 1e6);
  }
  return out + "]";
}

std::string headless_report(const App& app, const FrameTimes& times) {
  const Analysis* analysis = app.traces[0].analysis.get();
  // link() has no quote or backslash to escape.
  return "{\"open_ms\": " + number("%.1f", times.open_ms) + ", \"memory_ms\": " + number("%.1f", times.memory_ms) +
         ", \"frames\": " + std::to_string(times.frames) +
         ", \"frame_ms_median\": " + number("%.2f", times.median_ms) + ", \"frame_ms_max\": " +
         number("%.2f", times.max_ms) + ", \"peak_resident_mb\": " + peak_resident_json() +
         ", \"link\": \"" + app.link() + "\", \"clock\": \"" +
         std::string(::dpscope::analysis::to_string(app.clock())) + "\", \"clock_label\": \"" +
         json_escaped(app.clock_label()) + "\", \"run_ms\": " + run_ms_json(app) + ", \"narration\": \"" +
         json_escaped(app.narration) + "\", \"view\": " + view_json(app) + ", \"layout\": " + layout_json(app) +
         ", \"right_tab\": \"" +
         app.right_tab + "\", \"overlap\": " + (analysis ? overlap_json(*analysis) : "[]") +
         ", \"memory\": " + (analysis ? memory_json(*analysis) : "[]") + ", \"stragglers\": \"" +
         json_escaped(analysis ? stragglers_line(*analysis) : "") + "\", \"whatif\": " + whatif_json(app) +
         ", \"critical_path\": " + critical_path_json(app) + ", \"deep_link\": \"" +
         json_escaped(deep_link_query(deep_link_of(app))) + "\"}";
}

DeepLink deep_link_of(const App& app) {
  DeepLink link;
  if (app.narrated_iteration() != trace::kNone && app.narrated_step() >= 0) {
    link.iteration = app.narrated_iteration();
    link.step = app.narrated_step();
  }
  if (app.focus_rank != 0) link.rank = app.focus_rank;
  if (app.clock() != analysis::Clock::Measured) link.clock = app.clock();
  const float scale = std::round(app.font_scale / std::max(app.content_scale, 0.25f) * 100) / 100;
  if (scale != 1) link.scale = std::clamp(scale, 1.0f, 3.0f);
  if (theme_kind() != ThemeKind::Dark) link.theme = to_string(theme_kind());
  return link;
}

FrameTimes frame_times(const std::vector<double>& times, double open_ms, double memory_ms) {
  if (times.empty()) return FrameTimes{open_ms, memory_ms, 0, 0, 0};
  std::vector<double> sorted(times.begin(), times.end() - (times.size() > 1 ? 1 : 0));
  std::sort(sorted.begin(), sorted.end());
  const size_t n = sorted.size();
  FrameTimes out;
  out.open_ms = open_ms;
  out.memory_ms = memory_ms;
  out.frames = int(times.size());
  out.median_ms = n % 2 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
  out.max_ms = sorted.back();
  return out;
}

}  // namespace dpscope::view
