// critical_path_graph.h: HTA's critical-path graph's nodes and edges, its attribution of an
// edge to an event, and networkx's longest path through it.
#include "analysis/critical_path_graph.h"

#include <algorithm>
#include <functional>
#include <queue>

namespace dpscope::analysis::hta_graph {
namespace {

constexpr int64_t kNegativeWeightFloorNs = -1000;  // HTA zeroes weights of -1 µs or less

int64_t path_weight(const Edge& e) { return e.weight <= kNegativeWeightFloorNs ? 0 : e.weight; }

}  // namespace

void Graph::add_nodes(const std::vector<int32_t>& members) {
  std::vector<Node> nodes;
  for (const int32_t e : members) {
    nodes.push_back({events_[size_t(e)].begin_ns, e, true});
    nodes.push_back({events_[size_t(e)].end_ns, e, false});
  }
  std::stable_sort(nodes.begin(), nodes.end(), [](const Node& a, const Node& b) {
    if (a.ts != b.ts) return a.ts < b.ts;
    if (a.event != b.event) return a.event < b.event;
    return a.is_start && !b.is_start;
  });
  nodes_ = std::move(nodes);
  for (size_t i = 0; i < nodes_.size(); ++i) (nodes_[i].is_start ? start_ : end_)[nodes_[i].event] = int32_t(i);
}

int32_t Graph::start(int32_t e) const {
  const auto found = start_.find(e);
  return found == start_.end() ? -1 : found->second;
}

int32_t Graph::end(int32_t e) const {
  const auto found = end_.find(e);
  return found == end_.end() ? -1 : found->second;
}

void Graph::add_edge(int32_t from, int32_t to, EdgeType type, int32_t attributed, Weight weight) {
  const bool timed = type != EdgeType::Dependency && type != EdgeType::Sync && weight == Weight::Elapsed;
  const Edge edge{from, to, type, timed ? nodes_[size_t(to)].ts - nodes_[size_t(from)].ts : 0, attributed};
  const auto [at, fresh] = edge_index_.emplace(std::make_pair(from, to), edges_.size());
  if (fresh) {
    edges_.push_back(edge);
    incoming_[to].push_back(at->second);
  } else {
    edges_[at->second] = edge;
  }
}

int32_t Graph::attribute(int32_t from, int32_t to, EdgeType type, int32_t src_parent) const {
  const Node& src = nodes_[size_t(from)];
  const Node& dest = nodes_[size_t(to)];
  if (type == EdgeType::KernelKernelDelay || src.is_start) return src.event;
  if (!dest.is_start) return dest.event;
  return src_parent >= 0 ? src_parent : src.event;
}

void Graph::add_attributed(int32_t from, int32_t to, EdgeType type, int32_t src_parent, Weight weight) {
  const bool attributes = type == EdgeType::Operator || type == EdgeType::KernelKernelDelay;
  add_edge(from, to, type, attributes ? attribute(from, to, type, src_parent) : -1, weight);
}

std::vector<size_t> Graph::longest_path() const {
  const size_t n = nodes_.size();
  std::vector<int32_t> in_degree(n, 0);
  std::vector<std::vector<size_t>> outgoing(n);
  for (size_t i = 0; i < edges_.size(); ++i) {
    ++in_degree[size_t(edges_[i].to)];
    outgoing[size_t(edges_[i].from)].push_back(i);
  }
  std::priority_queue<size_t, std::vector<size_t>, std::greater<>> ready;
  for (size_t v = 0; v < n; ++v) {
    if (in_degree[v] == 0) ready.push(v);
  }
  std::vector<int64_t> dist(n, 0);
  std::vector<int64_t> via(n, -1);  // the edge from the best predecessor
  int64_t best = -1;
  size_t best_node = 0;
  while (!ready.empty()) {
    const size_t v = ready.top();
    ready.pop();
    const auto in = incoming_.find(int32_t(v));
    if (in != incoming_.end()) {
      int64_t top = INT64_MIN;
      for (const size_t i : in->second) {
        const int64_t d = dist[size_t(edges_[i].from)] + path_weight(edges_[i]);
        if (d > top) {
          top = d;
          via[v] = int64_t(i);
        }
      }
      if (top < 0) {  // networkx starts afresh rather than carry a negative length
        top = 0;
        via[v] = -1;
      }
      dist[v] = top;
    }
    if (dist[v] > best) {
      best = dist[v];
      best_node = v;
    }
    for (const size_t i : outgoing[v]) {
      if (--in_degree[size_t(edges_[i].to)] == 0) ready.push(size_t(edges_[i].to));
    }
  }
  std::vector<size_t> path;
  for (int64_t e = n ? via[best_node] : -1; e >= 0; e = via[size_t(edges_[size_t(e)].from)]) path.push_back(size_t(e));
  std::reverse(path.begin(), path.end());
  return path;
}

}  // namespace dpscope::analysis::hta_graph
