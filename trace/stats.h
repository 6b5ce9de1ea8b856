// Run statistics of a trace (`dpscope stats`, the viewer's stats panel): per-rank, per-iteration
// step times, hook and collective counts, compute/communication overlap and memory peaks,
// computed from a Reader, and their two renderings: the readable report and the JSON contract.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "trace/reader.h"
#include "trace/records.h"
#include "trace/schema.h"

namespace dpscope::trace {

// Compute vs communication time. compute = the union of the Phase slices named "forward",
// "backward" and "optimizer_step", less the CollectiveWait slices (time spent waiting inside a
// phase computes nothing); comm = the union of the Collective slices (on any lane);
// exposed_comm = comm minus compute, i.e. communication nothing hides. Lengths of unions, so
// overlapping slices count once. Milliseconds.
struct OverlapStats {
  double compute_ms = 0;
  double comm_ms = 0;
  double exposed_comm_ms = 0;
};

struct IterationStats {
  int32_t iteration = 0;
  int64_t hooks = 0;  // Hook events of this iteration
  // The metric "step_ms" of this iteration if recorded, else the length of the Phase slice named
  // "iteration" (the earliest one, if several), else 0.
  double step_ms = 0;
  std::optional<double> loss;  // the metric "loss"; empty when not recorded
  // Collective events of this iteration, indexed by CollectiveOp.
  std::array<int64_t, kCollectiveOpCount> collectives{};
  // As the run's overlap, over the slices whose `iteration` is this one.
  OverlapStats overlap;
};

// One Collective event.
struct CollectiveStats {
  int32_t grp = kNone;
  int64_t seq = kNone64;
  CollectiveOp op = CollectiveOp::AllReduce;
  int64_t bytes = kNone64;
  int32_t iteration = kNone;  // kNone: construction work
};

struct MemoryPeak {
  MemoryCategory category = MemoryCategory::Other;
  int64_t bytes = 0;  // the largest sample of the category
};

// PyTorch DDP's runtime logging data (DDPLoggingData: avg_forward_compute_time, ...), averaged
// over the iterations that have all its marks: forward = the iteration's last "forward" phase
// (the synced one); backward compute = from that iteration's last "backward" phase begin to its
// "finalize_backward" phase begin (every gradient ready); backward comm = from the first
// BucketLaunch to the end of "finalize_backward" (every bucket reduced and written back);
// overlap = backward compute end - backward comm start (communication hidden by backward).
// Milliseconds. Empty for traces without these events (FSDP, synthetic).
struct DdpTimings {
  int32_t iterations = 0;  // iterations averaged
  double forward_compute_ms = 0;
  double backward_compute_ms = 0;
  double backward_comm_ms = 0;
  double backward_compute_comm_overlap_ms = 0;
};

struct RankStats {
  int32_t rank = 0;
  std::string status;          // ranks.status: "complete", "running" (writer died), ...
  int64_t dropped_events = 0;  // events the recorder could not buffer
  std::vector<IterationStats> iterations;  // one per run iteration, 0..RunStats::iterations-1
  // Ordered by (grp, seq, begin).
  std::vector<CollectiveStats> collectives;
  // The peak of allocator_total if the rank sampled it; otherwise the peak over time of the
  // sum of the stacked categories (the first kMemoryCategoryStacked), each holding its value
  // until its next sample, with all samples of one timestamp applied together. 0 without samples.
  int64_t peak_total_bytes = 0;
  std::vector<MemoryPeak> peak_memory;  // categories with samples, in MemoryCategory order
  OverlapStats overlap;  // over every slice of the rank, construction included
  std::optional<DdpTimings> ddp;

  // False when the numbers are incomplete: events were dropped or the rank did not finish.
  bool complete() const { return dropped_events == 0 && status == "complete"; }
};

struct UnitStats {
  UnitInfo unit;
  std::vector<int32_t> params;  // indices of the params whose unit is this one, ascending
};

struct RunStats {
  std::string path;
  int schema_version = 0;
  // Meta keys "strategy", "backend", "model"; "" when absent.
  std::string strategy;
  std::string backend;
  std::string model;
  // Meta "world_size" when it holds a number, else the number of ranks in the file.
  int32_t world_size = 0;
  // 1 + the largest iteration of any event or metric; 0 when nothing has one.
  int32_t iterations = 0;
  std::vector<ParamInfo> params;    // by index
  std::vector<BucketInfo> buckets;  // by (generation, index)
  std::vector<UnitStats> units;     // by index
  std::vector<RankStats> ranks;     // every rank of the ranks table, by rank
};

// Reads the statistics from `reader`: one streaming pass over the events (nothing but a few
// intervals per iteration is kept), then each rank's metrics and memory samples. A 10 M-event
// trace takes seconds. Throws TraceError if the file cannot be read.
// Thread-safety: uses `reader`, so the calling thread must own it; the result is a plain value.
RunStats compute_stats(Reader& reader);

// The `dpscope stats --json` object of DESIGN.md "Contracts", on one line without a newline:
// exactly the contract's keys, in its order; absent values (loss, iteration, bucket, ...) are
// null. Pure function of `stats`.
std::string stats_json(const RunStats& stats);

// The readable report of `dpscope stats`: the run, a warning line for each rank that dropped
// events or did not complete, the buckets and units, and per rank its iterations (step time,
// loss, hooks, collectives, overlap), the median, min and max step time, overall overlap and
// peak memory by category in MiB. Long runs show their first and last iterations only (the
// step time summary still covers all). Ends with a newline. Pure function.
std::string stats_text(const RunStats& stats);

}  // namespace dpscope::trace
