// The critical path drawn over the timeline (K): the path of the narrated iteration
// (analysis/critical_path.h, docs/critical-path.md) on the clock shown, computed on a background
// thread when asked for and kept until the iteration, the run or the clock changes. No ImGui: the
// drawing is view_critical_path.cpp's.
#pragma once

#include <cstdint>
#include <future>
#include <memory>
#include <optional>
#include <string>

#include "analysis/clock_choice.h"
#include "analysis/cluster_clock.h"
#include "analysis/critical_path.h"

namespace dpscope::view {

// What the overlay shows for one (run, iteration, clock): the path, or why there is none.
struct PathOverlay {
  int trace = -1;  // index into App::traces
  int32_t iteration = -1;
  analysis::Clock clock = analysis::Clock::Measured;
  std::optional<analysis::CriticalPath> path;
  std::string why_none;  // one line, when path is empty
};

// The path `file` has for `iteration` on `clock`: an imported run's on its measured clock (HTA's
// graph), a dpscope run's on the cluster clock through `replay` (the replay the cluster view
// shows, so that the path lies on its spans). A dpscope run on the measured clock has none (its
// path is the cluster clock's: C), nor has an imported run on the cluster clock. Never throws:
// a refusal becomes why_none. Opens its own Reader; safe on any thread.
PathOverlay compute_path_overlay(const std::string& file, bool imported, int trace, int32_t iteration,
                                 analysis::Clock clock, std::shared_ptr<const analysis::ClusterClockRun> replay);

// One line for the timeline's corner: "critical path of iteration 2: 13.761 ms — cpu_bound 79.0 %,
// comm_bound 21.0 % (K)", or why there is none.
std::string path_overlay_text(const PathOverlay& overlay);

// The K toggle's state: whether the path is shown, the one shown and the one being computed.
// Owned by the App; used on the UI thread only.
class CriticalPathOverlay {
 public:
  bool shown() const { return shown_; }
  void toggle() { shown_ = !shown_; }
  void show() { shown_ = true; }
  // Starts computing the path for (trace, iteration, clock) unless it is the one held or being
  // computed; while another is computed, does nothing (the App asks every frame, so the newest
  // request starts once that one is done). `file`, `imported` and `replay` as
  // compute_path_overlay takes them.
  void want(const std::string& file, bool imported, int trace, int32_t iteration, analysis::Clock clock,
            std::shared_ptr<const analysis::ClusterClockRun> replay);
  // Takes a finished computation; true when one arrived.
  bool poll();
  // Blocks until the computation asked for is done (headless runs).
  void wait();
  bool pending() const { return pending_.valid(); }
  // The path held (of the last want that finished), or null.
  const PathOverlay* current() const { return current_ ? &*current_ : nullptr; }

 private:
  bool shown_ = false;
  std::optional<PathOverlay> current_;
  std::future<PathOverlay> pending_;
  int pending_trace_ = -1;
  int32_t pending_iteration_ = -1;
  analysis::Clock pending_clock_ = analysis::Clock::Measured;
};

}  // namespace dpscope::view
