// Where a critical path's region lies on each rank: the window of an iteration or of an
// annotation's instance (critical_path.h's RegionRequest), chosen the one way for dpscope's runs
// and imported traces, with the refusals that name the file and the fix.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "analysis/critical_path.h"

namespace dpscope::analysis {

// An event that may bound a region: a host-thread event of a rank, by the name the profiler or
// the engine gave it, and its iteration when it is an `iteration` phase.
struct RegionCandidate {
  int32_t rank = 0;
  int64_t begin_ns = 0;
  int64_t end_ns = 0;
  std::string name;
  int32_t iteration = trace::kNone;
  bool on_thread = true;  // false: a GPU event, which only bounds the whole trace's region
};

// A region on one rank.
struct Window {
  int64_t begin_ns = 0;
  int64_t end_ns = 0;
  std::string label;  // "iteration 5", "ProfilerStep instance 2"
};

// Each rank's window of `request` among `candidates`: the iteration asked for (by default the
// first steady one of the most iterations any rank has, Note [Steady steps]), or the instance-th
// (from 0, by begin) thread event whose name begins with the annotation; an empty annotation is
// the whole trace, from its first event to its last (HTA's annotation ""). Ranks without it are
// left out.
// Throws CriticalPathError naming `path` when no rank has it: no iterations, no such name, an
// instance or iteration out of range. Pure.
std::map<int32_t, Window> region_windows(const std::vector<RegionCandidate>& candidates,
                                         const RegionRequest& request, const std::string& path);

}  // namespace dpscope::analysis
