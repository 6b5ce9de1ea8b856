// The one JSON line that `dpscope-view --screenshot` prints, and F9 in the window (docs/viewer.md): the frames' timing
// and the figures as the panels draw them (overlap, memory, stragglers, the what-if prediction),
// so that tests and scripts check what a user sees without reading pixels.
#pragma once

#include <string>
#include <vector>

#include "viewer/app.h"
#include "viewer/deep_link.h"

namespace dpscope::view {

// How the headless frames went (window.h's run_headless measures them).
struct FrameTimes {
  double open_ms = 0;  // loading the traces, to a drawable model
  // To the memory samples in (Note [Memory after the first frame]); open_ms when they came with
  // the open, 0 while still being read.
  double memory_ms = 0;
  int frames = 0;
  double median_ms = 0, max_ms = 0;  // per frame, the one that wrote the PNG left out
};

// The line, without its newline:
// {"open_ms": ..., "memory_ms": ..., "frames": N, "frame_ms_median": ..., "frame_ms_max": ..., "peak_resident_mb": the
// process's peak resident memory so far, mapped file pages included (null without /proc), "link": the header's
// "emulated link ..." or "", "clock": "measured" | "cluster" (the clock drawn, --clock / C),
// "clock_label": the header's words for it (analysis::clock_text), "run_ms": each open trace's
// extent on that clock, [main] or [main, compare] (first begin to last end, ms), "narration": the narration line as
// drawn (playback.h), "view": per open trace {"begin_ms", "end_ms", "iteration"} (the ruler's
// range in ms from that run's start on the clock shown; the iteration at the playhead, the
// narrated one for the focused run, or null), "layout": what the frame left visible
// (LayoutReport, with "timeline_font_scale", the lanes' text size, and "lanes": the main run's
// [{"rank", "lanes": labels in drawing order, "folded": those U folds now}], lane_order.h),
// "right_tab": the right
// panel's tab,
// "overlap": [{"rank", "compute_ms", "comm_ms", "exposed_comm_ms", "iterations_exposed_comm_ms":
// [...], "buckets": [{"bucket", "exposed_comm_ms"}]}], "memory": [{"rank", "peak_bytes",
// "steps_peak_bytes"}], "stragglers": the Stats panel's line, "whatif": the What-if tab's figures
// or null, "critical_path": K's path or null, "deep_link": deep_link_of's query (G)}. The figures are the main trace's, as its analysis holds them once done.
std::string headless_report(const App& app, const FrameTimes& times);
// The link to what `app` shows now (deep_link.h), without the traces' URLs: the focused run's
// narrated iteration and step (none when the playhead is on no step), the focus rank, the clock,
// the presenter size (font_scale over content_scale, when not 1) and the theme.
DeepLink deep_link_of(const App& app);
// The median and the longest of the frames' drawing `times` (ms) after an open of `open_ms`, the
// memory samples in at `memory_ms`; the last frame, which wrote the PNG and read it back, is left
// out when others exist.
FrameTimes frame_times(const std::vector<double>& times, double open_ms, double memory_ms);

}  // namespace dpscope::view
