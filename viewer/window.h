// The window of dpscope-view and the loops that draw the App in it: one GLFW window with an
// OpenGL 3 context and Dear ImGui on it; interactive frames until it is closed (loading with a
// progress bar first), or (--screenshot) a fixed number of timed frames, the last one a PNG.
#pragma once

#include <string>
#include <vector>

#include "viewer/app.h"

struct GLFWwindow;

namespace dpscope::view {

// Note [Quiet when idle]
// A viewer left open on a laptop in a lecture must not spin the fan: it redraws only when
// something can have changed. The window counts inputs (GLFW callbacks installed before ImGui's,
// which chains them) and draws kFramesAfterInput frames after each; otherwise begin_frame sleeps
// in glfwWaitEventsTimeout for as long as the app allows (App::idle_wait_seconds): not at all
// while something moves without input (a held pan key, a drag, a load), the live follower's
// interval while following a run, the text cursor's blink while typing, and until the next
// input when nothing moves. bench/viewer_idle.sh measures it; tests/viewer checks it.
inline constexpr int kFramesAfterInput = 3;

// Owns the GLFW window and the ImGui context. Thread-safety: main thread only (GLFW's rule).
class Window {
 public:
  // Opens a window of width x height (hidden windows do not render under every X server, so it
  // is shown even in headless runs, which run under xvfb-run). Throws std::runtime_error saying
  // how to get a display when none can be opened.
  Window(const std::string& title, int width, int height);
  ~Window();
  Window(const Window&) = delete;
  Window& operator=(const Window&) = delete;

  bool should_close() const;
  // Asks the frame loop to end after this frame (the error dialog's Quit).
  void close();
  // Takes the window's events and starts an ImGui frame. With `max_wait_s` > 0 it first sleeps
  // until an input arrives or that many seconds pass (kWaitForInput: until an input), unless an
  // input came within the last few frames, which ImGui needs to settle (hover, focus, a release).
  // See Note [Quiet when idle].
  void begin_frame(double max_wait_s = 0);
  // Renders the ImGui frame; `capture_png` (if not empty) receives the frame, read back before
  // it is shown. Throws std::runtime_error naming the file if it cannot be written.
  void end_frame(const std::string& capture_png = "");
  // Draws text at `scale` times Dear ImGui's 13 px font, and widgets in proportion, from the next
  // frame on (clamped to [kMinFontScale, kMaxFontScale]; rebuilds the font atlas when the scale
  // changes; call between frames). A `timeline_scale` below it adds a second font of that size,
  // the atlas's second, which App::draw_panels pushes for the lanes' text where the panel is
  // short of height (Note [The timeline's text size]).
  void set_font_scale(float scale, float timeline_scale);
  // The text size of the lanes' font as last set (the scale, when there is no second font).
  float timeline_scale() const { return timeline_scale_; }
  // Sets the window's size in pixels (the browser's canvas follows the page's layout), when it
  // differs from the current one.
  void resize(int width, int height);
  // Whether an input came within the last kFramesAfterInput frames (Note [Quiet when idle]): the
  // browser's frame loop, which the page's animation frames call, draws only then or when the
  // App asks to.
  bool input_pending() const;
  // The monitor's content scale (2 on a HiDPI screen, 1 under Xvfb): the default font scale.
  float content_scale() const;

 private:
  GLFWwindow* window_ = nullptr;
  float font_scale_ = 1;
  float timeline_scale_ = 1;
};

// The fewest frames --screenshot draws. Dear ImGui lays out a tab bar, a table's columns and an
// auto-sized window on their first frame and draws them settled on the next, so a first frame
// lacks the tab bars and has the Stats table collapsed: every view here is settled by frame 2
// (compared PNGs, with the legend, at text size 2, stepped, on the cluster clock).
// One more where the timeline's text size changes (Note [The timeline's text size]): the first
// frame chooses it, the second draws with it.
inline constexpr int kFramesForAFinishedLayout = 4;

// What --screenshot draws; the rest (the traces, --live, --font-scale, the theme) is AppOptions'.
struct HeadlessOptions {
  std::string png;          // where the last frame goes
  int frames = kFramesForAFinishedLayout;  // frames to draw; fewer are raised to that
  bool zoom_sweep = false;  // sweep the view from the whole run to one bucket's all-reduce
  bool legend = false;      // the legend window open
  bool fold_lanes = false;  // every rank's secondary lanes folded (U)
  std::vector<int> folded;  // rank indices whose lane groups are folded (every open trace)
  // Show one iteration of rank `rank` (-1: none), with the playhead on its step `step` — the
  // picture of one moment with its narration line and buckets.
  int iteration = -1;
  int step = 0;
  int rank = 0;
  int run = 0;  // with --compare: whose iteration and steps, 0 (A) or 1 (B), as Tab switches
  bool critical_path = false;  // the narrated iteration's critical path drawn (K)
};

// The interactive viewer: loads `options`' traces on a thread while showing progress (with
// --live, waits for the run's first file, saying what it waits for), then draws the App until
// the window is closed. Returns 0; a load error stays on screen in a dialog until the window is
// closed, then is thrown (std::runtime_error) for the caller to print.
int run_windowed(const AppOptions& options);

// --screenshot: loads the traces (with --live, waiting up to a minute for a run to start
// writing), draws `headless.frames` frames (with --live paced at ~30 per second, so that a
// growing file is followed) at --font-scale or 1, writes the last as the PNG and prints one JSON
// line on stdout (report.h; docs/viewer.md), and with --live one line of the follower's counts
// on stderr. Returns the exit status (0). Throws std::runtime_error (trace::TraceError for a file)
// saying what failed: a load, the window, the PNG, a step that is not there.
int run_headless(const AppOptions& options, const HeadlessOptions& headless);

}  // namespace dpscope::view
