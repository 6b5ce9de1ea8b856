// The App's step-through and play: the keys' targets (step, toggle_play), the slow-motion clock
// that moves a playing playhead, and the narration line's text. Which events are steps and what
// they say is playback.cpp's; this file moves the playhead among them.
#include <imgui.h>

#include <algorithm>

#include "viewer/app.h"
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
      if (s.kind == e.kind && s.begin_ns == e.begin_ns) return {rank_index, int32_t(li), hit};
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

void App::keep_in_view(int64_t t, int64_t t0, int64_t t1) {
  if (double(t) >= view_t0 && double(t) <= view_t1) return;
  const double margin = 0.05 * double(t1 - t0);
  const bool pinned = pinned_playhead;
  pinned_playhead = true;  // set_view must not move the playhead to the view's centre
  if (view_t1 - view_t0 > 4 * double(t1 - t0)) {
    set_view(double(t0) - margin, double(t1) + margin);
  } else {
    const double width = view_t1 - view_t0;
    set_view(double(t) - width / 2, double(t) + width / 2);
  }
  pinned_playhead = pinned;
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
      const IterationSpan* span = rank.find_iteration(iteration);
      playhead = steps.steps[size_t(index)].t_ns + offset;
      pinned_playhead = true;
      selected = {focus_trace, span_of_event(model, focus_rank, steps.steps[size_t(index)].event)};
      keep_in_view(playhead, span->begin_ns + offset, span->end_ns + offset);
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
  pinned_playhead = true;
  playing = true;
  keep_in_view(playhead, span->begin_ns + offset, span->end_ns + offset);
}

bool App::go_to_step(int32_t iteration, int index) {
  const Model& model = *focused_trace().model;
  const RankData* rank = focus();
  if (!rank) return false;
  const IterationSpan* span = rank->find_iteration(iteration);
  const IterationSteps& steps = steps_of(iteration);
  if (!span || index < 0 || size_t(index) >= steps.steps.size()) return false;
  // A compared run shows the same iteration below, not whatever ran at that time.
  align_iteration = iteration;
  align();
  const int64_t offset = focused_trace().offset_ns;
  const double margin = 0.05 * double(span->end_ns - span->begin_ns);
  pinned_playhead = true;
  playhead = steps.steps[size_t(index)].t_ns + offset;
  selected = {focus_trace, span_of_event(model, focus_rank, steps.steps[size_t(index)].event)};
  set_view(double(span->begin_ns + offset) - margin, double(span->end_ns + offset) + margin);
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
}

}  // namespace dpscope::view
