// Cross-rank collective matching: the same collective (process group, sequence number) on every
// rank that ran it, with whether the ranks agree on what it was (op, bytes, dtype) and how far
// apart they started (skew). One definition for `dpscope stats`, the viewer and the tutorials.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "trace/schema.h"

namespace dpscope::analysis {

// One Collective event of one rank, as the analysis keeps it: a million of them on a 10 M-event
// trace, so the fields are ordered to leave no padding (56 bytes).
struct CollectiveStats {
  int32_t grp = trace::kNone;
  int32_t iteration = trace::kNone;  // trace::kNone: construction work
  int64_t seq = trace::kNone64;
  int64_t bytes = trace::kNone64;
  int64_t begin_ns = 0;       // on the run's aligned clock (ranks.clock_offset_ns applied)
  int64_t end_ns = 0;
  // Matched on every rank of its group: from the last rank's begin to this rank's end (Note
  // [Waiting and transfer]), and how many ranks ran it; kNone64 and 0 when unmatched.
  int64_t transfer_ns = trace::kNone64;
  int32_t group_ranks = 0;
  int16_t lane = 0;           // trace::LaneId where it ran (its lane's name says its group)
  trace::CollectiveOp op = trace::CollectiveOp::AllReduce;
  uint8_t dtype = 0xff;       // trace::DType; 0xff when not recorded
};
static_assert(sizeof(CollectiveStats) == 56, "CollectiveStats is kept for every collective of a trace");

// One collective across ranks.
struct CollectiveMatch {
  int32_t grp = trace::kNone;
  int64_t seq = trace::kNone64;
  trace::CollectiveOp op = trace::CollectiveOp::AllReduce;  // the first rank's
  int32_t iteration = trace::kNone;                  // the first rank's
  std::vector<int32_t> ranks;                 // the ranks that ran it, ascending
  int64_t skew_ns = 0;  // latest begin - earliest begin over those ranks
  // The rank that began it last (the lowest such rank on a tie), when that began, and how much
  // later than the next latest rank: what the others waited for it alone. 0 with one rank.
  int32_t last_rank = trace::kNone;
  int64_t last_begin_ns = 0;
  int64_t late_ns = 0;
  // The ranks disagree on the op, the bytes or the dtype, or not every rank of the run ran it.
  bool mismatch = false;
  std::string why;  // what disagrees, e.g. "rank 1 moved 4.0 MiB of float32, rank 0 ..."
};

// Note [Waiting and transfer]
// A collective cannot move data before every rank has arrived: a rank that began it before the
// last one waits until that one begins, then transfers. So each rank's span of a matched
// collective splits at the last rank's begin (aligned clocks): wait = from its own begin to
// then, transfer = the rest. A rank that arrived last waits 0. The split is only as good as the
// clocks' alignment (ranks.clock_uncertainty_ns), and Gloo's spans begin when the work starts on
// the communication thread, so time queued behind an earlier collective is not in either part.
struct ArrivalSplit {
  int64_t wait_ns = 0;
  int64_t transfer_ns = 0;
};
// `c`'s span split at `last_begin_ns` (See Note [Waiting and transfer]). Pure.
ArrivalSplit split_at_arrival(const CollectiveStats& c, int64_t last_begin_ns);

// Note [Subgroup collectives]
// A trace does not list a process group's ranks; a collective of group `grp` is matched among
// the ranks that recorded any collective of that group (HSDP's shard and replicate groups, the
// post-forward groups of reshard_after_forward N: each a group id of its own, Note [HSDP mesh] in
// engine/comm/device_mesh.h), and the world group (id 0) among all the run's ranks. A group seen
// on one rank only is matched among all the run's ranks too: nothing tells it from a collective
// the other ranks never issued (the engine's groups of one rank issue none). The cluster
// clock takes a group's members the same way (cluster_clock.cpp), so a subgroup's collective
// starts when the last rank of its group has issued it.
inline constexpr int32_t kWorldGroup = 0;

// Matches the collectives of every rank: `by_rank[i]` holds rank `ranks[i]`'s collectives (any
// order); events without a sequence number are skipped. `world` is how many ranks the run had:
// a world-group collective seen on fewer is a mismatch ("ran on 2 of 3 ranks"), and so is any
// other group's seen on fewer than that group's ranks ("ran on 1 of 2 ranks of its group"; See
// Note [Subgroup collectives]). Sorted
// by (grp, seq). Pure.
std::vector<CollectiveMatch> match_collectives(const std::vector<int32_t>& ranks,
                                               const std::vector<std::vector<CollectiveStats>>& by_rank,
                                               int32_t world);

// "4.0 MiB", "660 B": bytes for messages and reports.
std::string bytes_text(int64_t bytes);

}  // namespace dpscope::analysis
