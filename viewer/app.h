// The viewer application: the open traces (the main one and, with --compare, a second), the
// shared view state (visible time range, selection, playhead, measured range, find query) and
// the frame that lays the panels out. Each panel lives in its own view_*.cpp and is declared
// here; they all draw through ImGui and read the state below.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <functional>
#include <future>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "analysis/clock_choice.h"
#include "core/link_model.h"
#include "viewer/analysis.h"
#include "viewer/cluster_model.h"
#include "viewer/critical_path_overlay.h"
#include "viewer/detail_source.h"
#include "viewer/live.h"
#include "viewer/live_source.h"
#include "viewer/lod.h"
#include "viewer/model.h"
#include "viewer/palette.h"
#include "viewer/playback.h"
#include "viewer/whatif_lanes.h"

namespace dpscope::view {

// What App::idle_wait_seconds returns when nothing moves: sleep until the next input.
inline constexpr double kWaitForInput = std::numeric_limits<double>::infinity();
// The text sizes App::font_scale may take (Ctrl +/-, --font-scale), times the 13 px font.
inline constexpr float kMinFontScale = 0.75f;
inline constexpr float kMaxFontScale = 3.0f;

// Whether every rank's secondary lanes (LanePriority::Secondary, lane_order.h: FSDP's unit lanes,
// a comm lane but a rank's busiest; a profiler trace's CPU threads but the main one) are folded.
// Auto folds them from a text size of kAutoFoldFontScale up, where a projector's text leaves room
// for few lanes, and a GPU-first rank's at any size (Note [GPU first]); U picks Folded or
// Unfolded from then on, --fold-lanes Folded.
enum class LaneFolding { Auto, Folded, Unfolded };
inline constexpr float kAutoFoldFontScale = 1.5f;

// What the last frame's layout left visible, measured where it was drawn (the headless JSON's
// "layout"): whether the header's controls (find box, buttons) lay inside the window, whether the
// narration needed more than its two lines, how many ranks had their main and comm lanes wholly
// in view (in compare mode, the fewer of the two panels'), how many fixed labels (lane names,
// rank headers, the memory graph's labels) were drawn cut, and how many panel headers. Span
// labels, which shorten with ".." as one zooms out, are not counted.
struct LayoutReport {
  bool controls_visible = true;
  bool narration_clipped = false;
  int ranks_visible = 0;
  int clipped_labels = 0;
  // Panel headers (a table's column headers, a tab's first line) drawn cut or scrolled away.
  int clipped_headers = 0;
  // The critical path's segments drawn on a lane in view (K).
  int critical_path_segments_drawn = 0;
};

// One open trace: its model, its analysis (computed on a background thread after loading, with
// the collectives' payloads read there too; null until ready) and the offset that places its
// times on the shared axis (compare alignment). `model` and `analysis` are what the panels draw:
// the measured ones, or on the cluster clock (App::set_clock) the cluster view's.
struct OpenTrace {
  std::shared_ptr<const Model> model;
  std::shared_ptr<const Analysis> analysis;
  std::future<std::shared_ptr<const Analysis>> pending;  // the analysis being computed
  std::unique_ptr<DetailSource> details;
  int64_t offset_ns = 0;  // axis time = trace time + offset_ns
  // The measured clock's model and analysis (as loaded), kept while the cluster clock is shown.
  std::shared_ptr<const Model> measured;
  std::shared_ptr<const Analysis> measured_analysis;
  // The cluster clock's, built on the first switch to it (cluster_model.h); null until then.
  std::shared_ptr<const ClusterView> cluster;
  analysis::Clock shown = analysis::Clock::Measured;
  // The memory samples being read after the first frame (Note [Memory after the first frame]):
  // the load, for its progress, and its future, whose result is null, or a complete model to
  // show instead; invalid once taken. memory_error: why they could not be read, or "".
  MemoryLoad memory_load;
  std::future<std::shared_ptr<const Model>> memory_pending;
  std::string memory_error;

  // Takes a freshly loaded model and starts its analysis (once its memory samples are in);
  // shows the measured clock (a cluster view of an older model is dropped).
  void set_model(std::shared_ptr<const Model> m);
  // Starts the analysis of `model` in the background (pending).
  void start_analysis();
  // Picks up a finished analysis; true when one is ready.
  bool poll_analysis();
  // Starts reading the model's memory samples in the background (`load` from load_events_first).
  void read_memory(MemoryLoad load);
  // Takes a finished read of the memory samples: true when one finished now (the samples are in,
  // or memory_error says why not); a complete model it returned is shown from then on.
  bool poll_memory();
  // Shows `clock`'s model and analysis (the cluster view must be built for Clock::Cluster).
  void show(analysis::Clock clock);
  // The file's events of `rank`'s iteration `iteration` (on any lane, begun within it), on the
  // shown clock: found by the measured iteration's times (Note [Span to event]) and, on the
  // cluster clock, mapped by the cluster view's replay. Empty when the rank or iteration is not
  // in the trace. Reads the file through `details`: the UI thread only.
  std::vector<trace::Event> iteration_events(int32_t rank, int32_t iteration) const;
};

// A span of one of the open traces (0: main, 1: --compare).
struct Pick {
  int trace = 0;
  SpanRef span;
  bool valid() const { return span.valid(); }
};

struct AppOptions {
  std::string path;
  // What the header and the window's title call the main trace: its path, unless the viewer
  // imported it from profiler files into a temporary run (docs/kineto.md), whose files it names.
  std::string shown_name;
  std::string compare_path;
  bool live = false;
  float font_scale = 0;  // text size, times the 13 px font; 0: the screen's content scale
  int window_width = 1280, window_height = 800;  // the window's size in pixels (--size)
  ThemeKind theme = ThemeKind::Dark;
  std::optional<WhatifRequest> whatif;  // what-if lanes to predict at start (--whatif-cap-mb)
  analysis::Clock clock = analysis::Clock::Measured;  // the clock to start on (--clock)
  // The cluster clock's link (--link-gbps, --link-latency-us, checked); nullopt: the run's own.
  std::optional<core::LinkSpec> link;
};

// Thread-safety: UI thread only (the background analysis and live reload hand their results
// over through futures polled in frame()).
class App {
 public:
  // Takes already loaded models (load errors are the caller's to report), and reads in the
  // background the memory samples of those that came from load_events_first (`main_memory`,
  // `compare_memory`; invalid ones for models that have theirs).
  App(AppOptions options, std::shared_ptr<const Model> main, std::shared_ptr<const Model> compare,
      MemoryLoad main_memory = {}, MemoryLoad compare_memory = {});
  // Stops the reads of memory samples still running (their futures then wait for less).
  ~App();
  App(const App&) = delete;
  App& operator=(const App&) = delete;

  // Builds one ImGui frame covering the whole viewport (between NewFrame and Render).
  void frame();
  // Fits the whole run into the view.
  void fit();
  // Sets the visible time range (axis ns); keeps it at least 100 ns wide and within the run
  // (every open trace) and a margin of a tenth of its length on either side.
  void set_view(double t0, double t1);
  // Blocks until every trace's memory samples are in (Note [Memory after the first frame]).
  void wait_for_memory();
  // Whether some trace's memory samples are still being read.
  bool memory_pending() const;
  // Blocks until every background analysis (and a requested what-if, and the cluster views a
  // switch of clock is building) is ready, the memory samples first (headless runs use it
  // before timing).
  void wait_for_analysis();
  // Starts predicting the main trace's what-if lanes for `request` on a background thread
  // (whatif_lanes.h); they replace the current ones when ready. The What-if tab calls it.
  void request_whatif(const WhatifRequest& request);
  // How long the frame loop may sleep before the next frame when no input comes (seconds;
  // 0: draw on; kWaitForInput: until an input). See Note [Quiet when idle] (window.h).
  double idle_wait_seconds() const;
  // The range the zoom sweep ends on: one bucket's all-reduce in the middle of the run.
  std::pair<double, double> bucket_range() const;
  // The focus rank's events in `iteration`, on the shown clock (OpenTrace::iteration_events),
  // cached with the step-through's steps: the Buckets tab's fill reads them every frame.
  const std::vector<trace::Event>& focus_iteration_events(int32_t iteration) { return steps_of(iteration).events; }
  // Puts every open trace on `clock` together (C; --clock). The first switch to the cluster
  // clock builds each trace's cluster view (cluster_view) on a background thread — about a load
  // and an analysis of the file, a minute for 10 M events — while the header says so and the
  // measured clock stays; the switch happens in the frame that finds them built (or in
  // wait_for_analysis). When a trace cannot be replayed, every trace stays measured and
  // clock_error() says why (ClusterClockError's message, which names the fix); the header shows
  // it. A switch refits the view and realigns a compared run, whose times all moved. Returns
  // whether `clock` is shown now.
  bool set_clock(analysis::Clock clock);
  analysis::Clock clock() const { return clock_; }
  // Whether the cluster views are being built, or wait for the memory samples to be read first.
  bool clock_pending() const { return clock_pending_.valid() || (memory_pending() && clock_wanted_ != clock_); }
  // Why the last switch to the cluster clock failed; "" after one that worked.
  const std::string& clock_error() const { return clock_error_; }
  // The header's words for the clock shown: analysis::clock_text of it.
  std::string clock_label() const;
  // "emulated link 4 Gb/s, 50 µs" when the main trace's run emulated its interconnect (meta
  // link_gbps, link_latency_us), else "": the header says it beside the run's name.
  std::string link() const;
  // --live on a run directory or a path not there yet: `source` says which file to follow (the
  // merged rank files while the run goes, run.sqlite at its end); the App switches when it
  // does. The main trace must be what source->poll() returned.
  void follow(std::unique_ptr<LiveSource> source);
  int live_reloads() const { return live_ ? live_->reloads() : 0; }
  // What the live source follows now ("" without one) and how often it merged rank files.
  std::string live_status() const { return live_source_ ? live_source_->status() : ""; }
  int live_merges() const { return live_source_ ? live_source_->merges() : 0; }
  int64_t live_rows_read() const { return live_ ? live_->rows_read() : 0; }

  // ---- State the panels share.
  std::vector<OpenTrace> traces;  // [0] main, [1] compare when given
  double view_t0 = 0, view_t1 = 1;  // visible axis range, ns
  Pick hovered, selected;
  bool pinned_playhead = false;
  int64_t playhead = 0;  // axis ns; the view's centre unless pinned by a click
  bool has_range = false;
  int64_t range_t0 = 0, range_t1 = 0;  // measured span (axis ns)
  std::vector<RangeRow> range_rows;    // summarize_range of it (main trace)
  std::string find_text;
  FindQuery find;
  FindResult find_result;
  int focus_rank = 0;                  // rank index for the buckets and units panels
  // Compare: the run that stepping, the narration, Buckets and Units follow (0: A, 1: B); the
  // last one clicked, Tab switches. focused_trace() clamps it into range.
  int focus_trace = 0;
  OpenTrace& focused_trace() { return traces[size_t(std::clamp(focus_trace, 0, int(traces.size()) - 1))]; }
  int align_iteration = 0;             // compare: iteration aligned across the two runs (at its start)
  std::map<std::pair<int, int>, bool> collapsed;  // (trace, rank index) -> group folded
  // Every rank's secondary lanes folded or not (U), so that more ranks' main and comm lanes (a
  // profiler trace's GPU lanes) and memory graphs fit.
  LaneFolding lane_folding = LaneFolding::Auto;
  // Whether the secondary lanes of a rank so arranged are folded now.
  bool lanes_folded(LaneArrangement arrangement) const {
    if (lane_folding != LaneFolding::Auto) return lane_folding == LaneFolding::Folded;
    return font_scale >= kAutoFoldFontScale || arrangement == LaneArrangement::GpuFirst;
  }
  // Whether `lane` of `rank` is folded now: a secondary lane when lanes_folded, a supporting one
  // with them from a projector's text size on (Note [GPU first]).
  bool folded(const RankData& rank, const DrawnLane& lane) const {
    switch (lane.priority) {
      case LanePriority::Primary: return false;
      case LanePriority::Supporting: return font_scale >= kAutoFoldFontScale && lanes_folded(rank.arrangement);
      case LanePriority::Secondary: return lanes_folded(rank.arrangement);
    }
    return false;
  }
  LayoutReport layout;  // filled by each frame's drawing
  bool measuring = false;              // a left drag on the timeline is measuring a range
  bool dragging_playhead = false;      // a left drag on the ruler is moving the playhead
  bool show_legend = false;            // the legend window (L)
  // The critical path of the narrated iteration over the timeline (K; view_critical_path.cpp).
  CriticalPathOverlay critical_path;
  bool show_help = false;              // the mouse-and-keys window (? or F1)
  float font_scale = 1;                // text size (Ctrl +/-/0); the window applies it
  // The lanes' text size, font_scale or less: chosen each frame by the timeline so that two
  // ranks fit (Note [The timeline's text size]); the window applies it from the next frame.
  float timeline_font_scale = kMaxFontScale;
  float shown_timeline_font_scale = 1;  // the lanes' text size the last frame drew them at
  // The (text size, panel height) at which the timeline last folded every rank but rank 0 to
  // keep the compared runs' text large (Note [The timeline's text size]).
  std::pair<float, float> ranks_folded_for{0, 0};
  float default_font_scale = 1;        // what Ctrl 0 returns to (--font-scale or the screen's)
  // The screen's pixels per logical pixel (the monitor's content scale, the browser's
  // devicePixelRatio): a link's presenter size is font_scale over it.
  float content_scale = 1;
  double measure_from = 0;             // where that drag started (axis ns)
  // The main trace's what-if lanes, drawn under each rank's lanes; null when none was asked for.
  std::shared_ptr<const WhatifLanes> whatif;
  // Rank index `rank`'s what-if collectives (waits: its waits) lane; an empty lane without one.
  const Lane& whatif_lane(size_t rank, bool waits) const;
  std::future<std::shared_ptr<const WhatifLanes>> whatif_pending;
  WhatifRequest whatif_input;         // the What-if tab's fields
  bool open_whatif_tab = false;       // select the What-if tab in the next frame (--whatif-cap-mb)
  // The right panel's tab the last frame drew (Units, Buckets, Details or What-if), which the
  // screenshot's JSON line reports as right_tab.
  std::string right_tab;

  // Re-runs the find query and the range summary after their inputs changed.
  void update_find();
  void update_range();
  // Recomputes traces[1].offset_ns from align_iteration, so that both runs' rank 0 begin that
  // iteration at the same axis time. The focused run stays where it is on screen: when it is B,
  // the view and the playhead move with B's offset.
  void align();
  // The iteration of `trace`'s focus rank (focus_rank clamped into its ranks) at the playhead;
  // trace::kNone outside one. For the focused run, the iteration being narrated.
  int32_t iteration_at_playhead(int trace) const;

  // ---- Step-through and play (app_playback.cpp; the steps and their words: playback.h). They
  // follow focus_rank of the focused trace (focus_trace), one iteration at a time.
  // Play speeds, as the wall seconds one iteration takes to play, whatever its length: a class
  // talks over 10 s (the default) of a 3 ms DDP step and of a 300 ms GPT one alike.
  static constexpr double kPlaySecondsPerIteration[] = {2.5, 5, 10, 20, 40};
  static constexpr int kDefaultPlaySpeed = 2;
  bool playing = false;
  int play_speed = kDefaultPlaySpeed;  // index into kPlaySecondsPerIteration
  std::string narration;  // the step the playhead stands on, in words ("" when none)
  // Moves the playhead to the focus rank's next (+1) or previous (-1) step, into the next or
  // previous iteration at the ends of one; pins it, keeps its iteration in view (move_playhead)
  // and selects the step's span (Details, flows).
  void step(int direction);
  // Puts the pinned playhead at axis time `t`, aligns a compared run on the focus rank's
  // iteration there and brings that iteration into view. See Note [Following the narrated
  // iteration]. Returns whether `t` lies in one of the focus rank's iterations (else the view
  // only pans to keep the playhead in it).
  bool move_playhead(int64_t t);
  // Compare (Tab): the other run takes the keys and the narration, its playhead in the same
  // iteration at the same point of it, and the runs aligned there.
  void focus_other_run();
  // Fits the narrated iteration into the view (I): the playhead's, else the typical one.
  void fit_iteration();
  // The focused run's typical iteration (the window opens on it): of rank 0's steady iterations
  // (Note [Steady steps]), the one whose length is nearest their median; trace::kNone without
  // iterations.
  int32_t typical_iteration() const;
  // Opens on the typical iteration: the playhead on its first step, the view on the iteration.
  void show_typical_iteration();
  // F9: whether the window asked for the --screenshot JSON line of what it shows now; cleared
  // by reading.
  bool take_report_request() { return std::exchange(report_requested_, false); }
  // G: whether the window asked for the link to what it shows now (report.h's deep_link_of; the
  // browser copies it, the desktop prints it); cleared by reading.
  bool take_link_request() { return std::exchange(link_requested_, false); }
  // The narrated iteration and the playhead's step in it (from 0; -1 on no step), as the
  // narration line says them; kNone outside an iteration.
  int32_t narrated_iteration() const { return narrated_iteration_; }
  int narrated_step() const { return int(narrated_index_); }
  // Plays the playhead's iteration from the playhead (or from its start when the playhead is
  // at its end), the whole iteration in kPlaySecondsPerIteration[play_speed]; again: pause.
  void toggle_play();
  // Puts the playhead on step `index` (from 0) of iteration `iteration` of the focus rank and
  // shows that iteration, a compared run aligned on it (headless --iteration / --step); false
  // when there is no such step.
  bool go_to_step(int32_t iteration, int index);

 private:
  // The steps of frame(): take what background work finished, then draw.
  void poll_background();
  // --live: the newer model the follower read, or the file the source switched to.
  void poll_live();
  // Takes finished reads of memory samples (Note [Memory after the first frame]): shows a
  // complete model one returned, and starts the cluster clock a C or --clock asked for meanwhile.
  void take_memory();
  // While the critical path is shown: asks for the focused run's path of the narrated iteration
  // on the clock shown (computed in the background), and takes one that finished.
  void update_critical_path();
  void handle_keys();
  // The header line: the run's name and figures, the find box, the buttons; from
  // kAutoFoldFontScale on, where these would take more than two lines, folded into a Menu button
  // and the clock's name (view_header.cpp).
  void draw_header();
  // The timeline over the two tab panels (stats, find, compare | units, buckets, details, what-if).
  void draw_panels();
  // The line under the header: the playhead's step in words, the play state and the keys.
  void draw_narration_line();
  void draw_header_controls(float find_width, bool in_line);
  void draw_folded_header(const std::vector<std::string>& pieces, float find_width);
  // Playback's part of a frame: advances a playing playhead, refreshes the narration.
  void update_playback();
  // The focus rank's events and steps in `iteration` (cached for the last one asked).
  struct IterationSteps {
    int trace_index = -1;
    int rank_index = -1;
    int32_t iteration = trace::kNone;
    std::vector<trace::Event> events;
    std::vector<LifecycleStep> steps;
  };
  const IterationSteps& steps_of(int32_t iteration);
  // The focus rank of the main trace (focus_rank clamped into range), or null without ranks.
  const RankData* focus();
  // The step the narration was made for (it is made again only when the playhead changes step).
  uint64_t steps_generation_ = 0;  // counts refills of steps_cache_
  uint64_t narrated_generation_ = 0;
  int32_t narrated_iteration_ = trace::kNone;
  int64_t narrated_index_ = -1;
  int narrated_rank_ = -1;
  int narrated_trace_ = -1;
  // set_view, the playhead left where it is (set_view centres one that is not pinned).
  void set_view_keeping_playhead(double t0, double t1);
  // Brings the iteration [t0, t1] (axis ns) holding the playhead `t` into view: see Note
  // [Following the narrated iteration].
  void bring_into_view(int64_t t, int64_t t0, int64_t t1);
  // Where the view and the playhead stand in the focus rank's iteration, so that a switch of
  // clock shows the same moment on the other (app_clock.cpp).
  struct Moment {
    int32_t iteration = trace::kNone;
    int64_t step_index = -1;  // the playhead's step, -1 when it stands on none
    double playhead = 0;      // the playhead's and the view's edges, in iterations from its start
    double view0 = 0, view1 = 0;
  };
  Moment moment();
  void restore(const Moment& moment);
  bool report_requested_ = false;
  bool link_requested_ = false;
  // Each compared run's playhead (its own time) when Tab last left it, so that Tab back within
  // the same iteration returns to the same step.
  std::array<std::optional<int64_t>, 2> left_playhead_;
  // The run whose Units or Buckets tab the right panel last opened on (draw_panels).
  int right_panel_trace_ = -1;
  IterationSteps steps_cache_;
  AppOptions options_;
  WhatifRequest whatif_requested_;  // the last request_whatif's, made again on a clock switch
  analysis::Clock clock_ = analysis::Clock::Measured;
  analysis::Clock clock_wanted_ = analysis::Clock::Measured;  // what the last C or --clock asked
  std::string clock_error_;
  // The cluster views being built, one per open trace (for the measured models in clock_for_).
  std::future<std::vector<std::shared_ptr<const ClusterView>>> clock_pending_;
  std::vector<std::shared_ptr<const Model>> clock_for_;
  // Takes finished cluster views; switches when the cluster clock is still wanted.
  void poll_clock();
  // Shows `clock` on every trace (each has its view for the cluster clock) and resets what
  // named times on the other.
  void show_clock(analysis::Clock clock);
  char find_buffer_[128] = {};
  bool header_folded_ = false;  // this frame's header folded into its Menu line (view_header.cpp)
  std::unique_ptr<LiveFollower> live_;
  std::unique_ptr<LiveSource> live_source_;
  std::future<std::shared_ptr<const Model>> switching_;  // loading the file live_source_ moved to
  // A newer model of the main trace (a live update, or the file the source switched to).
  void adopt_live_model(std::shared_ptr<const Model> fresh);
};

// ---- Panels (one file each).
void draw_timeline(App& app);                      // view_timeline.cpp
// The critical path over a trace panel's lanes: each segment under its lane's first row, joined
// where it passes from lane to lane, and the path's length and keys in the lanes' corner.
// `lane_row` gives a (rank index, lane index)'s first row [y0, y1] on screen, false when not drawn.
void draw_critical_path(App& app, int trace, const TimeMap& map, float right, float top,
                        const std::function<bool(int, int, float&, float&)>& lane_row);  // view_critical_path.cpp
// Draws trace `trace`'s hang over its lanes in the current window's draw list (view_hang.cpp,
// docs/hangs.md; on the measured clock only: the cluster clock replays completed collectives):
// every collective some rank never completed outlined from its begin to its end (the trace's
// end) and labelled "never completed (started)" or "(issued)", and a bar and "culprit" at the
// left of the culprit's main lane.
// `lane_row` gives a lane's first row on screen (false: folded or out of view). Returns how many
// pending collectives it drew.
int draw_hang(const App& app, int trace, const TimeMap& map, float right,
              const std::function<bool(int rank, int lane, float& y0, float& y1)>& lane_row);
// The memory graph of one rank, stacked by category, inside [x0, x0 + width] x [y0, y0 + h].
void draw_memory_graph(App& app, int trace, const RankData& rank, float x0, float y0,
                       float width, float height);  // view_memory.cpp
void draw_buckets(App& app);                       // view_buckets.cpp
void draw_units(App& app);                         // view_units.cpp
void draw_stats(App& app);                         // view_stats.cpp
// The per-rank compute / comm / overlap / exposed table of the trace's analysis (the stats and
// compare panels).
void draw_overlap_table(App& app, const Analysis& analysis, const char* id);  // view_stats.cpp
// A table's header row (ImGui::TableHeadersRow); the header of the table a panel is for
// (`panel_header`: Stats' overlap, Buckets' plans, Find's matches) is counted in
// app.layout.clipped_headers when it is not whole in view.
void table_headers(App& app, bool panel_header = false);  // app.cpp
void draw_find(App& app);                          // view_find.cpp
void draw_compare(App& app);                       // view_compare.cpp
void draw_details(App& app);                       // view_details.cpp
void draw_whatif(App& app);                        // view_whatif.cpp
void draw_legend(App& app);                        // view_legend.cpp
void draw_help(App& app);                          // view_legend.cpp
// The tooltip listing every field of `pick`'s event.
void draw_span_tooltip(App& app, const Pick& pick);  // view_details.cpp

}  // namespace dpscope::view
