// The GLFW + OpenGL 3 window with Dear ImGui (its input count: Note [Quiet when idle]), the
// interactive frame loop with its loading screen, and the --screenshot loop: timed frames
// (optionally sweeping the zoom), the last read back into a PNG through stb_image_write.
#include "viewer/window.h"

#include <GLFW/glfw3.h>
#include <imgui.h>
#include <imgui_impl_glfw.h>
#include <imgui_impl_opengl3.h>
#include <stb_image_write.h>
#include <unistd.h>

#ifdef __EMSCRIPTEN__
#include <emscripten/html5.h>
#endif

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <future>
#include <memory>
#include <stdexcept>
#include <thread>
#include <vector>

#include "trace/error.h"
#include "viewer/opening.h"
#include "viewer/report.h"

namespace dpscope::view {

namespace {

// Frames still to draw after the last input (See Note [Quiet when idle]); GLFW calls back on the
// main thread only, and there is one window.
int frames_after_input = kFramesAfterInput;

void on_input() { frames_after_input = kFramesAfterInput; }

// GLFW's own words for its last failure (set from its error callback, on the main thread), so a
// window that cannot open says why: no DISPLAY, a display that refused the connection, no GLX.
std::string last_glfw_error;

std::string glfw_says() { return last_glfw_error.empty() ? std::string() : " (GLFW: " + last_glfw_error + ")"; }

// Installed before ImGui's backend, which keeps them and calls them from its own.
void install_input_callbacks(GLFWwindow* window) {
  glfwSetCursorPosCallback(window, [](GLFWwindow*, double, double) { on_input(); });
  glfwSetMouseButtonCallback(window, [](GLFWwindow*, int, int, int) { on_input(); });
  glfwSetScrollCallback(window, [](GLFWwindow*, double, double) { on_input(); });
  glfwSetKeyCallback(window, [](GLFWwindow*, int, int, int, int) { on_input(); });
  glfwSetCharCallback(window, [](GLFWwindow*, unsigned int) { on_input(); });
  glfwSetCursorEnterCallback(window, [](GLFWwindow*, int) { on_input(); });
  glfwSetWindowFocusCallback(window, [](GLFWwindow*, int) { on_input(); });
  glfwSetWindowSizeCallback(window, [](GLFWwindow*, int, int) { on_input(); });
  glfwSetWindowRefreshCallback(window, [](GLFWwindow*) { on_input(); });
}

// The back buffer as PNG: OpenGL's rows go bottom-up, PNG's top-down; alpha dropped, the frame
// is opaque.
void write_png(const std::string& path, int width, int height) {
  std::vector<unsigned char> pixels(size_t(width) * size_t(height) * 4);
  glPixelStorei(GL_PACK_ALIGNMENT, 1);
  glReadBuffer(GL_BACK);
  glReadPixels(0, 0, width, height, GL_RGBA, GL_UNSIGNED_BYTE, pixels.data());
  std::vector<unsigned char> rgb(size_t(width) * size_t(height) * 3);
  for (int y = 0; y < height; ++y) {
    const unsigned char* src = pixels.data() + size_t(height - 1 - y) * size_t(width) * 4;
    unsigned char* dst = rgb.data() + size_t(y) * size_t(width) * 3;
    for (int x = 0; x < width; ++x) {
      dst[3 * x] = src[4 * x];
      dst[3 * x + 1] = src[4 * x + 1];
      dst[3 * x + 2] = src[4 * x + 2];
    }
  }
  if (!stbi_write_png(path.c_str(), width, height, 3, rgb.data(), width * 3)) {
    throw std::runtime_error("cannot write the screenshot " + path +
                             " (check that its directory exists and is writable)");
  }
}

}  // namespace

Window::Window(const std::string& title, int width, int height) {
  glfwSetErrorCallback([](int, const char* description) { last_glfw_error = description; });
  if (!glfwInit()) {
    throw std::runtime_error("cannot open a window: GLFW could not reach a display" + glfw_says() +
                             "; set DISPLAY, or run headless modes under `xvfb-run -a dpscope-view ...`");
  }
  glfwWindowHint(GLFW_CONTEXT_VERSION_MAJOR, 3);
  glfwWindowHint(GLFW_CONTEXT_VERSION_MINOR, 0);
  window_ = glfwCreateWindow(width, height, title.c_str(), nullptr, nullptr);
  if (!window_) {
    glfwTerminate();
    throw std::runtime_error("cannot create an OpenGL 3 window" + glfw_says() +
                             "; install libgl1-mesa-dri for Mesa's software renderer, or run under "
                             "`xvfb-run -a`");
  }
  glfwMakeContextCurrent(window_);
  glfwSwapInterval(1);
  IMGUI_CHECKVERSION();
  ImGui::CreateContext();
  ImGui::GetIO().IniFilename = nullptr;  // no imgui.ini next to the user's traces
  ImGui::StyleColorsDark();
  install_input_callbacks(window_);
  ImGui_ImplGlfw_InitForOpenGL(window_, true);
#ifdef __EMSCRIPTEN__
  ImGui_ImplOpenGL3_Init("#version 300 es");  // WebGL 2 (scripts/web builds with MAX_WEBGL_VERSION=2)
#else
  ImGui_ImplOpenGL3_Init("#version 130");
#endif
}

Window::~Window() {
  ImGui_ImplOpenGL3_Shutdown();
  ImGui_ImplGlfw_Shutdown();
  ImGui::DestroyContext();
  glfwDestroyWindow(window_);
  glfwTerminate();
}

bool Window::should_close() const { return glfwWindowShouldClose(window_); }

void Window::close() { glfwSetWindowShouldClose(window_, 1); }

void Window::resize(int width, int height) {
  int current_width = 0, current_height = 0;
  glfwGetWindowSize(window_, &current_width, &current_height);
  if (width != current_width || height != current_height) glfwSetWindowSize(window_, width, height);
}

bool Window::input_pending() const { return frames_after_input > 0; }

float Window::content_scale() const {
#ifdef __EMSCRIPTEN__
  return float(emscripten_get_device_pixel_ratio());
#else
  float x = 1, y = 1;
  glfwGetWindowContentScale(window_, &x, &y);
  return std::max(x, y);
#endif
}

void Window::set_font_scale(float scale, float timeline_scale) {
  scale = std::clamp(scale, kMinFontScale, kMaxFontScale);
  timeline_scale = std::clamp(timeline_scale, kMinFontScale, scale);
  if (scale == font_scale_ && timeline_scale == timeline_scale_) return;
  const bool style_changes = scale != font_scale_;
  font_scale_ = scale;
  timeline_scale_ = timeline_scale;
  ImGuiIO& io = ImGui::GetIO();
  io.Fonts->Clear();
  ImFontConfig config;
  config.SizePixels = std::round(13 * scale);
  io.Fonts->AddFontDefault(&config);
  if (timeline_scale < scale) {
    config.SizePixels = std::round(13 * timeline_scale);
    io.Fonts->AddFontDefault(&config);
  }
  ImGui_ImplOpenGL3_DestroyFontsTexture();
  ImGui_ImplOpenGL3_CreateFontsTexture();
  if (!style_changes) return;
  ImGuiStyle& style = ImGui::GetStyle();
  style = ImGuiStyle();
  set_theme(theme_kind());
  style.ScaleAllSizes(scale);
}

void Window::begin_frame(double max_wait_s) {
  if (frames_after_input > 0) {
    --frames_after_input;
    glfwPollEvents();
  } else if (max_wait_s <= 0) {
    glfwPollEvents();
  } else if (std::isinf(max_wait_s)) {
    glfwWaitEvents();
  } else {
    glfwWaitEventsTimeout(max_wait_s);
  }
  ImGui_ImplOpenGL3_NewFrame();
  ImGui_ImplGlfw_NewFrame();
  ImGui::NewFrame();
}

void Window::end_frame(const std::string& capture_png) {
  ImGui::Render();
  int width = 0, height = 0;
  glfwGetFramebufferSize(window_, &width, &height);
  glViewport(0, 0, width, height);
  const ImVec4 ground = ImGui::ColorConvertU32ToFloat4(theme().background);
  glClearColor(ground.x, ground.y, ground.z, 1);
  glClear(GL_COLOR_BUFFER_BIT);
  ImGui_ImplOpenGL3_RenderDrawData(ImGui::GetDrawData());
  if (!capture_png.empty()) write_png(capture_png, width, height);
  glfwSwapBuffers(window_);
  glFinish();  // the frame is drawn when this returns, so frame times include the rendering
}

namespace {

std::string window_title(const AppOptions& options) {
  return "dpscope-view: " + (options.shown_name.empty() ? options.path : options.shown_name);
}

}  // namespace

int run_windowed(const AppOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  Window window(window_title(options), options.window_width, options.window_height);
  set_theme(options.theme);
  const float font_scale = options.font_scale > 0 ? options.font_scale : window.content_scale();
  Opening opening(options);
  std::unique_ptr<App> app;
  double open_ms = 0;
  double memory_ms = 0;  // when the memory samples were in (Note [Memory after the first frame])
  // The last frames' drawing times (without the idle waits), for F9's line.
  std::vector<double> frame_ms;
  constexpr size_t kFramesTimed = 120;
  while (!window.should_close()) {
    window.set_font_scale(app ? app->font_scale : font_scale, app ? app->timeline_font_scale : font_scale);
    if (app) app->shown_timeline_font_scale = window.timeline_scale();
    window.begin_frame(app ? app->idle_wait_seconds() : opening.wait_seconds());
    const auto frame_start = std::chrono::steady_clock::now();
    if (!app) {
      app = opening.poll(font_scale);
      if (app) {
        open_ms = std::chrono::duration<double, std::milli>(frame_start - start).count();
        app->content_scale = window.content_scale();
      }
    }
    if (app) {
      app->frame();
      if (memory_ms == 0 && !app->memory_pending()) {
        memory_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
      }
    } else {
      opening.draw(&window);
    }
    window.end_frame();
    if (!app) continue;
    if (frame_ms.size() == kFramesTimed) frame_ms.erase(frame_ms.begin());
    frame_ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - frame_start).count());
    // F9: the --screenshot line for the window as it is now, at once (a script may be waiting).
    if (app->take_report_request()) {
      std::printf("%s\n", headless_report(*app, frame_times(frame_ms, open_ms, memory_ms)).c_str());
      std::fflush(stdout);
    }
    // G: the browser viewer's link to this moment (docs/web.md), for a slide or a script.
    if (app->take_link_request()) {
      std::printf("link: ?%s\n", deep_link_query(deep_link_of(*app)).c_str());
      std::fflush(stdout);
    }
  }
  if (!opening.error().empty()) throw std::runtime_error(opening.error());
  return 0;
}

namespace {

// Headless --live: the file LiveSource gives for `path` (waiting up to a minute for a run to
// start writing), the source left in `source` for the App to follow.
std::string wait_for_live_file(const std::string& path, std::unique_ptr<LiveSource>* source) {
  *source = std::make_unique<LiveSource>(path, live_scratch_path(), std::chrono::milliseconds(100));
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::minutes(1);
  for (;;) {
    const std::string file = (*source)->poll();
    if (!file.empty()) return file;
    if (std::chrono::steady_clock::now() > give_up) {
      throw std::runtime_error(path + ": no trace appeared there in a minute; start the run (dpscope "
                               "launch --trace-dir " + path + " ...) or name an existing trace");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

// The state the headless frames show: the legend, folded ranks, the text size, one step.
void set_up_screenshot(Window& window, App& app, const HeadlessOptions& headless, float font_scale) {
  // The frames show the trace, not wherever the display's pointer happens to be: Xvfb's starts
  // at the screen's centre, over the timeline, where it would hover a span and draw its tooltip.
  ImGui::GetIO().ConfigFlags |= ImGuiConfigFlags_NoMouse;
  app.show_legend = headless.legend;
  if (headless.critical_path) app.critical_path.show();
  if (headless.fold_lanes) app.lane_folding = LaneFolding::Folded;
  for (size_t t = 0; t < app.traces.size(); ++t) {
    for (const int rank : headless.folded) app.collapsed[{int(t), rank}] = true;
  }
  app.font_scale = font_scale;
  window.set_font_scale(app.font_scale, app.timeline_font_scale);
  if (headless.iteration < 0) return;
  app.focus_trace = headless.run;
  app.focus_rank = headless.rank;
  if (!app.go_to_step(headless.iteration, headless.step)) {
    throw std::runtime_error(std::string(headless.run ? "run B's " : "") + "rank " + std::to_string(headless.rank) + " has no iteration " +
                             std::to_string(headless.iteration) + " with a step " +
                             std::to_string(headless.step) +
                             " in this trace; choose another --iteration, --step or --rank");
  }
}

// The zoom sweep: from the whole run `whole` to the bucket `bucket` (axis ns) as `f` goes from 0
// to 1, geometric in width so that every zoom level gets the same number of frames; the centre
// moves in step so the bucket stays in view.
std::pair<double, double> swept_view(std::pair<double, double> whole, std::pair<double, double> bucket, double f) {
  const auto [whole0, whole1] = whole;
  const auto [b0, b1] = bucket;
  const double w0 = whole1 - whole0, w1 = std::max(b1 - b0, 100.0);
  const double width = w0 * std::pow(w1 / w0, f);
  const double progress = std::log(w0 / width) / std::log(w0 / w1);
  const double c = (whole0 + whole1) / 2 + progress * ((b0 + b1) / 2 - (whole0 + whole1) / 2);
  return {c - width / 2, c + width / 2};
}

// Draws the frames, the last into the PNG; returns each frame's milliseconds.
std::vector<double> draw_frames(Window& window, App& app, const HeadlessOptions& headless, bool live) {
  glfwSwapInterval(0);  // time the drawing, not the display's refresh
  const int frames = std::max(kFramesForAFinishedLayout, headless.frames);
  const std::pair<double, double> whole{app.view_t0, app.view_t1};
  const std::pair<double, double> bucket = app.bucket_range();
  std::vector<double> times;
  for (int i = 0; i < frames; ++i) {
    if (headless.zoom_sweep && frames > 1) {
      const auto [t0, t1] = swept_view(whole, bucket, double(i) / double(frames - 1));
      app.set_view(t0, t1);
    }
    const auto start = std::chrono::steady_clock::now();
    window.set_font_scale(app.font_scale, app.timeline_font_scale);
    app.shown_timeline_font_scale = window.timeline_scale();
    window.begin_frame();
    app.frame();
    window.end_frame(i == frames - 1 ? headless.png : "");
    const auto end = std::chrono::steady_clock::now();
    times.push_back(std::chrono::duration<double, std::milli>(end - start).count());
    if (i == 0) app.critical_path.wait();  // asked for in the first frame, drawn in the next
    if (live) std::this_thread::sleep_until(start + std::chrono::milliseconds(33));
  }
  return times;
}

}  // namespace

int run_headless(const AppOptions& options, const HeadlessOptions& headless) {
  const auto start = std::chrono::steady_clock::now();
  std::unique_ptr<LiveSource> source;
  const std::string path = options.live ? wait_for_live_file(options.path, &source) : options.path;
  Loaded loaded = load_both(path, options.compare_path, nullptr,
                            options.live ? MemorySamples::WithEvents : MemorySamples::AfterFirstFrame);
  const double open_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  Window window(window_title(options), options.window_width, options.window_height);
  set_theme(options.theme);
  App app(options, loaded.main, loaded.compare, std::move(loaded.main_memory), std::move(loaded.compare_memory));
  if (source) app.follow(std::move(source));
  app.wait_for_memory();
  const double memory_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  app.wait_for_analysis();  // and the cluster views of --clock cluster
  // --clock cluster on a trace the cluster clock cannot replay: say why and fail, rather than
  // draw the measured clock under a name that is not its own.
  if (app.clock() != options.clock) throw std::runtime_error(app.clock_error());
  set_up_screenshot(window, app, headless, options.font_scale > 0 ? options.font_scale : 1);
  // One frame before the timed ones, as the window draws its loading screen before the App's
  // first frame: the font atlas and the GL programs are made there (15-25 ms under llvmpipe), not
  // in the first frame the JSON line counts.
  window.set_font_scale(app.font_scale, app.timeline_font_scale);
  window.begin_frame();
  window.end_frame();
  const std::vector<double> times = draw_frames(window, app, headless, options.live);
  std::printf("%s\n", headless_report(app, frame_times(times, open_ms, memory_ms)).c_str());
  std::fflush(stdout);
  if (options.live) {
    std::fprintf(stderr, "dpscope-view: live: %d reloads, %lld events in the last one, %lld rows read by the reloads; "
                 "followed %s after %d merges of rank files\n",
                 app.live_reloads(), static_cast<long long>(app.traces[0].model->events),
                 static_cast<long long>(app.live_rows_read()), app.live_status().c_str(), app.live_merges());
  }
  return 0;
}

}  // namespace dpscope::view
