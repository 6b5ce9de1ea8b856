// The critical path of an imported PyTorch profiler trace: Holistic Trace Analysis's graph
// (hta/analyzers/critical_path_analysis.py) rebuilt from the run file, one rank at a time, and its
// longest path, as Note [HTA's critical path graph] says.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <set>
#include <unordered_map>

#include "analysis/critical_path.h"
#include "analysis/critical_path_graph.h"
#include "analysis/critical_path_region.h"
#include "analysis/gpu_breakdown.h"
#include "trace/vocabulary.h"

namespace dpscope::analysis {

// Note [HTA's critical path graph]
// HTA's critical_path_analysis (v0.5, MIT) builds a DAG of points in time on one rank and takes
// its longest path; this is the same graph, over what the import keeps (docs/kineto.md):
//  1. The region: the window of an annotation's instance (or an iteration's ProfilerStep). Its
//     CPU events are those of the host threads that begin inside it and last more than 0; its
//     GPU events those whose CPU launch is one of them.
//  2. Nodes: a begin and an end for each CPU event of Kineto's category cpu_op, cuda_runtime or
//     cuda_driver (the import keeps the category in a mark's `value`) and for each kernel, memcpy
//     and memset. Annotations (user_annotation, the phases) and Python functions have none: they
//     shape the call stacks only.
//  3. Each thread's call stack (HTA's compare_events order; an end pops the top), the backward
//     thread merged into the forward thread when each is the only thread with "autograd" or
//     "forward" events. A depth-first walk links each node-holding event's begin and end to the
//     previous one: weight the time between them, except between top-level operators (weight 0)
//     and across a blocking sync call (cudaDeviceSynchronize, cudaStreamSynchronize, ...: 0).
//  4. The CUDA runtime's lock: cudaLaunchKernel, cudaMemcpyAsync and cudaHostAlloc on any thread
//     are chained in the order they end.
//  5. Kernels, by begin: an edge from its launch's begin (the launch overhead) when its stream
//     was empty at the launch (queue length 1 after it, 0 after the kernel) and the stream's
//     previous kernel had ended before; else from the stream's previous kernel's end (the
//     kernel-kernel overhead) when that gap is under 1.5 ms; and a weight-0 edge from the launch
//     otherwise (HTA's tests and these numbers set CRITICAL_PATH_ADD_ZERO_WEIGHT_LAUNCH_EDGE).
//  6. Syncs: a Context Sync record ties every stream's last kernel to its CPU call's end, a
//     Stream Sync its own stream's. An Event Sync ties the kernel its event follows (the last
//     launched onto the recording stream before cudaEventRecord) to its call's end, a Stream
//     Wait Event that kernel to the next kernel its stream launches from the waiting thread (and
//     then neither a launch nor a kernel-kernel edge leads there unless the sync ended first).
//     The run file keeps no correlation ids: a record is matched to its CPU call by time (the
//     sync call that holds its begin), and the import writes the cudaEventRecord's time and its
//     stream's lane (formats/kineto_sync.h). Traces before PyTorch 2.1 lack the event record's
//     correlation: their event syncs add no edge, and the result says so.
//  7. Times are HTA's whole microseconds: a trace with nanosecond times rounded as HTA's parser
//     rounds it (Note [GPU breakdown]), one in whole microseconds back to them (round_to_whole_us).
//  8. The longest path as networkx's dag_longest_path takes it (weights of -1 µs or less as 0),
//     each edge bound by what it is: an operator's own time cpu_bound, a kernel's
//     gpu_compute_bound or gpu_comm_bound (an NCCL name, analysis/gpu_breakdown.h), the two delays
//     their overheads; edges between events bound nothing.
// On HTA's simple_add trace this gives HTA's length and shares exactly (docs/critical-path.md).

namespace {

using namespace hta_graph;

constexpr int64_t kKernelKernelDelayThresholdNs = 1'500'000;  // HTA's 1500 µs

bool one_of(std::string_view name, std::initializer_list<std::string_view> names) {
  return std::find(names.begin(), names.end(), name) != names.end();
}
bool is_launch_name(std::string_view n) {
  return one_of(n, {"cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cuLaunchKernelEx",
                    "cudaMemcpyAsync", "cudaMemsetAsync", "hipLaunchKernel", "hipExtModuleLaunchKernel",
                    "hipMemsetAsync", "hipMemcpyAsync", "hipMemcpyWithStream",
                    "runFunction - job_prep_and_submit_for_execution"});
}
bool takes_runtime_lock(std::string_view n) { return one_of(n, {"cudaHostAlloc", "cudaLaunchKernel", "cudaMemcpyAsync"}); }
bool is_blocking_call(std::string_view n) {
  return one_of(n, {"cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventQuery", "cudaEventSynchronize",
                    "cudaMemcpy", "cudaMemcpyAsync"});
}

// ---- Reading a rank ---------------------------------------------------------------------------

struct RankEvents {
  std::vector<GraphEvent> events;
  std::map<trace::LaneId, std::string> lane_names;
  bool categories = false;  // some mark carries Kineto's category
};

std::map<int32_t, RankEvents> read_ranks(trace::Reader& reader, const std::vector<std::string>& names) {
  std::map<int32_t, RankEvents> ranks;
  std::map<std::pair<int32_t, trace::LaneId>, trace::LaneKind> kinds;
  for (const trace::LaneInfo& lane : reader.lanes()) {
    kinds[{lane.rank, lane.lane}] = lane.kind;
    ranks[lane.rank].lane_names[lane.lane] = lane.name;
  }
  auto text = [&](int64_t id) -> std::string_view {
    return id >= 0 && size_t(id) < names.size() ? std::string_view(names[size_t(id)]) : std::string_view();
  };
  reader.for_each_event([&](const trace::Event& e) {
    const auto kind = kinds.find({e.rank, e.lane});
    if (kind == kinds.end()) return true;
    RankEvents& rank = ranks[e.rank];
    GraphEvent g;
    g.begin_ns = e.begin_ns;
    g.end_ns = e.end_ns;
    g.lane = e.lane;
    g.name = e.name;
    g.host = kind->second == trace::LaneKind::Host;
    g.enqueue_ns = e.enqueue_ns;
    g.kernel = (e.flags & trace::kFlagGpuKernel) != 0;
    if (e.kind == trace::EventKind::Phase) {
      if (e.value == trace::kNone64) return true;  // derived by the import: no event of the profiler
      g.annotation = true;
      g.display = text(e.value);
      if (text(e.name) == trace::kPhaseIteration) g.iteration = e.iteration;
    } else {
      const std::string_view category = text(e.value);
      rank.categories |= !category.empty();
      g.operator_category = category == "cpu_op" || category == "cuda_runtime" || category == "cuda_driver";
      g.annotation = category == "user_annotation";
      g.sync_record = category == "cuda_sync";
      g.display = text(e.name);
      if (g.sync_record && e.grp != trace::kNone && e.enqueue_ns != trace::kNone64) g.waited_lane = e.grp;
    }
    rank.events.push_back(g);
    return true;
  });
  for (auto& [rank, r] : ranks) {
    std::stable_sort(r.events.begin(), r.events.end(),
                     [](const GraphEvent& a, const GraphEvent& b) { return a.begin_ns < b.begin_ns; });
  }
  return ranks;
}

// Each kernel's CPU launch (the runtime call that begins at its enqueue_ns) and each sync
// record's CPU call (the runtime call that holds its begin), as indices.
void link_runtime_calls(std::vector<GraphEvent>& events) {
  std::multimap<int64_t, int32_t> runtime_by_begin;
  for (size_t i = 0; i < events.size(); ++i) {
    if (events[i].host && events[i].operator_category) runtime_by_begin.emplace(events[i].begin_ns, int32_t(i));
  }
  for (GraphEvent& g : events) {
    if (g.kernel && g.enqueue_ns != trace::kNone64) {
      const auto [first, last] = runtime_by_begin.equal_range(g.enqueue_ns);
      for (auto it = first; it != last; ++it) {
        if (g.runtime < 0 || is_launch_name(events[size_t(it->second)].display)) g.runtime = it->second;
      }
    } else if (g.sync_record) {
      // The call that began last at or before the record (1 µs early: Kineto's µs rounding).
      auto it = runtime_by_begin.upper_bound(g.begin_ns + 1000);
      while (it != runtime_by_begin.begin()) {
        --it;
        const GraphEvent& call = events[size_t(it->second)];
        if (call.end_ns + 1000 < g.begin_ns) break;
        if (one_of(call.display, {"cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventSynchronize",
                                  "cudaStreamWaitEvent"})) {
          g.runtime = it->second;
          break;
        }
        if (g.begin_ns - call.begin_ns > 10'000'000) break;
      }
    }
  }
}

// For each CUDA event sync record, the kernels it ties (HTA's _get_cuda_event_record_df and
// _get_cuda_stream_wait_event_df): the kernel of the last launch onto the recording stream before
// the cudaEventRecord call, and for a Stream Wait Event the kernel of the next launch onto its
// own stream from the thread that called cudaStreamWaitEvent, at or after that call.
void link_event_syncs(std::vector<GraphEvent>& events) {
  std::vector<int32_t> launched;  // kernels with a launch call, by the launch's begin
  for (size_t i = 0; i < events.size(); ++i) {
    const GraphEvent& g = events[i];
    if (g.kernel && g.runtime >= 0 && is_launch_name(events[size_t(g.runtime)].display)) launched.push_back(int32_t(i));
  }
  auto launch_ns = [&](int32_t k) { return events[size_t(events[size_t(k)].runtime)].begin_ns; };
  std::stable_sort(launched.begin(), launched.end(), [&](int32_t a, int32_t b) { return launch_ns(a) < launch_ns(b); });
  for (GraphEvent& g : events) {
    if (!g.sync_record || g.waited_lane < 0) continue;
    for (const int32_t k : launched) {
      if (launch_ns(k) > g.enqueue_ns) break;
      if (events[size_t(k)].lane == g.waited_lane) g.sync_source = k;
    }
    if (g.display != "Stream Wait Event" || g.runtime < 0) continue;
    const GraphEvent& call = events[size_t(g.runtime)];
    for (const int32_t k : launched) {
      const GraphEvent& kernel = events[size_t(k)];
      if (launch_ns(k) >= call.begin_ns && kernel.lane == g.lane && events[size_t(kernel.runtime)].lane == call.lane) {
        g.sync_dest = k;
        break;
      }
    }
  }
}

// Times in HTA's whole microseconds, after the launches are matched by their exact times. A trace
// with nanosecond times as HTA's parser rounds it (Note [GPU breakdown]): each begin up and each end
// down. A trace in whole microseconds to the nearest: the import's nanoseconds carry a double's
// rounding of epoch-sized times (µs x 1000 past 2^53: up to 128 ns either way), enough to make
// back-to-back events of the profiler overlap and nest.
void round_to_whole_us(std::vector<GraphEvent>& events, TimeRounding rounding) {
  auto floor_us = [](int64_t ns) { return (ns / 1000 - (ns % 1000 < 0 ? 1 : 0)) * 1000; };
  for (GraphEvent& g : events) {
    if (rounding == TimeRounding::WholeMicroseconds) {
      g.begin_ns = -floor_us(-g.begin_ns);
      g.end_ns = floor_us(g.end_ns);
    } else {
      g.begin_ns = floor_us(g.begin_ns + 500);
      g.end_ns = floor_us(g.end_ns + 500);
    }
  }
}

// HTA's compare_events: the order of begin (+1) and end (-1) points in one thread's call stack.
struct StackPoint {
  int32_t event;
  int64_t time;
  int64_t dur;
  int type;
};
bool stack_before(const StackPoint& x, const StackPoint& y) {
  if (x.event == y.event) return x.type > y.type && x.type != y.type;
  if (x.time != y.time) return x.time < y.time;
  if (x.type == y.type) {
    if (x.type == 1) return x.dur == y.dur ? x.event < y.event : x.dur > y.dur;
    return x.dur == y.dur ? x.event > y.event : x.dur < y.dur;
  }
  if (x.dur > 0 && y.dur > 0) return x.type == -1;
  if (x.dur == 0 && y.dur == 0) return x.event < y.event;
  return x.type == 1;
}

// The thread named by its only-ness for `part` ("forward", "autograd"): HTA's _get_tid_for_event.
std::optional<trace::LaneId> only_thread_with(const std::vector<GraphEvent>& events, const std::vector<int32_t>& cpu,
                                              std::string_view part) {
  std::set<trace::LaneId> lanes;
  for (const int32_t e : cpu) {
    const GraphEvent& g = events[size_t(e)];
    if ((g.operator_category || g.annotation) && g.display.find(part) != std::string_view::npos) lanes.insert(g.lane);
  }
  if (lanes.size() != 1) return std::nullopt;
  return *lanes.begin();
}

void add_call_stack_edges(Graph& graph, const std::vector<int32_t>& thread) {
  const std::vector<GraphEvent>& events = graph.events();
  std::vector<StackPoint> points;
  for (const int32_t e : thread) {
    const int64_t dur = std::max<int64_t>(events[size_t(e)].end_ns - events[size_t(e)].begin_ns, 0);
    points.push_back({e, events[size_t(e)].begin_ns, dur, 1});
    points.push_back({e, events[size_t(e)].begin_ns + dur, dur, -1});
  }
  std::stable_sort(points.begin(), points.end(), stack_before);
  std::map<int32_t, std::vector<int32_t>> children;  // -1: the root
  std::map<int32_t, int32_t> parent;
  std::vector<int32_t> stack;
  for (const StackPoint& p : points) {
    if (p.type == 1) {
      const int32_t up = stack.empty() ? -1 : stack.back();
      if (parent.emplace(p.event, up).second) children[up].push_back(p.event);
      stack.push_back(p.event);
    } else if (!stack.empty()) {
      stack.pop_back();
    }
  }
  int32_t last_node = -1, last_parent = -1, depth = 0;
  auto shares_lock = [&](int32_t a, int32_t b) {
    const Node& x = graph.nodes()[size_t(a)];
    const Node& y = graph.nodes()[size_t(b)];
    return takes_runtime_lock(graph.name(x.event)) && takes_runtime_lock(graph.name(y.event)) &&
           (x.is_start || !y.is_start);
  };
  std::function<void(int32_t)> visit = [&](int32_t e) {
    const bool held = e >= 0 && graph.has_nodes(e);
    if (held) {
      const int32_t start = graph.start(e);
      if (last_node >= 0 && !shares_lock(last_node, start)) {
        graph.add_attributed(last_node, start, depth == 0 ? EdgeType::Dependency : EdgeType::Operator, last_parent);
      }
      last_node = start;
      last_parent = parent[e];
      ++depth;
    }
    for (const int32_t child : children[e]) visit(child);
    if (held) {
      const int32_t end = graph.end(e);
      if (last_node >= 0 && !shares_lock(last_node, end)) {
        graph.add_attributed(last_node, end, EdgeType::Operator, last_parent, is_blocking_call(graph.name(e)) ? Weight::Zero : Weight::Elapsed);
      }
      last_node = end;
      last_parent = parent[e];
      --depth;
    }
  };
  visit(-1);
}

void add_runtime_lock_edges(Graph& graph) {
  std::vector<int32_t> starts;
  int32_t last = -1;
  for (size_t i = 0; i < graph.nodes().size(); ++i) {
    const Node& node = graph.nodes()[i];
    if (!takes_runtime_lock(graph.name(node.event)) || !graph.has_nodes(node.event)) continue;
    if (node.is_start) {
      starts.push_back(int32_t(i));
    } else {
      while (!starts.empty()) {
        const int32_t previous = starts.back();
        starts.pop_back();
        if (graph.nodes()[size_t(previous)].event == node.event) {
          graph.add_edge(previous, int32_t(i), EdgeType::Operator, node.event);
        } else {
          graph.add_edge(previous, int32_t(i), EdgeType::Dependency, -1);
        }
      }
      if (last >= 0 && !graph.nodes()[size_t(last)].is_start) graph.add_edge(last, int32_t(i), EdgeType::Dependency, -1);
    }
    last = int32_t(i);
  }
}

// Each kernel's stream queue length after its launch and after itself (TraceCounters'), over
// every kernel of the rank launched by a launch call.
std::map<int32_t, std::pair<int64_t, int64_t>> queue_lengths(const std::vector<GraphEvent>& events) {
  std::map<trace::LaneId, std::vector<std::tuple<int64_t, int, int32_t>>> by_stream;  // ts, +1/-1, kernel
  for (size_t i = 0; i < events.size(); ++i) {
    const GraphEvent& g = events[i];
    if (!g.kernel || g.runtime < 0 || !is_launch_name(events[size_t(g.runtime)].display)) continue;
    by_stream[g.lane].emplace_back(events[size_t(g.runtime)].begin_ns, 0, int32_t(i));
    by_stream[g.lane].emplace_back(g.begin_ns, 1, int32_t(i));
  }
  std::map<int32_t, std::pair<int64_t, int64_t>> lengths;
  for (auto& [lane, rows] : by_stream) {
    std::stable_sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) {
      return std::get<0>(a) != std::get<0>(b) ? std::get<0>(a) < std::get<0>(b) : std::get<1>(a) < std::get<1>(b);
    });
    int64_t queue = 0;
    for (const auto& [ts, is_kernel, kernel] : rows) {
      queue += is_kernel ? -1 : 1;
      (is_kernel ? lengths[kernel].second : lengths[kernel].first) = queue;
    }
  }
  return lengths;
}

void add_kernel_edges(Graph& graph, const std::vector<int32_t>& gpu, bool& unmodelled_syncs) {
  const std::vector<GraphEvent>& events = graph.events();
  const std::map<int32_t, std::pair<int64_t, int64_t>> queues = queue_lengths(events);
  std::vector<int32_t> order = gpu;
  auto sort_by = [&](int32_t e) { return events[size_t(e)].sync_record ? events[size_t(e)].end_ns : events[size_t(e)].begin_ns; };
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return sort_by(a) < sort_by(b); });
  std::map<trace::LaneId, int32_t> last_node;  // the last kernel's end node on each stream
  std::map<int32_t, int32_t> kernel_sync;       // a kernel -> the kernel a Stream Wait Event makes it wait for
  for (const int32_t e : order) {
    const GraphEvent& g = events[size_t(e)];
    if (g.sync_record) {
      const int32_t call_end = g.runtime >= 0 ? graph.end(g.runtime) : -1;
      if (g.display == "Context Sync") {
        for (const auto& [lane, node] : last_node) if (call_end >= 0) graph.add_edge(node, call_end, EdgeType::Sync, -1);
      } else if (g.display == "Stream Sync") {
        const auto last = last_node.find(g.lane);
        if (last != last_node.end() && call_end >= 0) graph.add_edge(last->second, call_end, EdgeType::Sync, -1);
      } else if (g.enqueue_ns == trace::kNone64) {
        unmodelled_syncs = true;  // no cudaEventRecord to follow
      } else if (g.sync_source >= 0 && g.display == "Stream Wait Event") {
        if (g.sync_dest >= 0) kernel_sync[g.sync_dest] = g.sync_source;
      } else if (g.sync_source >= 0 && graph.end(g.sync_source) >= 0 && call_end >= 0) {  // Event Sync
        graph.add_edge(graph.end(g.sync_source), call_end, EdgeType::Sync, -1);
      }
      continue;
    }
    const int32_t start = graph.start(e), end = graph.end(e);
    if (start < 0 || end < 0) continue;
    graph.add_edge(start, end, EdgeType::Operator, e);
    int32_t sync_end = -1;  // the end of the kernel a Stream Wait Event made this one wait for
    if (const auto waits = kernel_sync.find(e); waits != kernel_sync.end()) {
      sync_end = graph.end(waits->second);
      if (sync_end >= 0) graph.add_edge(sync_end, start, EdgeType::Sync, -1);
      kernel_sync.erase(waits);
    }
    auto sync_before = [&](int64_t ts) { return sync_end < 0 || graph.nodes()[size_t(sync_end)].ts < ts; };
    const int64_t runtime_ts = events[size_t(g.runtime)].begin_ns;
    const auto queue = queues.find(e);
    const auto last = last_node.find(g.lane);
    bool launch_added = false;
    if (queue != queues.end() && queue->second.first == 1 && queue->second.second == 0 &&
        (last == last_node.end() || graph.nodes()[size_t(last->second)].ts < runtime_ts) && sync_before(runtime_ts)) {
      graph.add_edge(graph.start(g.runtime), start, EdgeType::LaunchDelay, -1);
      launch_added = true;
    } else if (last != last_node.end() &&
               graph.nodes()[size_t(start)].ts - graph.nodes()[size_t(last->second)].ts < kKernelKernelDelayThresholdNs &&
               sync_before(graph.nodes()[size_t(last->second)].ts)) {
      graph.add_attributed(last->second, start, EdgeType::KernelKernelDelay, -1);
    }
    if (!launch_added && graph.start(g.runtime) >= 0) {
      graph.add_edge(graph.start(g.runtime), start, EdgeType::LaunchDelay, -1, Weight::Zero);
    }
    last_node[g.lane] = end;
  }
}

// The path of one rank's region, or nullopt when the region has no event with nodes.
std::optional<CriticalPath> rank_path(const RankEvents& rank, int32_t rank_id, const Window& window,
                                      const std::vector<KernelClass>& classes) {
  const std::vector<GraphEvent>& events = rank.events;
  std::vector<int32_t> cpu, gpu, members;
  auto in_window = [&](const GraphEvent& g) {
    return g.begin_ns >= window.begin_ns && g.begin_ns <= window.end_ns && g.end_ns > g.begin_ns;
  };
  for (size_t i = 0; i < events.size(); ++i) {
    const GraphEvent& g = events[i];
    if (g.host && !g.sync_record) {
      if (!in_window(g)) continue;
      cpu.push_back(int32_t(i));
      if (g.operator_category) members.push_back(int32_t(i));
    } else if ((g.kernel || g.sync_record) && g.runtime >= 0 &&
               (in_window(events[size_t(g.runtime)]) || g.display == "Stream Wait Event")) {
      gpu.push_back(int32_t(i));
      if (g.kernel) members.push_back(int32_t(i));
    }
  }
  if (members.empty()) return std::nullopt;
  Graph graph(events);
  graph.add_nodes(members);
  add_runtime_lock_edges(graph);
  const std::optional<trace::LaneId> forward = only_thread_with(events, cpu, "forward");
  const std::optional<trace::LaneId> backward = only_thread_with(events, cpu, "autograd");
  std::map<trace::LaneId, std::vector<int32_t>> threads;
  for (const int32_t e : cpu) {
    trace::LaneId lane = events[size_t(e)].lane;
    if (forward && backward && *forward != *backward && lane == *backward) lane = *forward;
    threads[lane].push_back(e);
  }
  for (const auto& [lane, thread] : threads) add_call_stack_edges(graph, thread);
  bool unmodelled_syncs = false;
  add_kernel_edges(graph, gpu, unmodelled_syncs);

  CriticalPath path;
  path.rank = rank_id;
  path.clock = "measured";
  path.region_ns = window.end_ns - window.begin_ns;
  std::map<std::pair<int32_t, BoundBy>, PathEvent> by_event;
  for (const size_t i : graph.longest_path()) {
    const Edge& edge = graph.edge(i);
    path.length_ns += edge.weight;
    std::optional<BoundBy> bound;
    if (edge.type == EdgeType::LaunchDelay) bound = BoundBy::GpuKernelLaunchOverhead;
    else if (edge.type == EdgeType::KernelKernelDelay) bound = BoundBy::GpuKernelKernelOverhead;
    else if (edge.type == EdgeType::Operator && edge.attributed >= 0) {
      const GraphEvent& g = events[size_t(edge.attributed)];
      const bool comm = !g.host && g.name >= 0 && size_t(g.name) < classes.size() &&
                        classes[size_t(g.name)] == KernelClass::Communication;
      bound = g.host ? BoundBy::CpuBound : comm ? BoundBy::GpuCommBound : BoundBy::GpuComputeBound;
    }
    if (!bound) continue;
    path.bound_ns[*bound] += edge.weight;
    const int32_t owner = edge.attributed >= 0 ? edge.attributed : graph.nodes()[size_t(edge.to)].event;
    // Drawn on the lane of the event it waits for or runs: a launch delay and a gap between
    // kernels on the kernel's stream, an operator on its own lane.
    // An edge's weight is its time on the path; a zero-weight launch edge (HTA's) spans none.
    const int64_t from_ns = graph.nodes()[size_t(edge.from)].ts;
    if (edge.weight > 0) path.segments.push_back({rank_id, events[size_t(owner)].lane, from_ns, from_ns + edge.weight, *bound});
    PathEvent& pe = by_event[{owner, *bound}];
    const GraphEvent& g = events[size_t(owner)];
    pe.name = std::string(g.display);
    pe.rank = rank_id;
    const auto lane = rank.lane_names.find(g.lane);
    pe.lane = lane != rank.lane_names.end() ? lane->second : "";
    pe.begin_ns = g.begin_ns;
    pe.on_path_ns += edge.weight;
    pe.bound = *bound;
  }
  for (auto& [e, pe] : by_event) path.events.push_back(std::move(pe));
  if (unmodelled_syncs) {
    path.notes.push_back("CUDA event syncs (Event Sync, Stream Wait Event) without the cudaEventRecord they wait "
                         "for (a trace before PyTorch 2.1, or a run imported before dpscope kept it) add no edge "
                         "(docs/critical-path.md)");
  }
  return path;
}

}  // namespace

CriticalPath kineto_critical_path(trace::Reader& reader, const std::string& path, const RegionRequest& request) {
  const std::vector<std::string> names = reader.names();
  std::map<int32_t, RankEvents> ranks = read_ranks(reader, names);
  const std::vector<KernelClass> classes = classify_names(names);
  std::optional<CriticalPath> longest;
  bool any_categories = false;
  for (auto& [rank, events] : ranks) any_categories |= events.categories;
  if (!any_categories) {
    throw CriticalPathError(path + ": imported without Kineto's event categories, which HTA's graph tells "
                            "operators from annotations by: import the profiler files again with this "
                            "dpscope (dpscope import FILE... -o RUN.sqlite)");
  }
  std::vector<RegionCandidate> candidates;
  const std::string fractional_us_ranks = reader.meta_value(std::string(trace::meta_key::kImportedFractionalUsRanks));
  for (auto& [rank, r] : ranks) {
    link_runtime_calls(r.events);
    link_event_syncs(r.events);
    round_to_whole_us(r.events, rounding_for(fractional_us_ranks, rank));
    for (const GraphEvent& g : r.events) {
      const bool on_thread = g.host && !g.sync_record;
      candidates.push_back({rank, g.begin_ns, g.end_ns, on_thread ? std::string(g.display) : "", g.iteration, on_thread});
    }
  }
  const std::map<int32_t, Window> windows = region_windows(candidates, request, path);
  for (const auto& [rank, window] : windows) {
    std::optional<CriticalPath> p = rank_path(ranks.at(rank), rank, window, classes);
    if (p && (!longest || p->length_ns > longest->length_ns)) {
      p->region = window.label;
      longest = std::move(p);
    }
  }
  if (!longest) {
    throw CriticalPathError(path + ": the region holds no CPU operator or kernel to build a path from; choose "
                            "another (--iteration N, or --annotation NAME --instance K)");
  }
  const int64_t origin = reader.time_range().first;
  for (PathEvent& e : longest->events) e.begin_ns -= origin;
  std::sort(longest->segments.begin(), longest->segments.end(),
            [](const PathSegment& a, const PathSegment& b) { return a.begin_ns < b.begin_ns; });
  std::stable_sort(longest->events.begin(), longest->events.end(),
                   [](const PathEvent& a, const PathEvent& b) { return a.on_path_ns > b.on_path_ns; });
  return *longest;
}

}  // namespace dpscope::analysis
