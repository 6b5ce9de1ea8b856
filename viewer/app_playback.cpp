// The App's step-through and play: the keys' targets (step, toggle_play), the slow-motion clock
// that moves a playing playhead, and the narration line's text. Which events are steps and what
// they say is playback.cpp's; this file moves the playhead among them.
#include <imgui.h>

#include <algorithm>
#include <cstdlib>
#include <vector>

#include "analysis/stats.h"
#include "viewer/app.h"
#include "viewer/hang_words.h"
#include "viewer/lod.h"

namespace dpscope::view {

namespace {

// The drawn span of `e` (its lane's row holding a span of its kind that begins when it does),
// so that a step can be selected: Details shows it, flows start from it.
SpanRef span_of_event(const Model& model, int rank_index, const trace::Event& e) {
  const RankData& rank = model.ranks[size_t(rank_index)];
  for (size_t li = 0; li < rank.lanes.size(); ++li) {
    const Lane& lane = rank.lanes[li];
    if (lane.info.lane != e.lane) continue;
    for (int row = 0; row < lane.rows(); ++row) {
      const int64_t hit = span_at(lane, row, e.begin_ns, 0);
      if (hit < 0) continue;
      const Span& s = lane.spans[size_t(hit)];
      if (s.kind() == e.kind && s.begin_ns == e.begin_ns) return {rank_index, int32_t(li), hit};
    }
  }
  return {};
}

}  // namespace

const RankData* App::focus() {
  focus_trace = std::clamp(focus_trace, 0, int(traces.size()) - 1);
  const Model& model = *focused_trace().model;
  if (model.ranks.empty()) return nullptr;
  focus_rank = std::clamp(focus_rank, 0, int(model.ranks.size()) - 1);
  return &model.ranks[size_t(focus_rank)];
}

const App::IterationSteps& App::steps_of(int32_t iteration) {
  const RankData* rank = focus();
  if (steps_cache_.trace_index == focus_trace && steps_cache_.rank_index == focus_rank &&
      steps_cache_.iteration == iteration) {
    return steps_cache_;
  }
  steps_cache_ = IterationSteps{};
  ++steps_generation_;
  steps_cache_.trace_index = focus_trace;
  steps_cache_.rank_index = focus_rank;
  steps_cache_.iteration = iteration;
  if (!rank) return steps_cache_;
  steps_cache_.events = focused_trace().iteration_events(rank->info.rank, iteration);
  steps_cache_.steps = lifecycle_steps(steps_cache_.events);
  return steps_cache_;
}

// Note [Following the narrated iteration]
// A teacher steps (-> <- space), finds a span or clicks a bucket or a unit, and talks about one
// iteration of one rank: the view must show it, and a compared run the same iteration under it.
// Every move of the playhead the viewer makes goes through App::move_playhead, which
//   1. aligns a compared run on the focus rank's iteration at the playhead (App::align): the
//      focused run stays where it is on screen, the other moves to begin that iteration with it;
//   2. brings the iteration into view (bring_into_view): zoomed to it when the view is wider than
//      kFollowZoomIterations iterations (the whole run, say), else panned only as far as needed,
//      the whole iteration when it fits and otherwise the playhead with a margin, so that a view
//      the teacher zoomed into stays zoomed.
// A switch of clock (C) keeps the iteration and the moment (App::moment, App::restore), and Tab
// puts the other run's playhead in the same iteration. Moves by the mouse (a click on the ruler
// or a span) are the user's own and leave the view where it is.
constexpr double kFollowZoomIterations = 3;

void App::set_view_keeping_playhead(double t0, double t1) {
  const bool pinned = pinned_playhead;
  pinned_playhead = true;
  set_view(t0, t1);
  pinned_playhead = pinned;
}

void App::bring_into_view(int64_t t, int64_t t0, int64_t t1) {
  const double length = double(t1 - t0), width = view_t1 - view_t0;
  const double margin = 0.05 * length;
  if (width > kFollowZoomIterations * length) {
    set_view_keeping_playhead(double(t0) - margin, double(t1) + margin);
  } else {
    double shift = 0;
    if (length + 2 * margin <= width) {
      if (double(t0) - margin < view_t0) shift = double(t0) - margin - view_t0;
      if (double(t1) + margin > view_t1) shift = double(t1) + margin - view_t1;
    } else {
      const double edge = 0.05 * width;
      if (double(t) < view_t0 + edge) shift = double(t) - edge - view_t0;
      if (double(t) > view_t1 - edge) shift = double(t) + edge - view_t1;
    }
    if (shift != 0) set_view_keeping_playhead(view_t0 + shift, view_t1 + shift);
  }
}

bool App::move_playhead(int64_t t) {
  pinned_playhead = true;
  playhead = t;
  const RankData* rank = focus();
  const int32_t iteration = rank ? rank->iteration_at(t - focused_trace().offset_ns) : trace::kNone;
  if (iteration == trace::kNone) {
    bring_into_view(t, t, t);
    return false;
  }
  if (traces.size() > 1) {
    align_iteration = iteration;
    align();  // moves the playhead with the view when the focused run is B
  }
  const IterationSpan* span = rank->find_iteration(iteration);
  const int64_t offset = focused_trace().offset_ns;
  bring_into_view(playhead, span->begin_ns + offset, span->end_ns + offset);
  return true;
}

int32_t App::iteration_at_playhead(int trace) const {
  const OpenTrace& t = traces[size_t(std::clamp(trace, 0, int(traces.size()) - 1))];
  if (t.model->ranks.empty()) return trace::kNone;
  const RankData& rank = t.model->ranks[size_t(std::clamp(focus_rank, 0, int(t.model->ranks.size()) - 1))];
  return rank.iteration_at(playhead - t.offset_ns);
}

int32_t App::typical_iteration() const {
  const Model& model = *traces[size_t(std::clamp(focus_trace, 0, int(traces.size()) - 1))].model;
  if (model.ranks.empty() || model.ranks[0].iterations.empty()) return trace::kNone;
  const std::vector<IterationSpan>& all = model.ranks[0].iterations;
  const size_t from = std::min(all.size() - 1, size_t(core::steady_from(all.size())));
  std::vector<int64_t> lengths;
  for (size_t i = from; i < all.size(); ++i) lengths.push_back(all[i].end_ns - all[i].begin_ns);
  std::nth_element(lengths.begin(), lengths.begin() + std::ptrdiff_t(lengths.size() / 2), lengths.end());
  const int64_t median = lengths[lengths.size() / 2];
  const IterationSpan* typical = &all[from];
  for (size_t i = from; i < all.size(); ++i) {
    if (std::llabs(all[i].end_ns - all[i].begin_ns - median) < std::llabs(typical->end_ns - typical->begin_ns - median)) {
      typical = &all[i];
    }
  }
  return typical->iteration;
}

void App::show_typical_iteration() {
  const int32_t iteration = typical_iteration();
  if (iteration != trace::kNone && !go_to_step(iteration, 0)) fit_iteration();
}

void App::focus_other_run() {
  if (traces.size() < 2) return;
  const int from = std::clamp(focus_trace, 0, 1);
  const int32_t iteration = iteration_at_playhead(from);
  const RankData* was = focus();
  const IterationSpan* old_span = was ? was->find_iteration(iteration) : nullptr;
  const double fraction = old_span ? double(playhead - traces[size_t(from)].offset_ns - old_span->begin_ns) /
                                         double(std::max<int64_t>(1, old_span->end_ns - old_span->begin_ns))
                                   : 0;
  left_playhead_[size_t(from)] = playhead - traces[size_t(from)].offset_ns;
  focus_trace = 1 - from;
  playing = false;
  const RankData* rank = focus();
  const IterationSpan* span = rank && old_span ? rank->find_iteration(iteration) : nullptr;
  if (!span) return;
  // Back where this run's playhead was when Tab left it, if that is in this iteration; else at
  // the same point of the iteration as the other run's.
  const std::optional<int64_t> left = left_playhead_[size_t(focus_trace)];
  const double length = double(span->end_ns - span->begin_ns);
  const int64_t t = left && rank->iteration_at(*left) == iteration ? *left : span->begin_ns + int64_t(fraction * length);
  move_playhead(t + focused_trace().offset_ns);
}

void App::fit_iteration() {
  const RankData* rank = focus();
  if (!rank) return;
  int32_t iteration = rank->iteration_at(playhead - focused_trace().offset_ns);
  if (iteration == trace::kNone) iteration = typical_iteration();
  const IterationSpan* span = rank->find_iteration(iteration);
  if (!span) return;
  if (!pinned_playhead || rank->iteration_at(playhead - focused_trace().offset_ns) != iteration) {
    move_playhead(span->begin_ns + focused_trace().offset_ns);
  }
  const int64_t offset = focused_trace().offset_ns;
  const double margin = 0.05 * double(span->end_ns - span->begin_ns);
  set_view_keeping_playhead(double(span->begin_ns + offset) - margin, double(span->end_ns + offset) + margin);
}

void App::step(int direction) {
  const Model& model = *focused_trace().model;
  const RankData* focused = focus();
  if (!focused) return;
  const RankData& rank = *focused;
  const int64_t offset = focused_trace().offset_ns;
  const int64_t t = playhead - offset;
  // Start in the playhead's iteration, else the first one after (before) it.
  int32_t iteration = rank.iteration_at(t);
  if (iteration == trace::kNone) {
    for (const IterationSpan& span : rank.iterations) {
      if (direction > 0 && span.begin_ns > t) { iteration = span.iteration; break; }
      if (direction < 0 && span.end_ns < t) iteration = span.iteration;
    }
  }
  for (int tries = 0; tries < 3 && iteration != trace::kNone; ++tries) {
    const IterationSteps& steps = steps_of(iteration);
    const int64_t index = direction > 0 ? next_step(steps.steps, t) : previous_step(steps.steps, t);
    if (index >= 0) {
      selected = {focus_trace, span_of_event(model, focus_rank, steps.steps[size_t(index)].event)};
      move_playhead(steps.steps[size_t(index)].t_ns + offset);
      return;
    }
    iteration += direction;  // past the iteration's last (first) step: the next (previous) one
    if (!rank.find_iteration(iteration)) return;
  }
}

void App::toggle_play() {
  if (playing) {
    playing = false;
    return;
  }
  const RankData* focused = focus();
  if (!focused) return;
  const RankData& rank = *focused;
  const int64_t offset = focused_trace().offset_ns;
  int32_t iteration = rank.iteration_at(playhead - offset);
  if (iteration == trace::kNone && !rank.iterations.empty()) iteration = rank.iterations.front().iteration;
  const IterationSpan* span = rank.find_iteration(iteration);
  if (!span) return;
  // From the playhead, or from the iteration's start when it stands at (or near) the end.
  if (playhead - offset < span->begin_ns || playhead - offset >= span->end_ns - (span->end_ns - span->begin_ns) / 100) {
    playhead = span->begin_ns + offset;
  }
  playing = true;
  move_playhead(playhead);
}

bool App::go_to_step(int32_t iteration, int index) {
  const Model& model = *focused_trace().model;
  const RankData* rank = focus();
  if (!rank) return false;
  const IterationSpan* span = rank->find_iteration(iteration);
  const IterationSteps& steps = steps_of(iteration);
  if (!span || index < 0 || size_t(index) >= steps.steps.size()) return false;
  // A compared run shows the same iteration below, not whatever ran at that time.
  move_playhead(steps.steps[size_t(index)].t_ns + focused_trace().offset_ns);
  selected = {focus_trace, span_of_event(model, focus_rank, steps.steps[size_t(index)].event)};
  fit_iteration();
  return true;
}

void App::update_playback() {
  const Model& model = *focused_trace().model;
  const RankData* focused = focus();
  if (!focused) return;
  const RankData& rank = *focused;
  const int64_t offset = focused_trace().offset_ns;
  if (playing) {
    const int32_t iteration = rank.iteration_at(playhead - offset);
    const IterationSpan* span = rank.find_iteration(iteration);
    if (!span) {
      playing = false;
    } else {
      const double advance = double(ImGui::GetIO().DeltaTime) * double(span->end_ns - span->begin_ns) /
                             kPlaySecondsPerIteration[play_speed];
      playhead = std::min(span->end_ns + offset, playhead + std::max<int64_t>(1, int64_t(advance)));
      if (playhead >= span->end_ns + offset) playing = false;
      // Follow the playhead: page the view on when it reaches the right edge.
      if (double(playhead) > view_t1 - 0.05 * (view_t1 - view_t0)) {
        const double width = view_t1 - view_t0;
        set_view(double(playhead) - 0.1 * width, double(playhead) + 0.9 * width);
      }
    }
  }
  // The words change only when the playhead reaches another step: narrate once per step, not
  // once per frame.
  const int32_t iteration = rank.iteration_at(playhead - offset);
  const IterationSteps* steps = iteration == trace::kNone ? nullptr : &steps_of(iteration);
  const int64_t index = steps ? step_at(steps->steps, playhead - offset) : -1;
  if (steps_generation_ == narrated_generation_ && iteration == narrated_iteration_ &&
      index == narrated_index_ && focus_rank == narrated_rank_ && focus_trace == narrated_trace_) {
    return;
  }
  narrated_generation_ = steps_generation_;
  narrated_iteration_ = iteration;
  narrated_index_ = index;
  narrated_rank_ = focus_rank;
  narrated_trace_ = focus_trace;
  narration = index >= 0 ? narrate(model, steps->events, steps->steps, size_t(index)) : "";
  // In the last steps of a hung run, who waits for whom (docs/hangs.md): from the first iteration
  // in which a collective was never completed.
  const OpenTrace& t = traces[size_t(focus_trace)];
  if (!narration.empty() && t.analysis && t.analysis->hang && iteration != trace::kNone) {
    int32_t stuck_from = INT32_MAX;
    for (const analysis::HangGroup& g : t.analysis->hang->groups) {
      for (const analysis::HangRank& r : g.ranks) {
        for (const analysis::HangCollective& c : r.pending) {
          if (c.iteration != trace::kNone) stuck_from = std::min(stuck_from, c.iteration);
        }
      }
    }
    const std::string who = hang_who_waits(*t.analysis->hang);
    if (iteration >= stuck_from && !who.empty()) narration += "; hang: " + who;
  }
}

}  // namespace dpscope::view
