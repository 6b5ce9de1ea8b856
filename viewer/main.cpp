// dpscope-view TRACE [--compare TRACE2] [--live] [--screenshot PNG --frames N [--zoom-sweep]]:
// the desktop viewer of dpscope traces (docs/viewer.md). Windowed, it loads with a progress
// bar and shows load errors in a dialog; with --screenshot it prints errors as one line and exits 1.
#include <CLI/CLI.hpp>
#include <GLFW/glfw3.h>
#include <imgui.h>

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <future>
#include <memory>
#include <string>
#include <thread>

#include "trace/error.h"
#include "viewer/app.h"
#include "viewer/headless.h"
#include "viewer/model.h"

namespace {

using namespace dpscope::view;

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

int fail(const std::string& message) {
  std::fprintf(stderr, "dpscope-view: %s\n", message.c_str());
  return 1;
}

// Windowed: load on a thread while showing progress; a load error stays on screen in a dialog
// until the window is closed (the exit status is then 1).
// With --live the trace may not exist yet: the window says what it waits for (LiveSource) and
// loads the file as soon as there is one; a file caught mid-write is tried again.
int windowed(const AppOptions& options) {
  Window window("dpscope-view: " + options.path, 1280, 800);
  set_theme(options.theme);
  const float font_scale = options.font_scale > 0 ? options.font_scale : window.content_scale();
  LoadProgress progress;
  std::unique_ptr<LiveSource> source;
  std::future<Loaded> pending;
  if (options.live) {
    source = std::make_unique<LiveSource>(options.path, live_scratch_path());
  } else {
    pending = std::async(std::launch::async, load_both, options.path, options.compare_path, &progress);
  }
  std::string live_file;  // the file being loaded for --live
  std::unique_ptr<App> app;
  std::string error;
  // Loading: the progress bar moves without input; a load error waits for the user.
  constexpr double kLoadingFrameSeconds = 0.05;
  while (!window.should_close()) {
    window.set_font_scale(app ? app->font_scale : font_scale);
    window.begin_frame(app             ? app->idle_wait_seconds()
                       : error.empty() ? kLoadingFrameSeconds
                                       : kWaitForInput);
    if (source && !app && !pending.valid()) {
      live_file = source->poll();
      if (!live_file.empty()) {
        pending = std::async(std::launch::async, load_both, live_file, options.compare_path, &progress);
      }
    }
    if (!app && error.empty() && pending.valid() &&
        pending.wait_for(std::chrono::seconds(0)) == std::future_status::ready) {
      try {
        Loaded loaded = pending.get();
        app = std::make_unique<App>(options, loaded.main, loaded.compare);
        app->font_scale = app->default_font_scale = font_scale;
        if (source) app->follow(std::move(source));
      } catch (const dpscope::trace::TraceError& e) {
        // A live file caught mid-write: try again; anything else stays on screen.
        if (!source) error = e.what();
      } catch (const std::exception& e) {
        error = e.what();
      }
    }
    if (app) {
      app->frame();
    } else if (!error.empty()) {
      ImGui::OpenPopup("Cannot open the trace");
      if (ImGui::BeginPopupModal("Cannot open the trace", nullptr, ImGuiWindowFlags_AlwaysAutoResize)) {
        ImGui::PushTextWrapPos(600);
        ImGui::TextUnformatted(error.c_str());
        ImGui::PopTextWrapPos();
        if (ImGui::Button("Quit")) glfwSetWindowShouldClose(window.handle(), 1);
        ImGui::EndPopup();
      }
    } else {
      const ImGuiViewport* viewport = ImGui::GetMainViewport();
      ImGui::SetNextWindowPos(ImVec2(viewport->Size.x / 2, viewport->Size.y / 2), 0, ImVec2(0.5f, 0.5f));
      ImGui::Begin("loading", nullptr, ImGuiWindowFlags_AlwaysAutoResize | ImGuiWindowFlags_NoDecoration);
      if (source && !pending.valid()) {
        ImGui::Text("live: %s", source->status().c_str());
        ImGui::TextDisabled("(it opens as soon as a rank has written its first events)");
      } else {
        ImGui::Text("loading %s", (source ? live_file : options.path).c_str());
      }
      ImGui::ProgressBar(float(progress.fraction.load()), ImVec2(400, 0));
      ImGui::End();
    }
    window.end_frame();
  }
  progress.cancel = true;
  if (!app && error.empty() && pending.valid()) {
    try {
      pending.get();
    } catch (const std::exception&) {
    }
  }
  if (!error.empty()) return fail(error);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App cli{"dpscope-view: the desktop viewer of dpscope traces"};
  AppOptions options;
  HeadlessOptions headless;
  cli.add_option("TRACE", options.path, "The trace file (a merged run file or a rank file)")->required();
  cli.add_option("--compare", options.compare_path, "A second trace drawn under the first, aligned on iterations");
  cli.add_flag("--live", options.live, "Follow a trace that a running training is still writing");
  auto* screenshot = cli.add_option("--screenshot", headless.png,
                                    "Headless: draw --frames frames, write the last as this PNG, print one JSON line, exit");
  cli.add_option("--frames", headless.frames, "Frames to draw with --screenshot")->needs(screenshot)->check(CLI::PositiveNumber);
  cli.add_flag("--zoom-sweep", headless.zoom_sweep, "With --screenshot: sweep the zoom from the whole run to one bucket")
      ->needs(screenshot);
  std::string theme_name = "dark";
  cli.add_option("--theme", theme_name,
                 "dark | projector (dark text on light ground, for a projector or a lit room; T "
                 "switches in the window)")
      ->check(CLI::IsMember({"dark", "projector"}))
      ->capture_default_str();
  cli.add_option("--font-scale", options.font_scale,
                 "Text size, times the 13 px font (default: the screen's content scale; Ctrl +/- "
                 "change it in the window)")
      ->check(CLI::Range(double(kMinFontScale), double(kMaxFontScale)));
  cli.add_option("--fold", headless.folded,
                 "With --screenshot: fold these ranks' lane groups (indices, comma-separated), so "
                 "that the others fit")
      ->delimiter(',')
      ->needs(screenshot)
      ->check(CLI::NonNegativeNumber);
  cli.add_flag("--legend", headless.legend, "With --screenshot: the legend window open")->needs(screenshot);
  auto* iteration = cli.add_option("--iteration", headless.iteration,
                                   "With --screenshot: show this iteration, the playhead on its first step")
                        ->needs(screenshot)
                        ->excludes("--zoom-sweep")
                        ->check(CLI::NonNegativeNumber);
  cli.add_option("--step", headless.step,
                 "With --iteration: the playhead on this step of it (from 0, the first hook, bucket, "
                 "collective or unit event; the narration line says which)")
      ->needs(iteration)
      ->check(CLI::NonNegativeNumber);
  cli.add_option("--rank", headless.rank, "With --iteration: whose iteration and steps (default 0)")
      ->needs(iteration)
      ->check(CLI::NonNegativeNumber);
  WhatifRequest whatif;
  auto* whatif_cap = cli.add_option("--whatif-cap-mb", whatif.bucket_cap_mb,
                                    "A DDP trace's what-if lanes for this bucket cap (MiB): the replay of "
                                    "`dpscope whatif` drawn under each rank (the What-if tab changes it)")
                         ->check(CLI::PositiveNumber);
  cli.add_option("--whatif-first-bucket-mb", whatif.first_bucket_mb,
                 "With --whatif-cap-mb: the first bucket's cap (MiB; default: as recorded)")
      ->needs(whatif_cap)
      ->check(CLI::PositiveNumber);
  std::string whatif_prefetch;
  auto* whatif_prefetch_option =
      cli.add_option("--whatif-backward-prefetch", whatif_prefetch,
                     "An FSDP trace's what-if lanes for this backward prefetch: pre | post | none")
          ->check(CLI::IsMember({"pre", "post", "none"}))
          ->excludes(whatif_cap);
  int whatif_limit_value = 0;
  auto* whatif_limit = cli.add_option("--whatif-limit-all-gathers", whatif_limit_value,
                                      "With an FSDP trace: the what-if all-gather limit (0: none)")
                           ->check(CLI::NonNegativeNumber)
                           ->excludes(whatif_cap);
  try {
    cli.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return cli.exit(e);
  }
  headless.live = options.live;
  if (whatif_cap->count()) {
    whatif.settings = WhatifSettings::kDdp;
    options.whatif = whatif;
  } else if (whatif_prefetch_option->count() || whatif_limit->count()) {
    whatif.settings = WhatifSettings::kFsdp;
    if (!whatif_prefetch.empty()) whatif.backward_prefetch = dpscope::trace::parse_mode(dpscope::trace::kBackwardPrefetches, whatif_prefetch);
    if (whatif_limit->count()) whatif.limit_all_gathers = whatif_limit_value;
    options.whatif = whatif;
  }
  parse_theme(theme_name, &options.theme);
  if (options.font_scale > 0) headless.font_scale = options.font_scale;
  try {
    if (headless.png.empty()) return windowed(options);
    const auto start = std::chrono::steady_clock::now();
    std::unique_ptr<LiveSource> source;
    std::string path = options.path;
    if (options.live) path = wait_for_live_file(options.path, &source);
    Loaded loaded = load_both(path, options.compare_path, nullptr);
    const double open_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    Window window("dpscope-view: " + options.path, 1280, 800);
    set_theme(options.theme);
    App app(options, loaded.main, loaded.compare);
    if (source) app.follow(std::move(source));
    app.wait_for_analysis();
    const int status = run_headless(window, app, headless, open_ms);
    if (options.live) {
      std::fprintf(stderr, "dpscope-view: live: %d reloads, %lld events in the last one, %lld rows read by the reloads; "
                   "followed %s after %d merges of rank files\n",
                   app.live_reloads(), static_cast<long long>(app.traces[0].model->events),
                   static_cast<long long>(app.live_rows_read()), app.live_status().c_str(), app.live_merges());
    }
    return status;
  } catch (const dpscope::trace::TraceError& e) {
    return fail(e.what());
  } catch (const std::exception& e) {
    return fail(e.what());
  }
}
