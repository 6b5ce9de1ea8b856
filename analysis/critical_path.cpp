// critical_path.h's entry point: which graph a run gets (the cluster clock's for dpscope's runs,
// HTA's for imported traces), and critical_path_region.h's choice of each rank's window.
#include "analysis/critical_path.h"

#include <algorithm>
#include <set>

#include "analysis/critical_path_region.h"
#include "core/steady_steps.h"
#include "trace/vocabulary.h"

namespace dpscope::analysis {

std::string_view to_string(BoundBy b) {
  switch (b) {
    case BoundBy::CpuBound: return "cpu_bound";
    case BoundBy::CommBound: return "comm_bound";
    case BoundBy::GpuComputeBound: return "gpu_compute_bound";
    case BoundBy::GpuCommBound: return "gpu_comm_bound";
    case BoundBy::GpuKernelLaunchOverhead: return "gpu_kernel_launch_overhead";
    case BoundBy::GpuKernelKernelOverhead: return "gpu_kernel_kernel_overhead";
  }
  return "?";
}

namespace {

std::map<int32_t, Window> iteration_windows(const std::vector<RegionCandidate>& candidates,
                                            const RegionRequest& request, const std::string& path) {
  std::map<int32_t, std::map<int32_t, const RegionCandidate*>> by_rank;
  std::set<int32_t> iterations;
  for (const RegionCandidate& c : candidates) {
    if (c.iteration == trace::kNone) continue;
    by_rank[c.rank][c.iteration] = &c;
    iterations.insert(c.iteration);
  }
  if (iterations.empty()) {
    throw CriticalPathError(path + ": has no iterations (no `iteration` phases, no ProfilerSteps) to take a "
                            "step's critical path from: name a region with --annotation NAME --instance K");
  }
  const int32_t count = *iterations.rbegin() + 1;
  const int32_t wanted = request.iteration.value_or(std::min(core::steady_from(size_t(count)), count - 1));
  if (!iterations.count(wanted)) {
    throw CriticalPathError(path + ": has no iteration " + std::to_string(wanted) + " (its iterations are " +
                            std::to_string(*iterations.begin()) + ".." + std::to_string(count - 1) +
                            "): give --iteration N within them");
  }
  std::map<int32_t, Window> windows;
  for (const auto& [rank, its] : by_rank) {
    const auto found = its.find(wanted);
    if (found == its.end()) continue;
    windows[rank] = Window{found->second->begin_ns, found->second->end_ns, "iteration " + std::to_string(wanted)};
  }
  return windows;
}

std::map<int32_t, Window> whole_trace_windows(const std::vector<RegionCandidate>& candidates, const std::string& path) {
  std::map<int32_t, Window> windows;
  for (const RegionCandidate& c : candidates) {
    const auto [at, fresh] = windows.emplace(c.rank, Window{c.begin_ns, c.end_ns, "the whole trace"});
    at->second.begin_ns = std::min(at->second.begin_ns, c.begin_ns);
    at->second.end_ns = std::max(at->second.end_ns, c.end_ns);
  }
  if (windows.empty()) throw CriticalPathError(path + ": has no events to take a critical path from: give another run");
  return windows;
}

std::map<int32_t, Window> annotation_windows(const std::vector<RegionCandidate>& candidates,
                                             const RegionRequest& request, const std::string& path) {
  if (request.annotation.empty()) return whole_trace_windows(candidates, path);
  std::map<int32_t, std::vector<const RegionCandidate*>> by_rank;
  for (const RegionCandidate& c : candidates) {
    if (c.on_thread && c.name.compare(0, request.annotation.size(), request.annotation) == 0) by_rank[c.rank].push_back(&c);
  }
  if (by_rank.empty()) {
    throw CriticalPathError(path + ": no event's name begins with \"" + request.annotation +
                            "\": give the beginning of an annotation's name (dpscope-view's Find lists them)");
  }
  size_t most = 0;
  std::map<int32_t, Window> windows;
  const std::string label = request.annotation + " instance " + std::to_string(request.instance);
  for (auto& [rank, found] : by_rank) {
    std::stable_sort(found.begin(), found.end(),
                     [](const RegionCandidate* a, const RegionCandidate* b) { return a->begin_ns < b->begin_ns; });
    most = std::max(most, found.size());
    if (request.instance >= 0 && size_t(request.instance) < found.size()) {
      const RegionCandidate& c = *found[size_t(request.instance)];
      windows[rank] = Window{c.begin_ns, c.end_ns, label};
    }
  }
  if (windows.empty()) {
    throw CriticalPathError(path + ": \"" + request.annotation + "\" has " + std::to_string(most) +
                            " instances on a rank, so there is no instance " + std::to_string(request.instance) +
                            ": give --instance K from 0 to " + std::to_string(int64_t(most) - 1));
  }
  return windows;
}

}  // namespace

std::map<int32_t, Window> region_windows(const std::vector<RegionCandidate>& candidates,
                                         const RegionRequest& request, const std::string& path) {
  return request.kind == RegionKind::Iteration ? iteration_windows(candidates, request, path)
                                               : annotation_windows(candidates, request, path);
}

CriticalPath critical_path(trace::Reader& reader, const std::string& path, const RegionRequest& request,
                           const std::optional<core::LinkSpec>& link, ComputeTime compute) {
  if (!reader.meta_value(std::string(trace::meta_key::kImportedFrom)).empty()) {
    return kineto_critical_path(reader, path, request);
  }
  ClusterClockRun run;
  try {
    run = cluster_clock(reader, path, link, compute);
  } catch (const ClusterClockError& error) {
    throw CriticalPathError(std::string(error.what()) +
                            " (the critical path of a dpscope run is taken on the cluster clock)");
  }
  return cluster_critical_path(reader, path, run, request);
}

}  // namespace dpscope::analysis
