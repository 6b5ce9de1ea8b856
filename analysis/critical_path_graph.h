// The graph of Holistic Trace Analysis's critical path (Note [HTA's critical path graph] in
// critical_path_kineto.cpp): one rank's events, the begin and end nodes of those that hold them,
// weighted edges with HTA's replace-on-add, HTA's attribution, and networkx's longest path.
#pragma once

#include <cstdint>
#include <map>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "trace/records.h"

namespace dpscope::analysis::hta_graph {

// HTA's CPEdgeType: an event's own time (Operator), a 0-weight link between events (Dependency,
// Sync), a kernel's launch overhead and the gap between two kernels of a stream.
enum class EdgeType : uint8_t { Operator, Dependency, LaunchDelay, KernelKernelDelay, Sync };

// An edge's weight: the time between its nodes, or none (a blocking sync call's own time, a
// launch edge kept only for causality: HTA's zero_weight).
enum class Weight : uint8_t { Elapsed, Zero };

// One event of the rank as the graph sees it (critical_path_kineto.cpp reads them from the run).
struct GraphEvent {
  int64_t begin_ns = 0;
  int64_t end_ns = 0;
  trace::LaneId lane = 0;
  trace::NameId name = trace::kNone;
  bool host = true;
  bool operator_category = false;  // cpu_op, cuda_runtime, cuda_driver
  bool kernel = false;             // kFlagGpuKernel
  bool sync_record = false;        // Kineto's cuda_sync
  bool annotation = false;         // user_annotation or a phase: may name the forward thread
  int64_t enqueue_ns = trace::kNone64;
  std::string_view display;        // the profiler's name (a phase's source name)
  int32_t runtime = -1;            // kernels and sync records: the CPU call (an index)
  int32_t iteration = trace::kNone;  // an `iteration` phase: its iteration
  // A CUDA event sync record (kineto_sync.h): the lane of the stream its event was recorded on
  // (enqueue_ns is the cudaEventRecord call's time), the kernel launched last onto that stream
  // before it, and for a Stream Wait Event the kernel its stream launches next.
  trace::LaneId waited_lane = -1;
  int32_t sync_source = -1;
  int32_t sync_dest = -1;
};

// A point in time: an event's begin (is_start) or end.
struct Node {
  int64_t ts = 0;
  int32_t event = 0;
  bool is_start = false;
};

// A weighted edge between two nodes (indices into Graph::nodes()).
struct Edge {
  int32_t from = 0, to = 0;
  EdgeType type = EdgeType::Dependency;
  int64_t weight = 0;
  int32_t attributed = -1;  // the event the edge's time belongs to
};

// The graph of one rank's region. Holds a reference to `events`, which must outlive it; not
// thread-safe.
class Graph {
 public:
  explicit Graph(const std::vector<GraphEvent>& events) : events_(events) {}

  const std::vector<GraphEvent>& events() const { return events_; }
  std::string_view name(int32_t e) const { return events_[size_t(e)].display; }

  // A begin and an end node for each of `members` (indices into events()), sorted by time, then
  // event, a begin before its end (HTA's _create_event_nodes). Called once, before any edge.
  void add_nodes(const std::vector<int32_t>& members);
  const std::vector<Node>& nodes() const { return nodes_; }
  // The begin and end node of event `e`; -1 when it has none.
  int32_t start(int32_t e) const;
  int32_t end(int32_t e) const;
  bool has_nodes(int32_t e) const { return start(e) >= 0 && end(e) >= 0; }

  // Adds (or, as networkx does, replaces) the edge; its weight is the time between the nodes
  // unless it is a dependency, a sync or Weight::Zero. `attributed`: the event its time is
  // counted to, -1 for none.
  void add_edge(int32_t from, int32_t to, EdgeType type, int32_t attributed, Weight weight = Weight::Elapsed);
  // add_edge with HTA's attribution (_attribute_edge) of an operator or kernel-kernel edge:
  // a begin's event, else an end's, else between an end and a begin `src_parent`.
  void add_attributed(int32_t from, int32_t to, EdgeType type, int32_t src_parent, Weight weight = Weight::Elapsed);

  // networkx's dag_longest_path: nodes in topological order (Kahn's, lowest index first), each
  // taking its first best predecessor (weights of -1 µs or less counted as 0, as HTA's
  // _validate_graph sets them), the path ending at the first node of the greatest length.
  // Returns the path's edges (indices for edge()), first to last.
  std::vector<size_t> longest_path() const;
  const Edge& edge(size_t i) const { return edges_[i]; }

 private:
  int32_t attribute(int32_t from, int32_t to, EdgeType type, int32_t src_parent) const;

  const std::vector<GraphEvent>& events_;
  std::vector<Node> nodes_;
  std::unordered_map<int32_t, int32_t> start_, end_;
  std::vector<Edge> edges_;
  std::map<std::pair<int32_t, int32_t>, size_t> edge_index_;
  std::unordered_map<int32_t, std::vector<size_t>> incoming_;
};

}  // namespace dpscope::analysis::hta_graph
