// The critical path of a region of a run (a step, or an annotation's instance): the chain of
// dependent work that sets its length, and what bounds each piece of it (docs/critical-path.md).
// dpscope's own runs take it from the cluster clock's replay (critical_path_cluster.cpp), imported
// PyTorch profiler traces from Holistic Trace Analysis's graph (critical_path_kineto.cpp).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "analysis/cluster_clock.h"
#include "trace/reader.h"

namespace dpscope::analysis {

// A region that has no critical path (no iterations, no such annotation or instance, a run the
// cluster clock cannot replay, an imported run without Kineto's categories); the message is one
// line naming the file and the fix.
class CriticalPathError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// What bounds a piece of the path. The keys are HTA's (critical_path_analysis.py's BoundType, its
// gpu_communication_bound spelled gpu_comm_bound) plus comm_bound for dpscope's CPU runs.
enum class BoundBy : uint8_t {
  CpuBound,                 // compute on a CPU thread (an operator, a phase's own time)
  CommBound,                // a host collective on the link (dpscope's runs, cluster clock)
  GpuComputeBound,          // a GPU kernel, memcpy or memset that is not communication
  GpuCommBound,             // an NCCL kernel
  GpuKernelLaunchOverhead,  // from a launch's begin on the CPU to its kernel's begin on an idle stream
  GpuKernelKernelOverhead,  // the gap between two kernels of one stream
};
inline constexpr BoundBy kBoundKeys[] = {
    BoundBy::CpuBound,     BoundBy::CommBound,     BoundBy::GpuComputeBound,
    BoundBy::GpuCommBound, BoundBy::GpuKernelLaunchOverhead, BoundBy::GpuKernelKernelOverhead};
// "cpu_bound", "comm_bound", ... as `stats --json` spells them.
std::string_view to_string(BoundBy b);

// Which region: an iteration (its `iteration` phase; imported runs: its ProfilerStep), or the
// K-th instance (from 0, by begin, on the host threads) of the events whose name begins with NAME
// (an imported phase by the profiler's own name: ProfilerStep#7 for an iteration); an empty NAME
// is the whole trace, as HTA's annotation "" is.
enum class RegionKind : uint8_t { Iteration, Annotation };
struct RegionRequest {
  RegionKind kind = RegionKind::Iteration;
  std::optional<int32_t> iteration;  // nullopt: the first steady iteration (Note [Steady steps])
  std::string annotation;
  int64_t instance = 0;
};

// One event's share of the path: the time the path spends in it (its own time, not its children's).
struct PathEvent {
  std::string name;
  int32_t rank = 0;
  std::string lane;  // the lane's name
  int64_t begin_ns = 0;  // the event's begin on the path's clock, from the run's start
  int64_t on_path_ns = 0;
  BoundBy bound = BoundBy::CpuBound;
};

// One piece of the path where it runs, for drawing it over the timeline: the lane it lies on and
// its span on the path's clock in the trace's own nanoseconds (the measured clock's times for an
// imported run, ClusterClockRun::to_cluster's for dpscope's runs).
struct PathSegment {
  int32_t rank = 0;
  trace::LaneId lane = 0;
  int64_t begin_ns = 0;
  int64_t end_ns = 0;
  BoundBy bound = BoundBy::CpuBound;
};

struct CriticalPath {
  std::string region;  // "iteration 5", "[param|...|forward] instance 1"
  std::string clock;   // "cluster" (dpscope's runs) or "measured" (imported traces)
  int32_t rank = 0;    // the rank the region was taken on (the one whose region is longest)
  int64_t region_ns = 0;  // the region's span on that rank
  int64_t length_ns = 0;  // the path's length: the sum of its pieces
  std::map<BoundBy, int64_t> bound_ns;  // each key's time on the path (keys with none left out)
  std::vector<PathEvent> events;  // every event with time on the path, longest first
  std::vector<PathSegment> segments;  // the path's pieces in time order (0-length ones left out)
  std::vector<std::string> notes;  // what the reader should know (syncs HTA reads that the run lacks, ...)
};

// The critical path of `request`'s region of the run `reader` reads (`path` names it in errors).
// An imported run (meta imported_from) gets HTA's graph on its measured clock; any other run the
// cluster clock's dependencies on `link` (nullopt: the run's own emulated link) with `compute`.
// Throws CriticalPathError. Thread-safety: uses `reader`, which the calling thread must own.
CriticalPath critical_path(trace::Reader& reader, const std::string& path, const RegionRequest& request,
                           const std::optional<core::LinkSpec>& link = std::nullopt,
                           ComputeTime compute = ComputeTime::Steady);

// The path through a cluster-clock replay (critical_path_cluster.cpp, Note [Critical path on the
// cluster clock]). Pure, given `run` and the events of `reader`.
CriticalPath cluster_critical_path(trace::Reader& reader, const std::string& path, const ClusterClockRun& run,
                                   const RegionRequest& request);

// The path through HTA's graph of an imported rank (critical_path_kineto.cpp, Note [HTA's critical
// path graph]), on the rank whose path is longest.
CriticalPath kineto_critical_path(trace::Reader& reader, const std::string& path, const RegionRequest& request);

}  // namespace dpscope::analysis
