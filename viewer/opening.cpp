// The viewer before it has an App (opening.h): the load in the background, its progress box and
// its error dialog.
#include "viewer/opening.h"

#include <imgui.h>
#include <unistd.h>

#include <filesystem>

#include "trace/error.h"
#include "viewer/background.h"
#include "viewer/window.h"

namespace dpscope::view {

Loaded load_both(const std::string& path, const std::string& compare, LoadProgress* progress,
                 MemorySamples samples) {
  Loaded loaded;
  if (samples == MemorySamples::WithEvents) {
    loaded.main = load_model(path, progress);
    if (!compare.empty()) loaded.compare = load_model(compare, progress);
    return loaded;
  }
  FirstLoad main = load_events_first(path, progress);
  loaded.main = std::move(main.model);
  loaded.main_memory = std::move(main.memory);
  if (!compare.empty()) {
    FirstLoad other = load_events_first(compare, progress);
    loaded.compare = std::move(other.model);
    loaded.compare_memory = std::move(other.memory);
  }
  return loaded;
}

std::string live_scratch_path() {
  return (std::filesystem::temp_directory_path() /
          ("dpscope-view-live-" + std::to_string(::getpid()) + ".sqlite"))
      .string();
}

Opening::Opening(const AppOptions& options) : options_(options) {
  if (options.live) {
    source_ = std::make_unique<LiveSource>(options.path, live_scratch_path());
  } else {
    pending_ = start_background(load_both, options.path, options.compare_path, &progress_,
                                MemorySamples::AfterFirstFrame);
  }
}

std::unique_ptr<App> Opening::poll(float font_scale) {
  if (source_ && !pending_.valid()) {
    live_file_ = source_->poll();
    if (!live_file_.empty()) {
      pending_ = start_background(load_both, live_file_, options_.compare_path, &progress_,
                                  MemorySamples::WithEvents);
    }
  }
  if (!error_.empty() || !pending_.valid() ||
      !background_done(pending_)) {
    return nullptr;
  }
  try {
    Loaded loaded = pending_.get();
    auto app = std::make_unique<App>(options_, loaded.main, loaded.compare, std::move(loaded.main_memory),
                                     std::move(loaded.compare_memory));
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

double Opening::wait_seconds() const {
  constexpr double kLoadingFrameSeconds = 0.05;
  return error_.empty() ? kLoadingFrameSeconds : kWaitForInput;
}

void Opening::draw(Window* window) const {
  if (!error_.empty()) {
    draw_error(window);
  } else {
    draw_progress();
  }
}

void Opening::draw_error(Window* window) const {
  ImGui::OpenPopup("Cannot open the trace");
  if (ImGui::BeginPopupModal("Cannot open the trace", nullptr, ImGuiWindowFlags_AlwaysAutoResize)) {
    ImGui::PushTextWrapPos(600);
    ImGui::TextUnformatted(error_.c_str());
    ImGui::PopTextWrapPos();
    if (window && ImGui::Button("Quit")) window->close();
    ImGui::EndPopup();
  }
}

void Opening::draw_progress() const {
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

}  // namespace dpscope::view
