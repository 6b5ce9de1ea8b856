// dpscope-view in the browser (scripts/web, docs/web.md): the desktop viewer's App and panels on
// a page's canvas. The page (web/index.html) writes the trace files into the in-memory file
// system and calls dpscope_open; the browser's animation frames call frame(); G copies the link.
#include <emscripten.h>
#include <emscripten/html5.h>
#include <imgui.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <sys/stat.h>
#include <vector>

#include "formats/kineto_import.h"
#include "viewer/deep_link.h"
#include "viewer/opening.h"
#include "viewer/report.h"
#include "viewer/window.h"

namespace {

using namespace dpscope::view;
namespace formats = dpscope::formats;

// Note [The browser's memory]
// A trace opened in the page lives three times: its bytes in the page's JavaScript (the file or
// the download), its copy in the in-memory file system, and the model and analysis built from it
// in WebAssembly's memory, which 32-bit WebAssembly caps at 4 GiB, where the reader's page scan
// maps the file too (emscripten's mmap copies it in). bench/viewer.sh's 10 M events are a
// 1.2 GB file whose model peaks near 0.8 GB: past the limit, a desktop trace. A file of
// kMaxTraceBytes (about 8 M events) leaves its copy and a model of its size room within the 4 GiB;
// the lessons' traces are 1 to 10 MB. The page refuses a larger one before reading it, in one
// line that gives its size and this limit (web/page.js); dpscope_open checks it again.
constexpr double kMaxTraceBytes = 1024.0 * 1024 * 1024;

struct WebViewer {
  std::unique_ptr<Window> window;
  AppOptions options;
  std::optional<formats::TemporaryImport> imported;
  std::unique_ptr<Opening> opening;
  std::unique_ptr<App> app;
  // The link the page was opened with, applied once the traces are loaded: its clock first
  // (the cluster clock is built in the background), then its step on that clock.
  std::optional<DeepLink> link;
  std::string status = "empty";  // dpscope_state's answer
  std::chrono::steady_clock::time_point opened_at, last_frame;
  double open_ms = 0;
  double memory_ms = 0;  // when the memory samples were in (Note [Memory after the first frame])
  std::vector<double> frame_ms;
  // Frames still to draw without input: a layout settles over kFramesForAFinishedLayout frames
  // (window.h), after a trace opens and after a frame in which something moved or background work
  // finished (See Note [Background work in the browser]).
  int settling = 0;
  std::string returned;  // the last string handed to the page (valid until the next call)
};

WebViewer* viewer = nullptr;

// The canvas's CSS size in device pixels: the window ImGui lays out, so that text is sharp on a
// HiDPI screen (its size follows the font scale, devicePixelRatio times the presenter size).
void fit_canvas(Window& window) {
  double css_width = 0, css_height = 0;
  emscripten_get_element_css_size("#canvas", &css_width, &css_height);
  const double ratio = emscripten_get_device_pixel_ratio();
  window.resize(std::max(320, int(css_width * ratio + 0.5)), std::max(240, int(css_height * ratio + 0.5)));
}

void tell_page(const char* function, const std::string& text) {
  EM_ASM({ if (Module[UTF8ToString($0)]) Module[UTF8ToString($0)](UTF8ToString($1)); }, function, text.c_str());
}

// The link's moment, once the App is loaded and on the link's clock; an error goes to the page.
void apply_link(WebViewer& v) {
  App& app = *v.app;
  DeepLink& link = *v.link;
  if (link.clock && app.clock() != *link.clock) {
    if (!app.clock_pending() && !app.set_clock(*link.clock) && !app.clock_pending()) {
      tell_page("dpscopeNotice", "this link's clock=" + std::string(dpscope::analysis::to_string(*link.clock)) +
                                     " cannot be shown: " + app.clock_error());
      link.clock.reset();
    }
    if (link.clock) return;  // being built: asked again next frame
  }
  if (link.rank) app.focus_rank = *link.rank;
  if (link.iteration && !app.go_to_step(*link.iteration, link.step.value_or(0))) {
    tell_page("dpscopeNotice", "rank " + std::to_string(app.focus_rank) + " has no iteration " +
                                   std::to_string(*link.iteration) + " with a step " +
                                   std::to_string(link.step.value_or(0)) +
                                   " in this trace; the view opens on its typical iteration instead");
  }
  v.link.reset();
}

void frame() {
  WebViewer& v = *viewer;
  fit_canvas(*v.window);
  const auto now = std::chrono::steady_clock::now();
  const double since_last = std::chrono::duration<double>(now - v.last_frame).count();
  // See Note [Quiet when idle]: the browser calls every animation frame; draw only when needed.
  const double wait = v.app ? v.app->idle_wait_seconds() : v.opening ? v.opening->wait_seconds() : 0.25;
  if (!v.window->input_pending() && since_last < wait && !v.link && v.settling == 0) return;
  v.last_frame = now;
  v.settling = wait <= 0 ? kFramesForAFinishedLayout : std::max(0, v.settling - 1);
  const float font_scale = v.options.font_scale > 0 ? v.options.font_scale : v.window->content_scale();
  v.window->set_font_scale(v.app ? v.app->font_scale : font_scale, v.app ? v.app->timeline_font_scale : font_scale);
  if (v.app) v.app->shown_timeline_font_scale = v.window->timeline_scale();
  v.window->begin_frame();
  const auto frame_start = std::chrono::steady_clock::now();
  if (!v.app && v.opening) {
    v.app = v.opening->poll(font_scale);
    if (v.app) {
      // Deferred, the load ran inside poll: the open ends now (See Note [Background work in the browser]).
      v.open_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - v.opened_at).count();
      v.app->content_scale = v.window->content_scale();
      v.status = "ready";
      v.opening.reset();
      v.settling = kFramesForAFinishedLayout;
    } else if (!v.opening->error().empty()) {
      v.status = "error: " + v.opening->error();
    }
  }
  if (v.app) {
    if (v.link) apply_link(v);
    v.app->frame();
    if (v.memory_ms == 0 && !v.app->memory_pending()) {
      v.memory_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - v.opened_at).count();
    }
  } else if (v.opening) {
    v.opening->draw(nullptr);
  } else {
    const ImGuiViewport* viewport = ImGui::GetMainViewport();
    ImGui::SetNextWindowPos(ImVec2(viewport->Size.x / 2, viewport->Size.y / 2), 0, ImVec2(0.5f, 0.5f));
    ImGui::Begin("welcome", nullptr, ImGuiWindowFlags_AlwaysAutoResize | ImGuiWindowFlags_NoDecoration);
    ImGui::TextUnformatted("dpscope-view: drop a trace here, or press Open trace above.");
    ImGui::TextDisabled("dpscope run files (.sqlite) and PyTorch profiler traces (.json, .json.gz)");
    ImGui::End();
  }
  v.window->end_frame();
  if (!v.app) return;
  constexpr size_t kFramesTimed = 120;
  if (v.frame_ms.size() == kFramesTimed) v.frame_ms.erase(v.frame_ms.begin());
  v.frame_ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - frame_start).count());
  if (v.app->take_link_request()) tell_page("dpscopeCopyLink", deep_link_query(deep_link_of(*v.app)));
  if (v.app->take_report_request()) tell_page("dpscopeReport", headless_report(*v.app, frame_times(v.frame_ms, v.open_ms, v.memory_ms)));
}

const char* hand_over(std::string text) {
  viewer->returned = std::move(text);
  return viewer->returned.c_str();
}

}  // namespace

extern "C" {

// Opens `paths` (one dpscope trace, or PyTorch profiler files, one per rank, separated by
// newlines) and `compare` (a dpscope trace, or "") from the in-memory file system, named
// `shown_name` in the header, at the moment `query` links to (deep_link.h; may be empty).
// Profiler files are imported into one run first, as the desktop viewer does. Returns "" when
// the load has started, else the error in one line (a bad link, a file too large, a mix of
// files, a profiler file that cannot be imported).
EMSCRIPTEN_KEEPALIVE const char* dpscope_open(const char* paths, const char* compare, const char* shown_name,
                                              const char* query) {
  WebViewer& v = *viewer;
  try {
    DeepLink link = parse_deep_link(query);
    std::vector<std::string> files;
    for (std::string rest = paths; !rest.empty();) {
      const size_t end = rest.find('\n');
      files.push_back(rest.substr(0, end));
      rest = end == std::string::npos ? "" : rest.substr(end + 1);
    }
    size_t profiler_files = 0;
    for (const std::string& file : files) profiler_files += formats::is_kineto_file_name(file) ? 1 : 0;
    if (files.empty() || (files.size() > 1 && profiler_files != files.size())) {
      throw std::invalid_argument("open one dpscope trace, or PyTorch profiler traces (.json, .json.gz) only, "
                                  "one per rank");
    }
    int64_t bytes = 0;
    for (const std::string& file : files) {
      struct stat info;
      if (::stat(file.c_str(), &info) == 0) bytes += info.st_size;
    }
    if (double(bytes) > kMaxTraceBytes) {
      throw std::invalid_argument(std::string(shown_name) + " is " + std::to_string(bytes >> 20) +
                                  " MiB; the browser viewer opens traces up to " +
                                  std::to_string(int64_t(kMaxTraceBytes) >> 20) +
                                  " MiB: open it with the desktop dpscope-view");
    }
    ThemeKind theme = ThemeKind::Dark;
    if (!link.theme.empty() && !parse_theme(link.theme, &theme)) {
      throw std::invalid_argument("the link's theme=" + link.theme + " is not a theme; give theme=" +
                                  to_string(ThemeKind::Dark) + " or theme=" + to_string(ThemeKind::Projector));
    }
    v.app.reset();
    v.opening.reset();
    v.imported.reset();
    v.options = AppOptions{};
    v.options.path = files.front();
    v.options.compare_path = compare;
    v.options.shown_name = shown_name;
    v.options.theme = theme;
    if (profiler_files > 0) {
      v.imported.emplace(files, [](const std::string& line) { tell_page("dpscopeNotice", "warning: " + line); });
      v.options.path = v.imported->path();
      v.options.shown_name = std::string("profiler: ") + shown_name;
    }
    set_theme(theme);
    if (link.scale) v.options.font_scale = *link.scale * v.window->content_scale();
    v.link = link;
    v.opened_at = std::chrono::steady_clock::now();
    v.frame_ms.clear();
    v.opening = std::make_unique<Opening>(v.options);
    v.status = "loading";
    return hand_over("");
  } catch (const std::exception& e) {
    v.status = "error: " + std::string(e.what());
    return hand_over(e.what());
  }
}

// "empty" (nothing opened), "loading", "ready", or "error: " and the error's line.
EMSCRIPTEN_KEEPALIVE const char* dpscope_state() { return hand_over(viewer->status); }

// The link to what the viewer shows now (deep_link_of), as a query without '?' or the traces.
EMSCRIPTEN_KEEPALIVE const char* dpscope_link() {
  return hand_over(viewer->app ? deep_link_query(deep_link_of(*viewer->app)) : "");
}

// The desktop's headless JSON line (report.h) for what the page shows now, or "" before a trace.
EMSCRIPTEN_KEEPALIVE const char* dpscope_report() {
  return hand_over(viewer->app ? headless_report(*viewer->app, frame_times(viewer->frame_ms, viewer->open_ms, viewer->memory_ms)) : "");
}

// The largest trace file the page opens, in bytes (Note [The browser's memory]).
EMSCRIPTEN_KEEPALIVE double dpscope_max_trace_bytes() { return kMaxTraceBytes; }

}  // extern "C"

int main() {
  viewer = new WebViewer;
  try {
    viewer->window = std::make_unique<Window>("dpscope-view", 1280, 800);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dpscope-view: %s\n", e.what());
    return 1;
  }
  set_theme(ThemeKind::Dark);
  EM_ASM({ if (Module.dpscopeStarted) Module.dpscopeStarted(); });
  emscripten_set_main_loop(frame, 0, false);
  return 0;
}
