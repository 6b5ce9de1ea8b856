// Traffic per process group: how many collectives each group ran and how many bytes each of its
// ranks put on the wire by the ring model — HSDP's shard group (within a host) against its
// replicate group (across hosts), DDP's world. What `dpscope stats` prints under "groups".
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "analysis/collective_match.h"
#include "trace/schema.h"

namespace dpscope::analysis {

// The bytes one rank sends in one collective of `ranks` ranks by the ring model: the bandwidth
// terms of link_model_ns (link_model.h; docs/communication.md) times the bandwidth. `bytes` as
// the trace counts them (Work::bytes()): with S the whole tensor, all-reduce 2(n-1)/n S,
// reduce-scatter (n-1)/n S, all-gather (n-1) x its input (S/n), broadcast S, all-to-all
// (n-1)/n x its input, send/recv its bytes, barrier 0; 0 with one rank. Pure.
int64_t ring_wire_bytes(trace::CollectiveOp op, int64_t bytes, int ranks);

// One process group of a run, as its collectives show it.
struct GroupTraffic {
  int32_t grp = trace::kNone;
  // The group's name as its communication lanes say it ("world", "shard #0: ranks 0-1"): the
  // text inside the first lane's outer parentheses; "" when no lane names it.
  std::string name;
  std::vector<int32_t> ranks;  // the ranks that ran any of its collectives (Note [Subgroup collectives])
  // Per rank of the group, the most any of its ranks had (they agree unless a rank failed):
  int64_t collectives = 0;     // collectives over the run, construction included
  int64_t payload_bytes = 0;   // the trace's bytes of those collectives
  int64_t wire_bytes = 0;      // ring_wire_bytes of those collectives
  // Wire bytes of the iterations' collectives (iteration >= 0) over `iterations` iterations: what
  // one training step sends per rank in this group. 0 without iterations.
  double wire_bytes_per_step = 0;
  // The median busbw (Note [Bus bandwidth], analysis/bandwidth.h) of its matched collectives of
  // kBusbwLeastBytes and more, over every rank's; nullopt when it has none.
  std::optional<double> median_busbw_gbps;
  int64_t busbw_collectives = 0;  // how many that median is over
};

// The smallest collective a group's median busbw counts: below 1 MiB latency, not bandwidth,
// decides a collective's time.
inline constexpr int64_t kBusbwLeastBytes = 1 << 20;

// Every group of the run, by id: `by_rank[i]` holds rank `ranks[i]`'s collectives,
// `lane_names[{rank, lane}]` the lanes' names (the lane of each collective names its group),
// `iterations` how many the run had. Pure.
std::vector<GroupTraffic> group_traffic(const std::vector<int32_t>& ranks,
                                        const std::vector<std::vector<CollectiveStats>>& by_rank,
                                        const std::map<std::pair<int32_t, int32_t>, std::string>& lane_names,
                                        int32_t iterations);

}  // namespace dpscope::analysis
