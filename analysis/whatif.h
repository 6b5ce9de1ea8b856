// What-if replay of a DDP trace: the step time and exposed communication a recorded run would
// have had with another bucket plan (bucket cap, first bucket) or another link, predicted from
// the trace itself. Behind `dpscope whatif` (docs/whatif.md); LibTorch-free, so the viewer can
// draw the same predictions. The cost model of one all-reduce lives in whatif_model.cpp.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "analysis/intervals.h"
#include "analysis/stats.h"
#include "analysis/whatif_model.h"
#include "core/bucket_plan.h"
#include "core/link_model.h"
#include "trace/reader.h"

namespace dpscope::analysis {

// Note [What-if replay]
// whatif replays each steady iteration (Note [Steady steps]) of one rank of a DDP trace with a
// bucket plan of its choosing. Kept as recorded: every gradient's ready time (the end of its
// Hook event; a parameter without a hook that iteration, e.g. unused, is ready at the first
// hook's end), and all compute before the backward's tail. The plan is what PyTorch's rebuild
// makes (core/bucket_plan.h): the gradients in the order they arrived on rank 0 in the first
// iteration that fired every hook, limits [first bucket, cap]. Then, bucket by bucket in index
// order:
//   ready  = the latest ready time of its gradients
//   launch = max(ready, previous bucket's launch)          buckets launch strictly in index order
//   start  = max(launch + launch offset, previous end)      one all-reduce at a time on the link
//   end    = start + model(bytes)                           (whatif_model.cpp)
// except that with the fitted model a bucket holding exactly the parameters of a recorded bucket
// keeps that bucket's recorded all-reduce time in each iteration (a measurement of that very
// message); on another link (--link-gbps) every bucket is costed by the link's model.
// The backward's tail — from the finalize_backward phase's begin (else the first wait for a
// bucket's all-reduce after the last hook) to its end (else the last such wait's end) — waits
// for the buckets in index order, and its recorded work besides waiting (writing the averaged
// gradients back) is shared among the new buckets by bytes, each share done after its bucket's
// wait. The tail's predicted end minus its recorded end is the delta: every slice of the
// iteration that begins (ends) at or after the recorded tail end begins (ends) delta later, and
// the step time is the recorded step_ms plus delta. Exposed communication is then computed on
// the predicted slices as Note [Compute and exposed communication] defines it: compute =
// forward, backward and optimizer_step less the waits (the predicted tail waits replace the
// recorded bucket waits), comm = the predicted bucket all-reduces and every other collective of
// the iteration as recorded. Ranks are replayed independently: each times its own collectives
// from its own launches, as the emulated link does (Note [Link emulation]). On the cluster clock
// a collective starts on the link when every rank has issued it (Note [Cluster clock]), so there
// a bucket's all-reduce begins at this rank's launch, as above, but its transfer only at the
// latest rank's: launch_everywhere = max(latest ready of its gradients on any rank, previous
// bucket's launch_everywhere), end = max(start, launch_everywhere + launch offset) + model.

// A refusal: the trace cannot be replayed, or the settings are out of range. The message is
// one line naming the file or the flag and saying what to do.
class WhatifError : public std::runtime_error {
 public:
  explicit WhatifError(const std::string& message) : std::runtime_error(message) {}
};

// The bucket limits of a plan, in bytes.
struct BucketLimits {
  int64_t first_bucket_bytes = core::kDefaultFirstBucketBytes;
  int64_t bucket_cap_bytes = core::kDefaultBucketBytes;
};

// What the replay reads of one steady iteration on one rank. Plain values.
struct ReplayIteration {
  int32_t iteration = 0;
  double measured_step_ms = 0;  // compute_stats' step time
  OverlapStats measured;        // compute_stats' per-iteration figures
  std::vector<int64_t> ready_ns;  // by parameter index: its gradient's ready time
  // On the cluster clock, by parameter index: its latest ready time on any rank; empty on the
  // measured clock, where each rank is replayed on its own (Note [What-if replay]).
  std::vector<int64_t> ready_everywhere_ns;
  std::vector<Interval> compute;  // forward, backward and optimizer_step phases
  std::vector<Interval> waits;       // collective waits other than the tail's bucket waits
  std::vector<Interval> other_comm;  // collectives other than the bucket all-reduces
  Interval tail;                     // the backward's tail (Note [What-if replay])
  int64_t tail_work_ns = 0;          // the tail's length less its bucket waits
  // The recorded bucket all-reduces of this iteration, by bucket of the recorded plan.
  struct RecordedAllReduce {
    int32_t bucket = 0;
    int64_t bytes = 0;
    Interval span;
  };
  std::vector<RecordedAllReduce> allreduces;
};

// What every replayed trace records of its run (DDP's ReplayTrace and FSDP's FsdpReplayTrace).
struct ReplayOrigin {
  std::string path;
  int32_t world_size = 0;
  int32_t rank = 0;                            // the rank replayed
  double link_gbps = 0, link_latency_us = 0;   // the emulated link, 0 when none
};

// The origin of a replay of `rank` of `stats`' run (read from `path`).
ReplayOrigin replay_origin(const std::string& path, const RunStats& stats, int32_t rank);

// Everything whatif needs of a trace, read once (load_replay_trace).
struct ReplayTrace : ReplayOrigin {
  std::vector<core::GradientDesc> gradients;  // by parameter index
  std::vector<std::string> param_names;
  std::vector<int64_t> arrival_order;  // parameter indices in the order rank 0's hooks fired
  core::BucketPlan recorded_plan;            // the trace's rebuilt plan (its initial one if none)
  std::optional<BucketLimits> recorded_limits;  // from meta config, when recorded
  std::vector<ReplayIteration> iterations;     // the steady iterations of `rank`
  // Every recorded bucket all-reduce of the steady iterations on every rank: (bytes, ns).
  std::vector<std::pair<int64_t, int64_t>> allreduce_samples;
  // Median of (all-reduce start - its bucket's ready time) over the recorded all-reduces that
  // did not queue behind the previous one, on the replayed rank: the launch offset.
  int64_t launch_offset_ns = 0;
  // On the cluster clock a bucket's transfer waits for the last rank to launch it (the
  // iterations carry every rank's ready times); on the measured clock each rank is replayed on
  // its own (Note [What-if replay]).
  bool transfers_wait_for_every_rank() const {
    return !iterations.empty() && !iterations.front().ready_everywhere_ns.empty();
  }
};

// Reads `reader`'s trace for a replay of `rank`, using `stats` (compute_stats of the same
// reader) for the measured figures and the steady iterations. Throws WhatifError naming the
// file and the fix for: another strategy than DDP, no Hook events (trace level summary), no
// steady iterations, a rank not in the file, a comm hook other than the built-in all-reduce.
// Thread-safety: uses `reader`, so the calling thread must own it; the result is a plain value.
// With `cluster`, on the cluster clock: `stats` then computed on it (compute_stats(reader,
// *cluster)), and every recorded time the replay keeps is the cluster's (Note [What-if replay]).
ReplayTrace load_replay_trace(trace::Reader& reader, const RunStats& stats, int32_t rank,
                              const ClusterClockRun* cluster = nullptr);

// Note [Compute and exposed communication] on predicted slices: compute = the union of
// `compute` less the union of `waits`, comm = the union of `comm`. Pure.
OverlapStats overlap_of_slices(std::vector<Interval> compute, std::vector<Interval> waits,
                               std::vector<Interval> comm);

// The plan PyTorch's rebuild would make for `limits` from trace.arrival_order. Pure.
core::BucketPlan plan_for(const ReplayTrace& trace, const BucketLimits& limits);

// One bucket's predicted schedule in one iteration (times on the trace's clock).
struct BucketSchedule {
  int64_t bytes = 0;
  int64_t ready_ns = 0, launch_ns = 0, start_ns = 0, end_ns = 0;
};

struct IterationPrediction {
  int32_t iteration = 0;
  double measured_step_ms = 0;
  double predicted_step_ms = 0;
  OverlapStats measured;
  OverlapStats predicted;
  std::vector<BucketSchedule> buckets;  // in index (launch) order
  std::vector<Interval> predicted_waits;  // the tail's waits
  int64_t tail_end_ns = 0;               // predicted end of the backward's tail
};

struct Prediction {
  std::vector<int64_t> bucket_bytes;  // by bucket index
  // Buckets of the plan identical to a recorded bucket, timed by its recorded all-reduces.
  size_t buckets_timed_as_recorded = 0;
  std::vector<IterationPrediction> iterations;
  // Medians over the steady iterations.
  double measured_step_ms = 0, predicted_step_ms = 0;
  double measured_exposed_comm_ms = 0, predicted_exposed_comm_ms = 0;
};

// Replays every steady iteration of `trace` with `plan` and `model` (Note [What-if replay]).
// Pure; thread-safe.
Prediction predict(const ReplayTrace& trace, const core::BucketPlan& plan, const AllReduceModel& model);

// The median of `values` (0 for none). Pure.
double median_of(std::vector<double> values);

// Sets a prediction's summary, the medians over its iterations of the measured and predicted
// step and exposed communication: DDP's Prediction and FSDP's FsdpPrediction alike.
template <typename PredictionOfIterations>
void summarize_iterations(PredictionOfIterations& prediction) {
  std::vector<double> measured_step, predicted_step, measured_exposed, predicted_exposed;
  for (const auto& it : prediction.iterations) {
    measured_step.push_back(it.measured_step_ms);
    predicted_step.push_back(it.predicted_step_ms);
    measured_exposed.push_back(it.measured.exposed_comm_ms);
    predicted_exposed.push_back(it.predicted.exposed_comm_ms);
  }
  prediction.measured_step_ms = median_of(std::move(measured_step));
  prediction.predicted_step_ms = median_of(std::move(predicted_step));
  prediction.measured_exposed_comm_ms = median_of(std::move(measured_exposed));
  prediction.predicted_exposed_comm_ms = median_of(std::move(predicted_exposed));
}

}  // namespace dpscope::analysis
