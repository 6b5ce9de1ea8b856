// The analysis of a trace: the one place where every figure dpscope shows is defined and computed
// (`dpscope stats`, the viewer's Stats / Compare / Buckets panels, the demo's summary and the
// tutorials' printouts all read a RunStats): per-rank, per-iteration step times, hook and
// collective counts, compute / communication / overlap / exposed time, exposure per bucket, memory
// at the peak, collectives matched across ranks; and its two renderings, the readable report and
// the JSON contract (docs/trace-format.md, "dpscope stats --json").
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "analysis/clock_choice.h"
#include "analysis/collective_match.h"
#include "analysis/gpu_breakdown.h"
#include "analysis/group_traffic.h"
#include "analysis/memory_peak.h"
#include "analysis/param_rows.h"
#include "analysis/stragglers.h"
#include "core/steady_steps.h"
#include "trace/reader.h"
#include "trace/records.h"
#include "trace/schema.h"
#include "trace/vocabulary.h"

namespace dpscope::analysis {

struct ClusterClockRun;  // analysis/cluster_clock.h

// Note [Compute and exposed communication]
// compute = the union of the Phase slices named "forward", "backward" and "optimizer_step", less
// the CollectiveWait slices: a thread waiting for a collective inside a phase computes nothing
// (DDP's wait for its last buckets in finalize_backward, FSDP's wait for an all-gather). comm =
// the union of the Collective slices, on any lane. overlap = comm during compute: communication
// hidden behind it. exposed_comm = comm - overlap: communication during which the rank computes
// nothing, which the step pays for. Lengths of unions (analysis/intervals.h), so overlapping slices
// count once. Per iteration, the slices whose `iteration` column is that iteration; for the run,
// every slice, construction included. Milliseconds.
// On a rank with GPU kernels (an imported GPU trace) compute is the GPU's instead: the union of
// its compute kernels (Note [GPU breakdown]'s classes), each counted in the iteration whose step
// launched it, and comm its communication kernels; the CPU's phases enclose the kernels they
// launch, so they would hide every collective. RankStats::compute_source says which.
struct OverlapStats {
  double compute_ms = 0;
  double comm_ms = 0;
  double overlap_ms = 0;
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
  std::array<int64_t, trace::kCollectiveOpCount> collectives{};
  // See Note [Compute and exposed communication]; the slices of this iteration.
  OverlapStats overlap;
  // This iteration's collectives matched on every rank, split at the last rank's arrival (Note
  // [Waiting and transfer]). Milliseconds.
  double wait_ms = 0;
  double transfer_ms = 0;
};

// The all-reduces of one DDP bucket on one rank over the run (the Collective events carrying the
// bucket): how long they ran and how much of that no compute of their iteration hid (See Note
// [Compute and exposed communication]). Milliseconds.
struct BucketExposure {
  int32_t bucket = 0;
  int64_t bytes = trace::kNone64;  // its all-reduce's bytes on this rank (the last one); kNone64: unknown
  int64_t collectives = 0;
  double comm_ms = 0;
  double exposed_comm_ms = 0;
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
  std::string status;          // ranks.status as recorded (trace::parse_rank_status reads it)
  int64_t dropped_events = 0;  // events the recorder could not buffer
  std::vector<IterationStats> iterations;  // one per run iteration, 0..RunStats::iterations-1
  // Ordered by (grp, seq, begin).
  std::vector<CollectiveStats> collectives;
  // Memory at the peak over the whole run, construction included (Note [Memory at the peak]).
  MemoryAtPeak memory_peak;
  // The same over the training steps only: the peak from the first iteration's begin to the
  // last iteration's end (construction can peak higher: the model is built, then broadcast or
  // sharded; so can an evaluation after the steps: Note [Work outside iterations]). Not found
  // when the rank recorded no iteration.
  MemoryAtPeak step_memory_peak;
  // Memory after the steps: each stacked category's bytes at the last sampled moment up to the
  // end of the rank's last iteration, with total_bytes their sum and ts_ns that moment. What
  // persists between steps (parameters, gradients, buffers, optimizer state; no activations, no
  // temporaries of a step): what ZeRO's formulas count. Not found without an iteration or a
  // category sample by then.
  MemoryAtPeak memory_after_steps;
  // The largest sample of each category on its own, in MemoryCategory order (allocator and CUDA
  // read-outs included). Taken at different moments: they may add up to more than the peak.
  std::vector<CategoryBytes> category_max;
  // The largest value of each category on its own over the same steps as step_memory_peak (a
  // value sampled before the first iteration counts: it holds into the steps), in
  // MemoryCategory order. On a GPU, largest_in_steps(CudaAllocated) is the steps' peak of GPU
  // memory, as step_memory_peak is the host's.
  std::vector<CategoryBytes> step_category_max;
  // The largest sample of `category` (0 when it has none).
  int64_t largest(trace::MemoryCategory category) const;
  // The largest value of `category` in the steps (0 when it has none).
  int64_t largest_in_steps(trace::MemoryCategory category) const;
  // Whether the rank trained on a GPU: it sampled the CUDA caching allocator (cuda_allocated).
  // Its stacked categories then count host memory only; the GPU's is cuda_allocated (no
  // categories: the tracking allocator sees the CPU allocator alone).
  bool sampled_gpu_memory() const;
  OverlapStats overlap;  // over every slice of the rank, construction included
  // What `overlap` (and each iteration's) counts as compute (Note [Compute and exposed communication]).
  enum class ComputeSource : uint8_t { Phases, GpuKernels };
  ComputeSource compute_source = ComputeSource::Phases;
  // Phase slices named forward, backward or optimizer_step: without any, compute (and with it
  // overlap and exposure) is unknown, not zero, and the report says so.
  int64_t compute_phases = 0;
  std::vector<BucketExposure> buckets;  // DDP: by bucket index, buckets that had an all-reduce
  std::optional<DdpTimings> ddp;
  // Over its collectives matched on every rank, the time waiting for the last rank to arrive and
  // the time transferring (Note [Waiting and transfer]). Milliseconds.
  double wait_ms = 0;
  double transfer_ms = 0;
  int64_t clock_offset_ns = 0;       // ranks.clock_offset_ns: what was added to its clock
  int64_t clock_uncertainty_ns = 0;  // ranks.clock_uncertainty_ns
  // The GPU breakdown of a rank with GPU kernels (imported traces; Note [GPU breakdown]), on the
  // measured clock only; empty otherwise.
  std::optional<GpuBreakdown> gpu;

  // False when the numbers are incomplete: events were dropped or the rank did not finish.
  bool complete() const {
    return dropped_events == 0 && trace::parse_rank_status(status) == trace::RankStatus::Complete;
  }
};

struct UnitStats {
  trace::UnitInfo unit;
  std::vector<int32_t> params;  // indices of the params whose unit is this one, ascending
};

struct RunStats {
  std::string path;
  int schema_version = 0;
  // The clock every time below is on (Note [Stats on the cluster clock]).
  ClockLabel clock;
  // The earliest begin of any event of any rank on that clock: where a collective's begin_ms
  // counts from. 0 on the cluster clock (every rank starts there), and for a run without events.
  int64_t origin_ns = 0;
  // Meta key "strategy": the strategy (Unknown when absent or not one of the vocabulary's), and
  // its text as recorded, which the summaries show.
  trace::Strategy strategy = trace::Strategy::Unknown;
  std::string strategy_recorded;
  // Meta keys "backend", "model"; "" when absent.
  std::string backend;
  std::string model;
  // Meta "world_size" when it holds a number, else the number of ranks in the file.
  int32_t world_size = 0;
  // 1 + the largest iteration of any event or metric; 0 when nothing has one.
  int32_t iterations = 0;
  std::vector<trace::ParamInfo> params;    // by index
  std::vector<trace::BucketInfo> buckets;  // by (generation, index)
  std::vector<UnitStats> units;     // by index
  // FSDP2 only: each parameter's dim-0 rows per rank, by position in `params` (Note [Rows from
  // the trace]); empty for other strategies.
  std::vector<std::vector<RowRange>> param_rows;
  std::vector<RankStats> ranks;     // every rank of the ranks table, by rank
  // Every collective with a sequence number, matched across the ranks of the file, by (grp, seq).
  std::vector<CollectiveMatch> matches;
  // Every process group's collectives and bytes on the wire per rank, by group id.
  std::vector<GroupTraffic> groups;
  int64_t mismatches = 0;   // matches with mismatch set
  int64_t max_skew_ns = 0;  // the largest skew of any match
  // The ranks the others keep waiting for, over the steady iterations (Note [Stragglers]).
  StragglerFinding stragglers;
  // Meta "link_gbps" and "link_latency_us": the emulated interconnect the run used; 0 when the
  // link was real. See docs/communication.md.
  double link_gbps = 0;
  double link_latency_us = 0;
  // How the ranks were put on one clock (meta clock_alignment): rendezvous for dpscope's own runs,
  // collective-ends or none for imported ones (formats/kineto_align.h); with the import's reason
  // when it kept every offset 0.
  trace::ClockAlignment alignment = trace::ClockAlignment::Rendezvous;
  // How the memory samples' categories were counted (meta memory_accounting): tracking when absent
  // (every run before ownership existed); ownership's categories split the run device's memory, a
  // GPU's cuda_allocated on a GPU run (Note [Ownership accounting] in engine/memory).
  trace::MemoryAccounting memory_accounting = trace::MemoryAccounting::Tracking;
  // Meta imported_from: the PyTorch profiler files an imported run came from; "" for dpscope's own.
  std::string imported_from;
  std::string alignment_note;
};

// The steady-step summaries of one rank's figures (See Note [Steady steps] in core/steady_steps.h).
core::StepSummary step_summary(const RankStats& rank);
// The mean per step of each overlap figure over the same steady steps: what one training step
// computes, communicates and leaves exposed (the demo's and the tutorials' "per step"). Pure.
OverlapStats overlap_per_step(const RankStats& rank);
// The mean per step of the waiting and transfer times over the same steady steps: {wait_ms,
// transfer_ms}. Pure.
std::pair<double, double> wait_per_step(const RankStats& rank);
// "emulated link 4 Gb/s, 50 µs", or "" when the link was real.
std::string link_text(const RunStats& stats);
// The same from the meta values (the viewer's header reads them without a RunStats): "" when
// link_gbps <= 0.
std::string link_text(double link_gbps, double link_latency_us);

// Reads the statistics from `reader`: one streaming pass over the events (nothing but a few
// intervals per iteration is kept), then each rank's metrics and memory samples. A 10 M-event
// trace takes seconds. Throws TraceError if the file cannot be read.
// Thread-safety: uses `reader`, so the calling thread must own it; the result is a plain value.
RunStats compute_stats(trace::Reader& reader);

// Note [Stats on the cluster clock]
// The same figures with every event's times on the cluster clock (ClusterClockRun::to_cluster):
// one definition of compute, overlap, waits and steps on both clocks, only the times differ. A
// step is its `iteration` phase on that clock (the recorded step_ms metric is this machine's),
// memory samples move with the events around them, and every rank's clock is the same one
// (clock_uncertainty 0). `cluster` must come from cluster_clock() on the same file. Throws as
// the other overload.
RunStats compute_stats(trace::Reader& reader, const ClusterClockRun& cluster);
}  // namespace dpscope::analysis
