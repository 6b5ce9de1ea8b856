// The critical path overlay's computation and words (critical_path_overlay.h).
#include "viewer/critical_path_overlay.h"

#include <cstdio>

#include "trace/error.h"
#include "trace/reader.h"
#include "viewer/background.h"

namespace dpscope::view {

PathOverlay compute_path_overlay(const std::string& file, bool imported, int trace, int32_t iteration,
                                 analysis::Clock clock, std::shared_ptr<const analysis::ClusterClockRun> replay) {
  PathOverlay overlay;
  overlay.trace = trace;
  overlay.iteration = iteration;
  overlay.clock = clock;
  if (iteration < 0) {
    overlay.why_none = "no critical path: the playhead is outside an iteration";
    return overlay;
  }
  if (imported && clock == analysis::Clock::Cluster) {
    overlay.why_none = "no critical path on the cluster clock for an imported run: C back to the measured clock";
    return overlay;
  }
  if (!imported && clock == analysis::Clock::Measured) {
    overlay.why_none = "a dpscope run's critical path is on the cluster clock: press C (docs/critical-path.md)";
    return overlay;
  }
  if (!imported && !replay) {
    overlay.why_none = "no critical path: the cluster clock's replay is not built yet";
    return overlay;
  }
  analysis::RegionRequest request;
  request.kind = analysis::RegionKind::Iteration;
  request.iteration = iteration;
  try {
    trace::Reader reader(file);
    overlay.path = imported ? analysis::kineto_critical_path(reader, file, request)
                            : analysis::cluster_critical_path(reader, file, *replay, request);
  } catch (const analysis::CriticalPathError& error) {
    overlay.why_none = error.what();
  } catch (const trace::TraceError& error) {
    overlay.why_none = error.what();
  }
  return overlay;
}

std::string path_overlay_text(const PathOverlay& overlay) {
  if (!overlay.path) return overlay.why_none + " (K hides it)";
  const analysis::CriticalPath& p = *overlay.path;
  char head[160];
  std::snprintf(head, sizeof(head), "critical path of %s (rank %d): %.3f ms", p.region.c_str(), p.rank,
                double(p.length_ns) / 1e6);
  std::string text = head;
  const char* separator = " - ";
  for (const analysis::BoundBy key : analysis::kBoundKeys) {
    const auto found = p.bound_ns.find(key);
    if (found == p.bound_ns.end() || p.length_ns <= 0) continue;
    char share[96];
    std::snprintf(share, sizeof(share), "%s%s %.1f %%", separator, std::string(analysis::to_string(key)).c_str(),
                  100.0 * double(found->second) / double(p.length_ns));
    text += share;
    separator = ", ";
  }
  return text + " (K hides it)";
}

void CriticalPathOverlay::want(const std::string& file, bool imported, int trace, int32_t iteration,
                               analysis::Clock clock, std::shared_ptr<const analysis::ClusterClockRun> replay) {
  const auto same = [&](int t, int32_t i, analysis::Clock c) { return t == trace && i == iteration && c == clock; };
  if (pending_.valid() && same(pending_trace_, pending_iteration_, pending_clock_)) return;
  if (!pending_.valid() && current_ && same(current_->trace, current_->iteration, current_->clock)) return;
  if (pending_.valid()) return;  // another's: asked again once it has finished (poll)
  pending_trace_ = trace;
  pending_iteration_ = iteration;
  pending_clock_ = clock;
  pending_ = start_background(compute_path_overlay, file, imported, trace, iteration, clock,
                              std::move(replay));
}

bool CriticalPathOverlay::poll() {
  if (!pending_.valid() || !background_done(pending_)) return false;
  current_ = pending_.get();
  return true;
}

void CriticalPathOverlay::wait() {
  if (pending_.valid()) pending_.wait();
  poll();
}

}  // namespace dpscope::view
