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
  ImGui_ImplOpenGL3_Init("#version 130");
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

float Window::content_scale() const {
  float x = 1, y = 1;
  glfwGetWindowContentScale(window_, &x, &y);
  return std::max(x, y);
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

struct Loaded {
  std::shared_ptr<const Model> main, compare;
};

Loaded load_both(const std::string& path, const std::string& compare, LoadProgress* progress) {
  Loaded loaded;
  loaded.main = load_model(path, progress);
  if (!compare.empty()) loaded.compare = load_model(compare, progress);
  return loaded;
}

// Where --live merges a run directory's rank files while it follows them.
std::string live_scratch_path() {
  return (std::filesystem::temp_directory_path() /
          ("dpscope-view-live-" + std::to_string(::getpid()) + ".sqlite"))
      .string();
}

// The interactive viewer before it has an App: the traces loading on a thread (with --live, the
// run's first file awaited first: the trace may not exist yet), then a load error waiting in a
// dialog for the user.
class Opening {
 public:
  explicit Opening(const AppOptions& options) : options_(options) {
    if (options.live) {
      source_ = std::make_unique<LiveSource>(options.path, live_scratch_path());
    } else {
      pending_ = std::async(std::launch::async, load_both, options.path, options.compare_path, &progress_);
    }
  }
  Opening(const Opening&) = delete;
  Opening& operator=(const Opening&) = delete;
  // A load still running stops early; pending_'s destructor waits for it (progress_ outlives it).
  ~Opening() { progress_.cancel = true; }

  // The App once the load is done (it follows the live source, if any), else null; a load
  // error is kept for the dialog, but a --live file caught mid-write is tried again.
  std::unique_ptr<App> poll(float font_scale) {
    if (source_ && !pending_.valid()) {
      live_file_ = source_->poll();
      if (!live_file_.empty()) {
        pending_ = std::async(std::launch::async, load_both, live_file_, options_.compare_path, &progress_);
      }
    }
    if (!error_.empty() || !pending_.valid() ||
        pending_.wait_for(std::chrono::seconds(0)) != std::future_status::ready) {
      return nullptr;
    }
    try {
      Loaded loaded = pending_.get();
      auto app = std::make_unique<App>(options_, loaded.main, loaded.compare);
      app->font_scale = app->default_font_scale = font_scale;
      // A class starts on one iteration it can read, not on the whole run's grey blocks; a live
      // run is followed at its end instead.
      if (source_) {
        app->follow(std::move(source_));
      } else {
        app->show_typical_iteration();
      }
      return app;
    } catch (const trace::TraceError& e) {
      if (!source_) error_ = e.what();
    } catch (const std::exception& e) {
      error_ = e.what();
    }
    return nullptr;
  }

  // How long the frame loop may sleep: the progress bar moves without input; an error waits.
  double wait_seconds() const {
    constexpr double kLoadingFrameSeconds = 0.05;
    return error_.empty() ? kLoadingFrameSeconds : kWaitForInput;
  }

  // The error dialog (its Quit closes `window`), or the progress box.
  void draw(Window& window) const {
    if (!error_.empty()) {
      draw_error(window);
    } else {
      draw_progress();
    }
  }

  const std::string& error() const { return error_; }

 private:
  void draw_error(Window& window) const {
    ImGui::OpenPopup("Cannot open the trace");
    if (ImGui::BeginPopupModal("Cannot open the trace", nullptr, ImGuiWindowFlags_AlwaysAutoResize)) {
      ImGui::PushTextWrapPos(600);
      ImGui::TextUnformatted(error_.c_str());
      ImGui::PopTextWrapPos();
      if (ImGui::Button("Quit")) window.close();
      ImGui::EndPopup();
    }
  }

  void draw_progress() const {
    const ImGuiViewport* viewport = ImGui::GetMainViewport();
    ImGui::SetNextWindowPos(ImVec2(viewport->Size.x / 2, viewport->Size.y / 2), 0, ImVec2(0.5f, 0.5f));
    ImGui::Begin("loading", nullptr, ImGuiWindowFlags_AlwaysAutoResize | ImGuiWindowFlags_NoDecoration);
    if (source_ && !pending_.valid()) {
      ImGui::Text("live: %s", source_->status().c_str());
      ImGui::TextDisabled("(it opens as soon as a rank has written its first events)");
    } else {
      ImGui::Text("loading %s", (source_ ? live_file_ : options_.path).c_str());
    }
    ImGui::ProgressBar(float(progress_.fraction.load()), ImVec2(400, 0));
    ImGui::End();
  }

  const AppOptions& options_;
  LoadProgress progress_;
  std::unique_ptr<LiveSource> source_;
  std::string live_file_;  // the file being loaded for --live
  std::future<Loaded> pending_;
  std::string error_;
};

// The median and the longest of `times`; the frame that writes the PNG also reads it back, so
// it is left out when others exist.
FrameTimes frame_times(const std::vector<double>& times, double open_ms) {
  std::vector<double> sorted(times.begin(), times.end() - (times.size() > 1 ? 1 : 0));
  std::sort(sorted.begin(), sorted.end());
  const size_t n = sorted.size();
  FrameTimes out;
  out.open_ms = open_ms;
  out.frames = int(times.size());
  out.median_ms = n % 2 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
  out.max_ms = sorted.back();
  return out;
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
      if (app) open_ms = std::chrono::duration<double, std::milli>(frame_start - start).count();
    }
    if (app) {
      app->frame();
    } else {
      opening.draw(window);
    }
    window.end_frame();
    if (!app) continue;
    if (frame_ms.size() == kFramesTimed) frame_ms.erase(frame_ms.begin());
    frame_ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - frame_start).count());
    // F9: the --screenshot line for the window as it is now, at once (a script may be waiting).
    if (app->take_report_request()) {
      std::printf("%s\n", headless_report(*app, frame_times(frame_ms, open_ms)).c_str());
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
  Loaded loaded = load_both(path, options.compare_path, nullptr);
  const double open_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  Window window(window_title(options), options.window_width, options.window_height);
  set_theme(options.theme);
  App app(options, loaded.main, loaded.compare);
  if (source) app.follow(std::move(source));
  app.wait_for_analysis();  // and the cluster views of --clock cluster
  // --clock cluster on a trace the cluster clock cannot replay: say why and fail, rather than
  // draw the measured clock under a name that is not its own.
  if (app.clock() != options.clock) throw std::runtime_error(app.clock_error());
  set_up_screenshot(window, app, headless, options.font_scale > 0 ? options.font_scale : 1);
  const std::vector<double> times = draw_frames(window, app, headless, options.live);
  std::printf("%s\n", headless_report(app, frame_times(times, open_ms)).c_str());
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
