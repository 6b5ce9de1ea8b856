// What the FSDP what-if replay reads of a trace (Note [FSDP what-if replay] in whatif_fsdp.h):
// the settings it was recorded with, each steady iteration's main-thread program and
// collectives, and the cost model's samples. Read once by load_fsdp_replay_trace
// (whatif_fsdp_load.cpp); replayed by predict_fsdp (whatif_fsdp.h).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "analysis/intervals.h"
#include "analysis/stats.h"
#include "analysis/whatif.h"
#include "trace/reader.h"
#include "trace/vocabulary.h"

namespace dpscope::analysis {

// The settings a replay is made for. Plain value.
struct FsdpSettings {
  trace::BackwardPrefetch backward_prefetch = trace::BackwardPrefetch::Pre;
  int32_t limit_all_gathers = 0;  // 0: no limit
  bool operator==(const FsdpSettings& o) const {
    return backward_prefetch == o.backward_prefetch && limit_all_gathers == o.limit_all_gathers;
  }
};

// One point of the main thread's program (Note [FSDP what-if replay]).
enum class FsdpStepKind {
  Mark,          // a phase begins or ends: nothing happens, its predicted time is kept
  IssueGather,   // a unit needs its parameters soon: issue its all-gather unless in flight
  Prefetch,      // a recorded forward prefetch: the same as IssueGather
  WaitGather,    // a unit needs its parameters now: issue if needed, then wait
  PostBackward,  // a unit's post-backward hook ran (where BACKWARD_POST prefetches)
  Issue,         // issue a reduce-scatter or any other collective
  Wait,          // wait for a reduce-scatter or any other collective
};

struct FsdpStep {
  FsdpStepKind kind = FsdpStepKind::Mark;
  int64_t recorded_ns = 0;  // when the main thread reached the point
  int64_t work_ns = 0;      // the main thread's work since the previous point (waits excluded)
  int32_t collective = -1;  // index into FsdpIteration::collectives (issue and wait steps)
  int32_t unit = -1;        // the unit (gather and post-backward steps)
  // WaitGather in backward: the step index of the next unit's backward gather wait in this
  // backward pass (where a prefetch is aimed), -1 for the last unit.
  int32_t next_backward_wait = -1;
  int32_t mark = -1;        // Mark: index into FsdpIteration::marks
};

// One collective of the iteration on the replayed rank, as recorded.
struct FsdpCollective {
  trace::CollectiveOp op = trace::CollectiveOp::AllGather;
  int16_t grp = trace::kNone;  // its process group: each group's collectives queue on its own link
  int32_t unit = -1;
  int64_t bytes = 0;
  uint8_t flags = 0;
  int64_t enqueue_ns = 0;
  Interval span;
};

// A phase slice of the iteration, by the program's marks.
struct FsdpPhase {
  std::string name;
  int32_t begin_mark = 0, end_mark = 0;
};

// What the replay reads of one steady iteration on one rank. Plain values.
struct FsdpIteration {
  int32_t iteration = 0;
  double measured_step_ms = 0;  // compute_stats' step time
  OverlapStats measured;        // compute_stats' per-iteration figures
  std::vector<FsdpCollective> collectives;
  std::vector<FsdpStep> program;        // in recorded order
  int64_t recorded_end_ns = 0;          // when the program's last point (or wait) ended
  std::vector<int64_t> mark_recorded_ns;  // by mark
  std::vector<FsdpPhase> phases;        // forward, backward and optimizer_step slices
};

// The trace's recorded FSDP configuration (meta config), as far as the replay needs it.
// See Note [FSDP2 in the FSDP replay] for what an FSDP2 trace records here.
struct FsdpRecordedConfig {
  trace::Strategy strategy = trace::Strategy::Fsdp;  // Fsdp or Fsdp2
  // FSDP2's meta fsdp2.reshard_after_forward as recorded ("true" or "false"); "" for FSDP1.
  std::string reshard_after_forward;
  // FSDP2's --explicit-prefetch N (config's explicit_prefetch; 0: the implicit prefetch only).
  int32_t explicit_prefetch = 0;
  FsdpSettings settings;
  bool forward_prefetch = false;
  int32_t limit_reduce_scatters = 1;
  // Meta fsdp.sharding, else config's; a word this version does not know reads as FullShard.
  trace::ShardingStrategy sharding = trace::ShardingStrategy::FullShard;
  // Config's mixed_precision as recorded (a ComputePrecision's spelling), which the report shows.
  std::string mixed_precision{trace::to_string(trace::ComputePrecision::Fp32)};
  bool cpu_offload = false;
};

// Everything the FSDP replay needs of a trace, read once (load_fsdp_replay_trace).
struct FsdpReplayTrace : ReplayOrigin {
  FsdpRecordedConfig recorded;
  std::vector<std::string> unit_names;        // by unit index
  std::vector<FsdpIteration> iterations;      // the steady iterations of `rank`
  // Every all-gather and reduce-scatter of the steady iterations on every rank: (bytes, ns), the
  // samples the cost models are fitted to.
  std::vector<std::pair<int64_t, int64_t>> allgather_samples, reduce_scatter_samples;
  int64_t launch_offset_ns = 0;  // Note [FSDP what-if replay]
  // The ranks each all-gather and reduce-scatter runs on: the world, or hybrid sharding's shard
  // group (meta fsdp.shard_group_size), for a cost model of a link.
  int32_t gather_ranks = 0;
};

// Note [FSDP2 in the FSDP replay]
// An FSDP2 trace (engine/fsdp2) replays as an FSDP1 one with each parameter group as a unit: the
// group's all-gather and reduce-scatter carry its unit, its `full` state ends at its
// post-backward, its copy-in and copy-out phases are main-thread work like FSDP1's flattening.
// What FSDP2 itself can be asked differs, and the loader and `dpscope whatif` say so:
//   - backward prefetch: FSDP2's implicit prefetch is FSDP1's BACKWARD_PRE (a group's
//     pre-backward, after waiting for its own all-gather, issues the all-gather of the group
//     before it in forward order), so an FSDP2 trace records `pre`; `none` is an empty explicit
//     backward prefetch list; FSDP2 has no post-backward prefetch, so `post` is refused;
//   - FSDP2 has no all-gather limit (its buffers are freed at each copy-out): recorded 0, and
//     --limit-all-gathers other than 0 is refused;
//   - reshard_after_forward true is FSDP1's full_shard (backward gathers again), false its
//     shard_grad_op (no backward all-gathers); N, where backward's all-gathers run in groups of
//     N ranks whose cost the replay's one-world model does not describe, is refused;
//   - explicit forward prefetches stay as recorded, as FSDP1's forward prefetch; a trace of
//     `--explicit-prefetch 1` replays (its backward lists are the implicit prefetch's), one of 2 or
//     more, whose backward prefetches run several groups ahead, is refused.
// Reads `reader`'s FSDP or FSDP2 trace for a replay of `rank`, using `stats` (compute_stats of the
// same reader) for the measured figures and the steady iterations. Throws WhatifError naming the
// file and the fix for: another strategy than FSDP or FSDP2, no unit state events, sharding
// no_shard or one rank (no all-gathers to prefetch), FSDP2's reshard_after_forward N or
// --explicit-prefetch of 2 or more, no steady
// iterations, a rank not in the file, gradient accumulation.
// Thread-safety: uses `reader`, so the calling thread must own it; the result is a plain value.
// With `cluster`, on the cluster clock, as load_replay_trace.
FsdpReplayTrace load_fsdp_replay_trace(trace::Reader& reader, const RunStats& stats, int32_t rank,
                                       const ClusterClockRun* cluster = nullptr);

}  // namespace dpscope::analysis
