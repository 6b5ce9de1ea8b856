// Traffic per process group (group_traffic.h): each group's members, collective counts and the
// bytes its ranks put on the wire, from every rank's collectives.
#include "analysis/group_traffic.h"

#include <algorithm>
#include <limits>
#include <set>

#include "trace/saturate.h"

namespace dpscope::analysis {

using trace::detail::saturating_add;

int64_t ring_wire_bytes(trace::CollectiveOp op, int64_t bytes, int ranks) {
  if (ranks <= 1 || bytes <= 0) return 0;
  // A damaged file's byte count can be near INT64_MAX: the products are taken in 128 bits and
  // the result clamped (tests/fuzz/README.md).
  const __int128 n = ranks, size = bytes;
  __int128 wire = 0;
  switch (op) {
    case trace::CollectiveOp::AllReduce: wire = 2 * (n - 1) * size / n; break;
    case trace::CollectiveOp::ReduceScatter: wire = (n - 1) * size / n; break;
    case trace::CollectiveOp::AllGather: wire = (n - 1) * size; break;
    case trace::CollectiveOp::Broadcast: wire = size; break;
    case trace::CollectiveOp::Barrier: wire = 0; break;
    case trace::CollectiveOp::AllToAll: wire = (n - 1) * size / n; break;
    case trace::CollectiveOp::SendRecv: wire = size; break;
  }
  return static_cast<int64_t>(std::min<__int128>(wire, std::numeric_limits<int64_t>::max()));
}

namespace {

// "gloo comm 1 (shard #0: ranks 0-1)" -> "shard #0: ranks 0-1".
std::string group_name_of_lane(const std::string& lane) {
  const size_t open = lane.find('(');
  const size_t close = lane.rfind(')');
  if (open == std::string::npos || close == std::string::npos || close <= open) return "";
  return lane.substr(open + 1, close - open - 1);
}

struct RankTotals {
  int64_t collectives = 0;
  int64_t payload_bytes = 0;
  int64_t wire_bytes = 0;
  int64_t step_wire_bytes = 0;
};

}  // namespace

std::vector<GroupTraffic> group_traffic(const std::vector<int32_t>& ranks,
                                        const std::vector<std::vector<CollectiveStats>>& by_rank,
                                        const std::map<std::pair<int32_t, int32_t>, std::string>& lane_names,
                                        int32_t iterations) {
  std::map<int32_t, std::set<int32_t>> members;
  std::map<int32_t, std::string> names;
  for (size_t i = 0; i < by_rank.size() && i < ranks.size(); ++i) {
    for (const CollectiveStats& c : by_rank[i]) {
      members[c.grp].insert(ranks[i]);
      if (names[c.grp].empty()) {
        const auto lane = lane_names.find({ranks[i], c.lane});
        if (lane != lane_names.end()) names[c.grp] = group_name_of_lane(lane->second);
      }
    }
  }
  std::map<int32_t, GroupTraffic> groups;
  for (size_t i = 0; i < by_rank.size() && i < ranks.size(); ++i) {
    std::map<int32_t, RankTotals> totals;
    for (const CollectiveStats& c : by_rank[i]) {
      RankTotals& t = totals[c.grp];
      const int64_t wire = ring_wire_bytes(c.op, c.bytes, static_cast<int>(members[c.grp].size()));
      ++t.collectives;
      t.payload_bytes = saturating_add(t.payload_bytes, std::max<int64_t>(c.bytes, 0));
      t.wire_bytes = saturating_add(t.wire_bytes, wire);
      if (c.iteration >= 0) t.step_wire_bytes = saturating_add(t.step_wire_bytes, wire);
    }
    for (const auto& [grp, t] : totals) {
      GroupTraffic& g = groups[grp];
      g.collectives = std::max(g.collectives, t.collectives);
      g.payload_bytes = std::max(g.payload_bytes, t.payload_bytes);
      g.wire_bytes = std::max(g.wire_bytes, t.wire_bytes);
      if (iterations > 0) {
        g.wire_bytes_per_step = std::max(g.wire_bytes_per_step, double(t.step_wire_bytes) / iterations);
      }
    }
  }
  std::vector<GroupTraffic> out;
  for (auto& [grp, g] : groups) {
    g.grp = grp;
    g.name = names[grp];
    g.ranks.assign(members[grp].begin(), members[grp].end());
    out.push_back(std::move(g));
  }
  return out;
}

}  // namespace dpscope::analysis
