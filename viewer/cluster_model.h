// The viewer's cluster clock (C, --clock cluster): a loaded trace replayed as a cluster would run
// it (analysis/cluster_clock.h, docs/cluster-clock.md), as a second Model of the same shape as
// the measured one, so that the timeline, memory graphs and stats panel draw it unchanged.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "analysis/clock_choice.h"
#include "analysis/cluster_clock.h"
#include "viewer/analysis.h"
#include "viewer/model.h"

namespace dpscope::view {

// One trace on the cluster clock: what the panels read instead of the measured model and its
// analysis, and the label the header shows (analysis::clock_text).
struct ClusterView {
  std::shared_ptr<const Model> model;
  std::shared_ptr<const Analysis> analysis;
  analysis::ClockLabel label;
  std::vector<std::string> warnings;  // the replay's (ClusterClockRun::warnings)
  // The replay itself, for what is read from the file by measured times and shown on this clock
  // (the step-through's events: App::steps_of maps them with ClusterClockRun::to_cluster).
  std::shared_ptr<const analysis::ClusterClockRun> run;
};

// `measured`'s file replayed on `link`, or on the run's emulated link when nullopt: every event
// read again and mapped through ClusterClockRun::to_cluster into lanes sorted as load_model sorts
// them (Note [Lane rows]), every memory sample through to_cluster(rank, ts), iterations and
// memory peaks found again, and the stats panel's figures from compute_stats(reader, run) on that
// clock. The spans name no event (Span::kNoEvent): DetailSource looks events up by their
// measured times, so Details shows a cluster span's times and kind only. Throws
// analysis::ClusterClockError (its message names the fix) when the run cannot be replayed: no
// link recorded nor given, a GPU run, a trace without CPU times; trace::TraceError when the file
// cannot be read. About as long as loading and analysing the file once more. Thread-safety: any
// thread; `measured` is only read.
ClusterView cluster_view(const Model& measured, const std::optional<core::LinkSpec>& link);

}  // namespace dpscope::view
