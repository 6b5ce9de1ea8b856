// The viewer application: the open traces with their background analyses, keyboard navigation,
// the live reload hand-over and the layout of the panels in one full-viewport window.
#include "viewer/app.h"

#include <GLFW/glfw3.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif
#include <imgui.h>
#include <imgui_internal.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <iterator>

#include "analysis/stats.h"
#include "trace/error.h"
#include "trace/vocabulary.h"
#include "viewer/background.h"
#include "viewer/lod.h"

namespace dpscope::view {

void OpenTrace::set_model(std::shared_ptr<const Model> m) {
  model = measured = std::move(m);
  analysis = measured_analysis = nullptr;
  cluster = nullptr;
  shown = analysis::Clock::Measured;
  details = std::make_unique<DetailSource>(model->path);
  // A model whose memory samples are still read starts its analysis once they are in
  // (poll_memory): the two at once would hold both's scratch (Note [Memory after the first frame]).
  if (model->memory_ready()) start_analysis();
}

void OpenTrace::start_analysis() {
  pending = start_background([m = model]() -> std::shared_ptr<const Analysis> {
    try {
      auto analysis = std::make_shared<const Analysis>(analyze_file(*m));
#if defined(__GLIBC__)
      // The analysis's scratch was freed on this thread, whose malloc arena would keep it for
      // the thread's next allocations: about 150 MB on a 10 M-event trace (bench/README.md).
      malloc_trim(0);
#endif
      return analysis;
    } catch (const trace::TraceError&) {
      // The file went away or is mid-write (--live): the panels say the analysis is missing, and
      // the next reload tries again.
      return std::make_shared<const Analysis>(analyze(*m, analysis::RunStats{}));
    }
  });
}

void OpenTrace::read_memory(MemoryLoad load) {
  memory_load = std::move(load);
  memory_error.clear();
  if (!memory_load.valid()) return;
  memory_pending = start_background([load = memory_load] {
    std::shared_ptr<const Model> complete = load();
#if defined(__GLIBC__)
    // The samples' scratch was freed on the reading threads, whose malloc arenas would keep it
    // past the analysis that starts next: about 50 MB on a 10 M-event trace (bench/README.md).
    malloc_trim(0);
#endif
    return complete;
  });
}

bool OpenTrace::poll_memory() {
  if (!memory_pending.valid() || !background_done(memory_pending)) return false;
  try {
    if (std::shared_ptr<const Model> complete = memory_pending.get()) {
      set_model(std::move(complete));
    } else {
      start_analysis();
    }
  } catch (const std::exception& error) {
    memory_error = error.what();
    start_analysis();  // it reads the file itself, and says what it can
  }
  memory_load = MemoryLoad();
  return true;
}

bool OpenTrace::poll_analysis() {
  if (pending.valid() && background_done(pending)) {
    measured_analysis = pending.get();
    if (shown == analysis::Clock::Measured) analysis = measured_analysis;
  }
  return analysis != nullptr;
}

App::App(AppOptions options, std::shared_ptr<const Model> main, std::shared_ptr<const Model> compare,
         MemoryLoad main_memory, MemoryLoad compare_memory)
    : options_(std::move(options)) {
  traces.resize(compare ? 2 : 1);
  traces[0].set_model(std::move(main));
  traces[0].read_memory(std::move(main_memory));
  if (compare) {
    traces[1].set_model(std::move(compare));
    traces[1].read_memory(std::move(compare_memory));
  }
  if (options_.live) live_ = std::make_unique<LiveFollower>(traces[0].model);
  align();
  fit();
  if (options_.clock != analysis::Clock::Measured) set_clock(options_.clock);
  if (options_.whatif) {
    whatif_input = *options_.whatif;
    whatif_input.settings = WhatifSettings::Trace;
    open_whatif_tab = true;
    request_whatif(*options_.whatif);
  }
}

App::~App() {
  for (const OpenTrace& t : traces) t.memory_load.cancel();
}

void App::wait_for_memory() {
  for (OpenTrace& t : traces) {
    if (t.memory_pending.valid()) t.memory_pending.wait();
  }
  take_memory();
}

bool App::memory_pending() const {
  return std::any_of(traces.begin(), traces.end(), [](const OpenTrace& t) { return t.memory_pending.valid(); });
}

void App::take_memory() {
  bool replaced = false, taken = false;
  for (OpenTrace& t : traces) {
    const Model* before = t.model.get();
    if (!t.poll_memory()) continue;
    taken = true;
    replaced = replaced || t.model.get() != before;
  }
  if (!taken) return;
  if (replaced) {
    // A complete model in place of the first half: its ranks may be numbered anew.
    selected = hovered = {};
    steps_cache_ = {};
    align();
    update_find();
    update_range();
  }
  if (clock_wanted_ != clock_) set_clock(clock_wanted_);
}

void App::wait_for_analysis() {
  wait_for_memory();
  for (OpenTrace& t : traces) {
    if (t.pending.valid()) t.pending.wait();
    t.poll_analysis();
  }
  if (clock_pending_.valid()) {
    clock_pending_.wait();
    poll_clock();
  }
  // After the clock: switching it predicts the what-if lanes again on the new clock.
  if (whatif_pending.valid()) whatif = whatif_pending.get();
}

const Lane& App::whatif_lane(size_t rank, bool waits) const {
  static const Lane kNoLane;
  if (!whatif || rank >= whatif->by_rank.size()) return kNoLane;
  return waits ? whatif->by_rank[rank].waits : whatif->by_rank[rank].comm;
}

void App::request_whatif(const WhatifRequest& request) {
  whatif_requested_ = request;
  // On the cluster clock the prediction is made on it, from the shown model's replay.
  const OpenTrace& t = traces[0];
  std::shared_ptr<const analysis::ClusterClockRun> cluster =
      t.shown == analysis::Clock::Cluster && t.cluster ? t.cluster->run : nullptr;
  // The analysis's statistics, when it is done, spare the replay a second pass over the file.
  whatif_pending = start_background([m = t.model, a = t.analysis, request, cluster] {
    return compute_whatif_lanes(*m, request, a && !a->stats.ranks.empty() ? &a->stats : nullptr, cluster.get());
  });
}

std::string App::link() const {
  const Model& m = *traces[0].model;
  return analysis::link_text(std::atof(m.meta_value(trace::meta_key::kLinkGbps, "0").c_str()),
                             std::atof(m.meta_value(trace::meta_key::kLinkLatencyUs, "0").c_str()));
}

void App::fit() {
  double lo = double(traces[0].model->t_begin), hi = double(traces[0].model->t_end);
  for (const OpenTrace& t : traces) {
    lo = std::min(lo, double(t.model->t_begin + t.offset_ns));
    hi = std::max(hi, double(t.model->t_end + t.offset_ns));
  }
  const double pad = std::max(1.0, (hi - lo) * 0.01);
  set_view(lo - pad, hi + pad);
}

void App::set_view(double t0, double t1) {
  if (t1 - t0 < 100) {
    const double mid = (t0 + t1) / 2;
    t0 = mid - 50;
    t1 = mid + 50;
  }
  // Pan and zoom stay on the run: nobody gets lost in empty time.
  double run0 = 0, run1 = 0;
  bool any = false;
  for (const OpenTrace& t : traces) {
    if (!t.model || t.model->t_end <= t.model->t_begin) continue;
    const double b = double(t.model->t_begin + t.offset_ns), e = double(t.model->t_end + t.offset_ns);
    run0 = any ? std::min(run0, b) : b;
    run1 = any ? std::max(run1, e) : e;
    any = true;
  }
  if (any) std::tie(t0, t1) = clamp_view(t0, t1, run0, run1);
  view_t0 = t0;
  view_t1 = t1;
  if (!pinned_playhead) playhead = static_cast<int64_t>((t0 + t1) / 2);
}

std::pair<double, double> App::bucket_range() const {
  const Model& m = *traces[0].model;
  // The all-reduce (or, failing that, any collective) nearest the middle of rank 0's run.
  const double mid = (double(m.t_begin) + double(m.t_end)) / 2;
  double best_distance = 1e300;
  std::pair<double, double> best{double(m.t_begin), double(m.t_end)};
  if (m.ranks.empty()) return best;
  for (const Lane& lane : m.ranks[0].lanes) {
    for (int row = 0; row < lane.rows(); ++row) {
      auto it = std::lower_bound(lane.spans.begin() + std::ptrdiff_t(lane.row_begin(row)),
                                 lane.spans.begin() + std::ptrdiff_t(lane.row_end(row)), mid,
                                 [](const Span& s, double t) { return double(s.begin_ns) < t; });
      for (int k = 0; k < 64 && it != lane.spans.begin() + std::ptrdiff_t(lane.row_end(row));
           ++k, ++it) {
        if (it->kind() != trace::EventKind::Collective) continue;
        const double d = std::fabs(double(it->begin_ns) - mid) +
                         (it->op() == trace::CollectiveOp::AllReduce ? 0 : 1e12);
        if (d < best_distance) {
          best_distance = d;
          const double length = double(it->end_ns - it->begin_ns);
          best = {double(it->begin_ns) - 0.1 * length, double(it->end_ns) + 0.1 * length};
        }
      }
    }
  }
  return best;
}

void App::align() {
  if (traces.size() < 2) return;
  const Model& a = *traces[0].model;
  const Model& b = *traces[1].model;
  const int64_t before = traces[1].offset_ns;
  traces[1].offset_ns = a.t_begin - b.t_begin;
  if (!a.ranks.empty() && !b.ranks.empty()) {
    const IterationSpan* ia = a.ranks[0].find_iteration(align_iteration);
    const IterationSpan* ib = b.ranks[0].find_iteration(align_iteration);
    if (ia && ib) traces[1].offset_ns = ia->begin_ns - ib->begin_ns;
  }
  // Run B focused: it keeps its place on screen, and run A moves under the view instead.
  if (focus_trace == 1 && traces[1].offset_ns != before) {
    const double moved = double(traces[1].offset_ns - before);
    playhead += traces[1].offset_ns - before;
    set_view_keeping_playhead(view_t0 + moved, view_t1 + moved);
  }
}

void App::update_find() {
  find = FindQuery(*traces[0].model, find_text);
  find_result = find_spans(*traces[0].model, find, 2000);
}

void App::update_range() {
  range_rows = has_range ? summarize_range(*traces[0].model, range_t0, range_t1)
                         : std::vector<RangeRow>{};
}

void App::handle_keys() {
  ImGuiIO& io = ImGui::GetIO();
  if (io.WantTextInput) return;
  const double width = view_t1 - view_t0;
  const double amount = io.DeltaTime * 2.0;  // per second: pan by 2 widths, zoom by e^2
  const double mid = (view_t0 + view_t1) / 2;
  if (ImGui::IsKeyDown(GLFW_KEY_W)) set_view(mid - width / 2 * std::exp(-amount), mid + width / 2 * std::exp(-amount));
  if (ImGui::IsKeyDown(GLFW_KEY_S)) set_view(mid - width / 2 * std::exp(amount), mid + width / 2 * std::exp(amount));
  if (ImGui::IsKeyDown(GLFW_KEY_A)) set_view(view_t0 - width * amount * 0.5, view_t1 - width * amount * 0.5);
  if (ImGui::IsKeyDown(GLFW_KEY_D)) set_view(view_t0 + width * amount * 0.5, view_t1 + width * amount * 0.5);
  if (ImGui::IsKeyPressed(GLFW_KEY_F) && !io.KeyCtrl) fit();
  if (ImGui::IsKeyPressed(GLFW_KEY_RIGHT) || ImGui::IsKeyPressed(GLFW_KEY_N)) step(+1);
  if (ImGui::IsKeyPressed(GLFW_KEY_LEFT) || ImGui::IsKeyPressed(GLFW_KEY_P)) step(-1);
  if (ImGui::IsKeyPressed(GLFW_KEY_SPACE, false)) toggle_play();
  constexpr int kSpeeds = int(std::size(kPlaySecondsPerIteration));
  if (ImGui::IsKeyPressed(GLFW_KEY_LEFT_BRACKET, false)) play_speed = std::min(kSpeeds - 1, play_speed + 1);
  if (ImGui::IsKeyPressed(GLFW_KEY_RIGHT_BRACKET, false)) play_speed = std::max(0, play_speed - 1);
  if (ImGui::IsKeyPressed(GLFW_KEY_L, false)) show_legend = !show_legend;
  if (ImGui::IsKeyPressed(GLFW_KEY_K, false)) critical_path.toggle();
  if (ImGui::IsKeyPressed(GLFW_KEY_U, false)) {
    // The opposite of what the main run's first rank shows.
    const auto& ranks = traces[0].model->ranks;
    const bool folded = lanes_folded(ranks.empty() ? LaneArrangement::AsRecorded : ranks[0].arrangement);
    lane_folding = folded ? LaneFolding::Unfolded : LaneFolding::Folded;
  }
  if (ImGui::IsKeyPressed(GLFW_KEY_TAB, false) && traces.size() > 1) focus_other_run();
  if (ImGui::IsKeyPressed(GLFW_KEY_I, false)) fit_iteration();
  if (ImGui::IsKeyPressed(GLFW_KEY_F9, false)) report_requested_ = true;
  if (ImGui::IsKeyPressed(GLFW_KEY_G, false)) link_requested_ = true;
  if (ImGui::IsKeyPressed(GLFW_KEY_C, false) && !io.KeyCtrl) {
    set_clock(clock_ == analysis::Clock::Measured ? analysis::Clock::Cluster : analysis::Clock::Measured);
  }
  if (ImGui::IsKeyPressed(GLFW_KEY_T, false)) {
    set_theme(theme_kind() == ThemeKind::Dark ? ThemeKind::Projector : ThemeKind::Dark);
  }
  // Ctrl + / Ctrl - / Ctrl 0: text size for a projector or a HiDPI screen (applied by the window
  // before the next frame).
  if (io.KeyCtrl && (ImGui::IsKeyPressed(GLFW_KEY_EQUAL) || ImGui::IsKeyPressed(GLFW_KEY_KP_ADD))) {
    font_scale = std::min(kMaxFontScale, font_scale + 0.25f);
  }
  if (io.KeyCtrl && (ImGui::IsKeyPressed(GLFW_KEY_MINUS) || ImGui::IsKeyPressed(GLFW_KEY_KP_SUBTRACT))) {
    font_scale = std::max(kMinFontScale, font_scale - 0.25f);
  }
  if (io.KeyCtrl && (ImGui::IsKeyPressed(GLFW_KEY_0) || ImGui::IsKeyPressed(GLFW_KEY_KP_0))) {
    font_scale = default_font_scale;
  }
  if (ImGui::IsKeyPressed(GLFW_KEY_F1, false) || (io.KeyShift && ImGui::IsKeyPressed(GLFW_KEY_SLASH, false))) {
    show_help = !show_help;
  }
  if (ImGui::IsKeyPressed(GLFW_KEY_ESCAPE)) {
    show_help = false;
    playing = false;
    selected = {};
    has_range = false;
    pinned_playhead = false;
    update_range();
  }
}

double App::idle_wait_seconds() const {
  // Often enough to pick up a background analysis soon after it is done.
  constexpr double kBackgroundPollSeconds = 0.05;
  // ImGui's text cursor blinks at this period while the find box has focus.
  constexpr double kCursorBlinkSeconds = 0.4;
  for (const OpenTrace& t : traces) {
    if (t.pending.valid() || t.memory_pending.valid()) return kBackgroundPollSeconds;
  }
  if (whatif_pending.valid() || clock_pending_.valid() || critical_path.pending()) return kBackgroundPollSeconds;
  // A held pan or zoom key moves the view by the frame's time (handle_keys); a drag moves it
  // with the pointer.
  for (const int key : {GLFW_KEY_W, GLFW_KEY_A, GLFW_KEY_S, GLFW_KEY_D}) {
    if (ImGui::IsKeyDown(key)) return 0;
  }
  if (measuring || ImGui::IsMouseDragging(ImGuiMouseButton_Left) ||
      ImGui::IsMouseDragging(ImGuiMouseButton_Right)) {
    return 0;
  }
  if (playing || dragging_playhead) return 0;
  if (switching_.valid()) return kBackgroundPollSeconds;
  if (live_) return std::chrono::duration<double>(live_->interval()).count();
  if (ImGui::GetIO().WantTextInput) return kCursorBlinkSeconds;
  return kWaitForInput;
}

void App::follow(std::unique_ptr<LiveSource> source) { live_source_ = std::move(source); }

void App::adopt_live_model(std::shared_ptr<const Model> fresh) {
  // Follow the end of the run when the view showed it; keep the view otherwise.
  const bool at_end = view_t1 >= double(traces[0].model->t_end);
  const double width = view_t1 - view_t0;
  traces[0].set_model(std::move(fresh));
  clock_ = clock_wanted_ = analysis::Clock::Measured;  // a live file grows: its cluster view would be stale
  selected = hovered = {};
  steps_cache_ = {};
  if (at_end) set_view(double(traces[0].model->t_end) - width, double(traces[0].model->t_end) + width * 0.02);
  update_find();
  update_range();
}

void App::poll_background() {
  take_memory();
  for (OpenTrace& t : traces) t.poll_analysis();
  if (whatif_pending.valid() && background_done(whatif_pending)) {
    whatif = whatif_pending.get();
  }
  poll_clock();
  poll_live();
  update_critical_path();
}

void App::poll_live() {
  if (live_source_) {
    // The run ended (run.sqlite appeared): load it and follow it instead of the rank files.
    const std::string file = live_source_->poll();
    if (!file.empty() && file != traces[0].model->path && !switching_.valid()) {
      switching_ = start_background([file] { return load_model(file, nullptr, 1); });
    }
    if (switching_.valid() && background_done(switching_)) {
      try {
        std::shared_ptr<const Model> switched = switching_.get();
        live_ = std::make_unique<LiveFollower>(switched);
        adopt_live_model(std::move(switched));
      } catch (const trace::TraceError&) {
        // Caught mid-write: the next poll tries again.
      }
    }
  }
  if (live_) {
    if (auto fresh = live_->poll()) adopt_live_model(std::move(fresh));
  }
}

void table_headers(App& app, bool panel_header) {
  ImGui::TableHeadersRow();
  if (!panel_header) return;
  // The visible part of the window the row was drawn in (a scrolling table's own, clipped by
  // the panel's), against the row's last cell, which spans the row's height.
  const ImRect visible = ImGui::GetCurrentWindow()->InnerClipRect;
  const float top = ImGui::GetItemRectMin().y, bottom = ImGui::GetItemRectMax().y;
  app.layout.clipped_headers += top < visible.Min.y - 0.5f || bottom > visible.Max.y + 0.5f;
}

void App::draw_panels() {
  const float total_h = ImGui::GetContentRegionAvail().y;
  // The timeline's share of the height grows with the text size, so that two ranks' lanes stay
  // in view on a projector (Stats and Buckets then scroll): 64 % at x1, 80 % at x2, 85 % from
  // x2.3 on, where the panels below hold their tab bars and a line or two. Two compared runs
  // share it: there 85 % from x1.5 on, what each run's rank 0 needs at that size (Note [The
  // timeline's text size]).
  const float scale = ImGui::GetFontSize() / 13;
  const float growth = traces.size() > 1 ? 0.42f : 0.16f;
  const float timeline_share = std::clamp(0.64f + growth * (scale - 1), 0.64f, 0.85f);
  ImGui::BeginChild("timeline", ImVec2(0, std::floor(total_h * timeline_share)), true,
                    ImGuiWindowFlags_NoScrollWithMouse | ImGuiWindowFlags_NoScrollbar);
  // The atlas's second font, where the window has made one: the lanes' smaller text. See Note
  // [The timeline's text size].
  ImFontAtlas& fonts = *ImGui::GetIO().Fonts;
  if (fonts.Fonts.Size > 1) ImGui::PushFont(fonts.Fonts[1]);
  draw_timeline(*this);
  if (fonts.Fonts.Size > 1) ImGui::PopFont();
  ImGui::EndChild();

  const float bottom_w = ImGui::GetContentRegionAvail().x;
  ImGui::BeginChild("left", ImVec2(std::floor(bottom_w * 0.55f), 0), true);
  if (ImGui::BeginTabBar("left tabs")) {
    if (ImGui::BeginTabItem("Stats")) { draw_stats(*this); ImGui::EndTabItem(); }
    if (ImGui::BeginTabItem("Find")) { draw_find(*this); ImGui::EndTabItem(); }
    if (traces.size() > 1 && ImGui::BeginTabItem("Compare")) { draw_compare(*this); ImGui::EndTabItem(); }
    ImGui::EndTabBar();
  }
  ImGui::EndChild();
  ImGui::SameLine();
  ImGui::BeginChild("right", ImVec2(0, 0), true);
  if (ImGui::BeginTabBar("right tabs")) {
    // The first tab opens selected: the units of an FSDP or FSDP2 run, the buckets of anything
    // else; and it follows the focused run (Tab) while one of those two is shown.
    const bool fsdp = focused_trace().model->sharded_units();
    const bool refocused = right_panel_trace_ != focus_trace && (right_tab == "Units" || right_tab == "Buckets");
    right_panel_trace_ = focus_trace;
    const auto tab = [this](const char* name, void (*draw)(App&), ImGuiTabItemFlags flags = 0) {
      if (!ImGui::BeginTabItem(name, nullptr, flags)) return;
      right_tab = name;
      draw(*this);
      ImGui::EndTabItem();
    };
    const ImGuiTabItemFlags follow = refocused ? ImGuiTabItemFlags_SetSelected : 0;
    if (fsdp) tab("Units", draw_units, follow);
    tab("Buckets", draw_buckets, fsdp ? 0 : follow);
    if (!fsdp) tab("Units", draw_units);
    tab("Details", draw_details);
    tab("What-if", draw_whatif, open_whatif_tab ? ImGuiTabItemFlags_SetSelected : 0);
    open_whatif_tab = false;
    ImGui::EndTabBar();
  }
  ImGui::EndChild();
}

void App::frame() {
  layout = LayoutReport{};
  poll_background();
  handle_keys();
  update_playback();
  const ImGuiViewport* viewport = ImGui::GetMainViewport();
  ImGui::SetNextWindowPos(viewport->Pos);
  ImGui::SetNextWindowSize(viewport->Size);
  ImGui::Begin("dpscope-view", nullptr,
               ImGuiWindowFlags_NoDecoration | ImGuiWindowFlags_NoMove |
                   ImGuiWindowFlags_NoBringToFrontOnFocus | ImGuiWindowFlags_NoSavedSettings |
                   ImGuiWindowFlags_NoBackground);
  // Tab is the viewer's key (compare focus), not Dear ImGui's hop from one text field to the next:
  // a hop would activate the find box, which then takes every key.
  ImGui::PushAllowKeyboardFocus(false);
  draw_header();
  draw_narration_line();
  draw_panels();
  ImGui::PopAllowKeyboardFocus();
  ImGui::End();
  draw_legend(*this);
  draw_help(*this);
}

}  // namespace dpscope::view
