// The GLFW + OpenGL 3 window with Dear ImGui, the interactive frame loop, and the headless
// --screenshot mode: timed frames (optionally sweeping the zoom), the last read back into a PNG
// through stb_image_write, and the one JSON line of the contract.
#include "viewer/headless.h"

#include <GLFW/glfw3.h>
#include <imgui.h>
#include <imgui_impl_glfw.h>
#include <imgui_impl_opengl3.h>
#include <stb_image_write.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <thread>
#include <vector>

#include "analysis/stragglers.h"
#include "viewer/app.h"
#include "viewer/palette.h"

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

float Window::content_scale() const {
  float x = 1, y = 1;
  glfwGetWindowContentScale(window_, &x, &y);
  return std::max(x, y);
}

void Window::set_font_scale(float scale) {
  scale = std::clamp(scale, kMinFontScale, kMaxFontScale);
  if (scale == font_scale_) return;
  font_scale_ = scale;
  ImGuiIO& io = ImGui::GetIO();
  io.Fonts->Clear();
  ImFontConfig config;
  config.SizePixels = std::round(13 * scale);
  io.Fonts->AddFontDefault(&config);
  ImGui_ImplOpenGL3_DestroyFontsTexture();
  ImGui_ImplOpenGL3_CreateFontsTexture();
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
  if (!capture_png.empty()) {
    std::vector<unsigned char> pixels(size_t(width) * size_t(height) * 4);
    glPixelStorei(GL_PACK_ALIGNMENT, 1);
    glReadBuffer(GL_BACK);
    glReadPixels(0, 0, width, height, GL_RGBA, GL_UNSIGNED_BYTE, pixels.data());
    // OpenGL's rows go bottom-up; PNG's top-down. Drop alpha: the frame is opaque.
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
    if (!stbi_write_png(capture_png.c_str(), width, height, 3, rgb.data(), width * 3)) {
      throw std::runtime_error("cannot write the screenshot " + capture_png +
                               " (check that its directory exists and is writable)");
    }
  }
  glfwSwapBuffers(window_);
  glFinish();  // the frame is drawn when this returns, so frame times include the rendering
}

namespace {

// The Stats panel's figures as drawn, for tests and scripts: per rank the whole run's overlap,
// each iteration's and each bucket's exposed communication (main trace).
std::string overlap_json(const App& app) {
  std::string out = "[";
  const std::shared_ptr<const Analysis>& analysis = app.traces[0].analysis;
  if (!analysis) return "[]";
  char number[64];
  const auto ms = [&](double value) {
    std::snprintf(number, sizeof(number), "%.6f", value);
    return std::string(number);
  };
  for (const analysis::RankStats& r : analysis->stats.ranks) {
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
std::string memory_json(const App& app) {
  const std::shared_ptr<const Analysis>& analysis = app.traces[0].analysis;
  if (!analysis) return "[]";
  const bool steps_shown = analysis->steps_peak_elsewhere();
  std::string out = "[";
  for (const analysis::RankStats& r : analysis->stats.ranks) {
    if (out.size() > 1) out += ", ";
    out += "{\"rank\": " + std::to_string(r.rank) + ", \"peak_bytes\": " +
           std::to_string(r.memory_peak.total_bytes) + ", \"steps_peak_bytes\": " +
           (steps_shown && r.step_memory_peak.found() ? std::to_string(r.step_memory_peak.total_bytes) : "null") +
           "}";
  }
  return out + "]";
}

// The Stats panel's straggler line as drawn: "" before the analysis, or with one rank.
std::string stragglers_line(const App& app) {
  const std::shared_ptr<const Analysis>& analysis = app.traces[0].analysis;
  if (!analysis || analysis->stats.ranks.size() < 2) return "";
  return analysis::stragglers_text(analysis->stats.stragglers);
}

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

// The what-if lanes' prediction as the What-if tab shows it, or null without one.
std::string whatif_json(const App& app) {
  if (!app.whatif) return "null";
  const WhatifLanes& w = *app.whatif;
  if (!w.error.empty()) return "{\"error\": \"" + json_escaped(w.error) + "\"}";
  char text[256];
  std::snprintf(text, sizeof(text),
                "{\"buckets\": %zu, \"measured_step_ms\": %.6f, \"predicted_step_ms\": %.6f, "
                "\"measured_exposed_comm_ms\": %.6f, \"predicted_exposed_comm_ms\": %.6f}",
                w.bucket_bytes.size(), w.measured_step_ms, w.predicted_step_ms, w.measured_exposed_comm_ms,
                w.predicted_exposed_comm_ms);
  return text;
}

}  // namespace

int run_headless(Window& window, App& app, const HeadlessOptions& options, double open_ms) {
  glfwSwapInterval(0);  // time the drawing, not the display's refresh
  // The frames show the trace, not wherever the display's pointer happens to be: Xvfb's starts
  // at the screen's centre, over the timeline, where it would hover a span and draw its tooltip.
  ImGui::GetIO().ConfigFlags |= ImGuiConfigFlags_NoMouse;
  const int frames = std::max(1, options.frames);
  app.show_legend = options.legend;
  for (size_t t = 0; t < app.traces.size(); ++t) {
    for (const int rank : options.folded) app.collapsed[{int(t), rank}] = true;
  }
  app.font_scale = options.font_scale;
  window.set_font_scale(app.font_scale);
  if (options.iteration >= 0) {
    app.focus_rank = options.rank;
    if (!app.go_to_step(options.iteration, options.step)) {
      throw std::runtime_error("rank " + std::to_string(options.rank) + " has no iteration " +
                               std::to_string(options.iteration) + " with a step " +
                               std::to_string(options.step) +
                               " in this trace; choose another --iteration, --step or --rank");
    }
  }
  const double whole0 = app.view_t0, whole1 = app.view_t1;
  const auto [b0, b1] = app.bucket_range();
  std::vector<double> times;
  for (int i = 0; i < frames; ++i) {
    if (options.zoom_sweep && frames > 1) {
      // Geometric in width, so every zoom level gets the same number of frames; the centre
      // moves in step so the bucket stays in view.
      const double f = double(i) / double(frames - 1);
      const double w0 = whole1 - whole0, w1 = std::max(b1 - b0, 100.0);
      const double width = w0 * std::pow(w1 / w0, f);
      const double progress = std::log(w0 / width) / std::log(w0 / w1);
      const double c = (whole0 + whole1) / 2 + progress * ((b0 + b1) / 2 - (whole0 + whole1) / 2);
      app.set_view(c - width / 2, c + width / 2);
    }
    const auto start = std::chrono::steady_clock::now();
    window.set_font_scale(app.font_scale);
    window.begin_frame();
    app.frame();
    window.end_frame(i == frames - 1 ? options.png : "");
    const auto end = std::chrono::steady_clock::now();
    times.push_back(std::chrono::duration<double, std::milli>(end - start).count());
    if (options.live) std::this_thread::sleep_until(start + std::chrono::milliseconds(33));
  }
  // The frame that writes the PNG also reads it back; leave it out of the timing when others exist.
  std::vector<double> timed(times.begin(), times.end() - (times.size() > 1 ? 1 : 0));
  std::vector<double> sorted = timed;
  std::sort(sorted.begin(), sorted.end());
  const double median = sorted.size() % 2 ? sorted[sorted.size() / 2]
                                          : (sorted[sorted.size() / 2 - 1] + sorted[sorted.size() / 2]) / 2;
  // link_text has no quote or backslash to escape.
  std::printf("{\"open_ms\": %.1f, \"frames\": %d, \"frame_ms_median\": %.2f, \"frame_ms_max\": %.2f, "
              "\"link\": \"%s\", \"narration\": \"%s\", \"overlap\": %s, \"memory\": %s, \"stragglers\": \"%s\", "
              "\"whatif\": %s}\n",
              open_ms, frames, median, sorted.back(), app.link().c_str(),
              json_escaped(app.narration).c_str(), overlap_json(app).c_str(), memory_json(app).c_str(),
              json_escaped(stragglers_line(app)).c_str(), whatif_json(app).c_str());
  std::fflush(stdout);
  return 0;
}

}  // namespace dpscope::view
