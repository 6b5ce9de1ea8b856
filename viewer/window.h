// The window, the frame loop and the headless mode of dpscope-view: one GLFW window with an
// OpenGL 3 context and Dear ImGui on it; interactive frames until closed, or (--screenshot) a
// fixed number of timed frames whose last one is written as a PNG.
#pragma once

#include <limits>
#include <string>
#include <vector>

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
// The font scales Window::set_font_scale accepts (others are clamped to them).
inline constexpr float kMinFontScale = 0.75f;
inline constexpr float kMaxFontScale = 3.0f;
inline constexpr double kWaitForInput = std::numeric_limits<double>::infinity();

class App;

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
  // Takes the window's events and starts an ImGui frame. With `max_wait_s` > 0 it first sleeps
  // until an input arrives or that many seconds pass (infinity: until an input), unless an input
  // came within the last few frames, which ImGui needs to settle (hover, focus, a release).
  // See Note [Quiet when idle].
  void begin_frame(double max_wait_s = 0);
  // Renders the ImGui frame; `capture_png` (if not empty) receives the frame, read back before
  // it is shown. Throws std::runtime_error naming the file if it cannot be written.
  void end_frame(const std::string& capture_png = "");
  GLFWwindow* handle() const { return window_; }
  // Draws text at `scale` times Dear ImGui's 13 px font, and widgets in proportion, from the next
  // frame on (rebuilds the font atlas when the scale changes; call between frames).
  void set_font_scale(float scale);
  // The monitor's content scale (2 on a HiDPI screen, 1 under Xvfb): the default font scale.
  float content_scale() const;

 private:
  GLFWwindow* window_ = nullptr;
  float font_scale_ = 1;
};

struct HeadlessOptions {
  std::string png;          // where the last frame goes
  int frames = 1;           // frames to draw
  bool zoom_sweep = false;  // sweep the view from the whole run to one bucket's all-reduce
  bool live = false;        // pace frames at ~30 per second so a growing file can be followed
  // Show one iteration of rank `rank` (-1: none), with the playhead on its step `step` — the
  // picture of one moment with its narration line and buckets.
  bool legend = false;      // the legend window open
  std::vector<int> folded;  // rank indices whose lane groups are folded (every open trace)
  float font_scale = 1;     // text size, times the 13 px font
  int iteration = -1;
  int step = 0;
  int rank = 0;
};

// Draws the frames, writes the PNG and prints one JSON line on stdout (docs/viewer.md):
// {"open_ms": ..., "frames": N, "frame_ms_median": ..., "frame_ms_max": ..., "link": the header's
// "emulated link ..." or "", "narration": the narration line as drawn (playback.h),
// "overlap": [{"rank",
// "compute_ms", "comm_ms", "exposed_comm_ms", "iterations_exposed_comm_ms": [...], "buckets":
// [{"bucket", "exposed_comm_ms"}]}]} — "overlap" holds the Stats panel's figures as drawn. Returns
// the exit status (0). Throws std::runtime_error if the PNG cannot be written.
int run_headless(Window& window, App& app, const HeadlessOptions& options, double open_ms);

}  // namespace dpscope::view
