// The App's clock (C, --clock): every open trace shown on the measured clock or on the cluster
// clock together, the cluster views built on the first switch, and the header's label.
#include <exception>
#include <utility>

#include "analysis/cluster_clock.h"
#include "viewer/app.h"

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

bool App::set_clock(analysis::Clock clock) {
  if (clock == clock_) return true;
  if (clock == analysis::Clock::Cluster) {
    // Every trace or none: a compared pair on two clocks would compare nothing.
    try {
      for (OpenTrace& t : traces) {
        if (!t.cluster) t.cluster = std::make_shared<const ClusterView>(cluster_view(*t.measured, options_.link));
      }
    } catch (const std::exception& error) {
      clock_error_ = error.what();
      return false;
    }
  }
  clock_error_.clear();
  clock_ = clock;
  for (OpenTrace& t : traces) t.show(clock);
  // Spans and ranges picked on one clock name other times on the other.
  selected = hovered = {};
  has_range = false;
  steps_cache_ = {};
  ++steps_generation_;
  align();
  fit();
  update_find();
  update_range();
  return true;
}

std::string App::clock_label() const {
  if (clock_ == analysis::Clock::Cluster && traces[0].cluster) return analysis::clock_text(traces[0].cluster->label);
  return analysis::clock_text(analysis::ClockLabel{});
}

}  // namespace dpscope::view
