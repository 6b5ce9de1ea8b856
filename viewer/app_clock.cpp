// The App's clock (C, --clock): every open trace shown on the measured clock or on the cluster
// clock together, the cluster views built on a background thread on the first switch, and the
// header's label.
#include <chrono>
#include <exception>
#include <utility>
#include <vector>

#include "analysis/cluster_clock.h"
#include "viewer/app.h"
#include "viewer/background.h"

namespace dpscope::view {

void OpenTrace::show(analysis::Clock clock) {
  shown = clock;
  if (clock == analysis::Clock::Cluster && cluster) {
    model = cluster->model;
    analysis = cluster->analysis;
  } else {
    shown = analysis::Clock::Measured;
    model = measured;
    analysis = measured_analysis;
  }
}

std::vector<trace::Event> OpenTrace::iteration_events(int32_t rank, int32_t iteration) const {
  std::vector<trace::Event> events;
  const RankData* found = nullptr;
  for (const RankData& r : measured->ranks) found = r.info.rank == rank ? &r : found;
  const IterationSpan* span = found ? found->find_iteration(iteration) : nullptr;
  if (!span) return events;
  const analysis::ClusterClockRun* run =
      shown == analysis::Clock::Cluster && cluster ? cluster->run.get() : nullptr;
  for (const Lane& lane : found->lanes) {
    for (const trace::Event& e : details->events(rank, lane, span->begin_ns, span->end_ns)) {
      // The iteration's own: a collective of the previous one still running at its start is not.
      if (e.begin_ns >= span->begin_ns) events.push_back(run ? run->to_cluster(e) : e);
    }
  }
  return events;
}

bool App::set_clock(analysis::Clock clock) {
  clock_wanted_ = clock;
  if (clock == clock_) return true;
  bool built = true;
  for (const OpenTrace& t : traces) built = built && (clock == analysis::Clock::Measured || t.cluster);
  if (built) {
    show_clock(clock);
    return true;
  }
  // The replay maps the memory samples: it starts once they are in (take_memory), Note [Memory
  // after the first frame].
  if (memory_pending()) return false;
  for (const OpenTrace& t : traces) {
    if (t.memory_error.empty()) continue;
    clock_error_ = "the cluster clock maps the memory samples, which could not be read: " + t.memory_error;
    clock_wanted_ = clock_;
    return false;
  }
  if (!clock_pending_.valid()) {
    clock_error_.clear();
    clock_for_.clear();
    for (const OpenTrace& t : traces) clock_for_.push_back(t.measured);
    // Every trace or none: a compared pair on two clocks would compare nothing. The first
    // failure ends the work and comes out of get() in poll_clock.
    clock_pending_ = start_background([models = clock_for_, link = options_.link] {
      std::vector<std::shared_ptr<const ClusterView>> views;
      for (const auto& m : models) views.push_back(std::make_shared<const ClusterView>(cluster_view(*m, link)));
      return views;
    });
  }
  return false;
}

void App::poll_clock() {
  if (!clock_pending_.valid() ||
      !background_done(clock_pending_)) {
    return;
  }
  std::vector<std::shared_ptr<const ClusterView>> views;
  try {
    views = clock_pending_.get();
  } catch (const std::exception& error) {
    clock_error_ = error.what();
    clock_wanted_ = clock_;
    return;
  }
  for (size_t i = 0; i < traces.size() && i < views.size(); ++i) {
    // A live reload replaced the model meanwhile: its view would show the older file.
    if (traces[i].measured == clock_for_[i]) traces[i].cluster = views[i];
  }
  if (clock_wanted_ != clock_) set_clock(clock_wanted_);
}

App::Moment App::moment() {
  Moment m;
  const RankData* rank = focus();
  if (!rank) return m;
  const int64_t offset = focused_trace().offset_ns;
  m.iteration = rank->iteration_at(playhead - offset);
  if (m.iteration == trace::kNone) m.iteration = rank->iteration_at(int64_t((view_t0 + view_t1) / 2) - offset);
  const IterationSpan* span = rank->find_iteration(m.iteration);
  if (!span) return Moment{};
  const double begin = double(span->begin_ns + offset), length = double(std::max<int64_t>(1, span->end_ns - span->begin_ns));
  m.playhead = (double(playhead) - begin) / length;
  m.view0 = (view_t0 - begin) / length;
  m.view1 = (view_t1 - begin) / length;
  const std::vector<LifecycleStep>& steps = steps_of(m.iteration).steps;
  const int64_t at = step_at(steps, playhead - offset);
  if (pinned_playhead && at >= 0 && steps[size_t(at)].t_ns == playhead - offset) m.step_index = at;
  return m;
}

void App::restore(const Moment& m) {
  const RankData* rank = focus();
  const IterationSpan* span = rank ? rank->find_iteration(m.iteration) : nullptr;
  if (!span) {
    fit();
    return;
  }
  const int64_t offset = focused_trace().offset_ns;
  const double begin = double(span->begin_ns + offset), length = double(std::max<int64_t>(1, span->end_ns - span->begin_ns));
  const std::vector<LifecycleStep>& steps = steps_of(m.iteration).steps;
  // The same step where the playhead stood on one: its time moved with the clock, its words did not.
  const int64_t t = m.step_index >= 0 && size_t(m.step_index) < steps.size()
                        ? steps[size_t(m.step_index)].t_ns + offset
                        : int64_t(begin + m.playhead * length);
  set_view_keeping_playhead(begin + m.view0 * length, begin + m.view1 * length);
  playhead = t;
}

void App::show_clock(analysis::Clock clock) {
  clock_error_.clear();
  const Moment before = moment();
  clock_ = clock;
  for (OpenTrace& t : traces) t.show(clock);
  // What-if lanes are drawn on the clock they were predicted on: predict again on this one.
  if (whatif || whatif_pending.valid()) request_whatif(whatif_requested_);
  // Spans and ranges picked on one clock name other times on the other.
  selected = hovered = {};
  has_range = false;
  steps_cache_ = {};
  ++steps_generation_;
  // The same iteration and moment in view on the new clock. See Note [Following the narrated
  // iteration].
  if (before.iteration != trace::kNone) align_iteration = before.iteration;
  align();
  restore(before);
  update_find();
  update_range();
}

std::string App::clock_label() const {
  if (clock_ == analysis::Clock::Cluster && traces[0].cluster) return analysis::clock_text(traces[0].cluster->label);
  std::string label = analysis::clock_text(analysis::ClockLabel{});
  if (clock_pending() && clock_wanted_ == analysis::Clock::Cluster) label += " (replaying on the cluster clock...)";
  return label;
}

}  // namespace dpscope::view
