// What-if replay of an FSDP trace: the step time and exposed communication a recorded FSDP run
// would have had with another backward prefetch mode or all-gather limit, or on another link,
// predicted from the trace itself. Behind `dpscope whatif` on FSDP traces (docs/whatif.md,
// "FSDP"); LibTorch-free like the DDP replay (whatif.h), whose cost model and errors it shares.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "analysis/intervals.h"
#include "analysis/stats.h"
#include "analysis/whatif.h"
#include "analysis/whatif_fsdp_load.h"
#include "trace/reader.h"
#include "trace/vocabulary.h"

namespace dpscope::analysis {

// Note [FSDP what-if replay]
// whatif replays each steady iteration (Note [Steady steps]) of one rank of an FSDP trace as the
// program its main thread ran: the points where it issued a collective (the collective's
// enqueue_ns), waited for one (its CollectiveWait slices), ran a unit's post-backward hook (the
// end of the unit's `full` state in backward) and began or ended a phase, in recorded order,
// with the main thread's time between two points (less its waits) kept as recorded work. Then,
// with the settings asked for:
//   - a unit's all-gather is issued when the unit needs it (pre-forward, pre-backward) unless it
//     is already in flight; the unit waits for it before computing;
//   - the recorded backward prefetches are taken out (their work stays) and put back by the new
//     mode, for the next unit in this backward pass's order, unless that unit's backward already
//     began or its gather is in flight: BACKWARD_PRE right after the current unit's own gather
//     wait (before its gradient computation), BACKWARD_POST at its post-backward hook (after it is
//     resharded, before its reduce-scatter is issued), NONE never. Forward prefetch stays as
//     recorded;
//   - the all-gather limit N > 0, as the engine's issue_gather does it: before issuing one more
//     all-gather while N are in flight (issued and not yet waited for by their unit), the main
//     thread waits for the oldest, which leaves the flight. With the engine's one-unit-ahead
//     prefetch at most one gather is ever ahead, so a limit of 1 or more never binds;
//   - reduce-scatters (direct and bucketed), their waits (--limit-reduce-scatters, the final
//     callback) and every other collective are issued and waited for where recorded;
//   - each process group's link carries one collective at a time in issue order (one group but
//     for hybrid sharding, whose all-reduces across the replicate group queue on a link of their
//     own, behind their reduce-scatter's wait as recorded):
//       start = max(issue + launch offset, previous collective's end),  end = start + cost,
//     the launch offset the median (start - enqueue) of the recorded collectives that did not
//     queue, the cost of an all-gather or reduce-scatter from the model of its op
//     (whatif_model.cpp; a link's model over the ranks of the group it runs on, hybrid sharding's
//     shard group), any other collective as recorded from its issue to its end — with the wait for
//     its group's last rank in it, which a replay of one rank cannot know otherwise: HSDP's
//     replicate all-reduce joins ranks of two shard groups whose schedules drift apart; a wait ends at max(its begin, the
//     collective's end).
// The program's predicted end minus its recorded end is the delta: the step time is the recorded
// step_ms plus delta. Exposed communication is computed on the predicted slices as Note [Compute
// and exposed communication] defines it: compute = the predicted forward, backward and
// optimizer_step phases less the predicted waits, comm = the predicted collectives. Ranks are
// replayed independently (Note [Link emulation]): a late peer is in the fitted costs only on
// average, and the replay is exact only where the recorded collectives follow the model.

// The cost of each kind of collective in an FSDP replay. Plain value.
struct FsdpCostModel {
  AllReduceModel all_gather, reduce_scatter;
  // By op; any other collective inside an iteration (none in a plain FSDP step) takes as long
  // as it was recorded to.
  int64_t duration_ns(const FsdpCollective& c) const;
};

// Least squares of the trace's all-gathers and reduce-scatters, separately (fit_collective_model).
// Throws WhatifError as fit_collective_model does. Pure.
FsdpCostModel fit_fsdp_cost_model(const FsdpReplayTrace& trace);

// One collective's predicted schedule (times on the trace's clock).
struct FsdpScheduledCollective {
  int32_t collective = 0;  // index into FsdpIteration::collectives
  bool prefetch = false;   // issued ahead of its unit's need
  int64_t issue_ns = 0, start_ns = 0, end_ns = 0;
};

struct FsdpIterationPrediction {
  int32_t iteration = 0;
  double measured_step_ms = 0, predicted_step_ms = 0;
  OverlapStats measured, predicted;
  std::vector<FsdpScheduledCollective> collectives;  // in issue order
  std::vector<Interval> waits;                       // the main thread's predicted waits
  int32_t max_gathers_in_flight = 0;                 // the most all-gathers ever in flight
};

struct FsdpPrediction {
  FsdpSettings settings;
  std::vector<FsdpIterationPrediction> iterations;
  // Medians over the steady iterations.
  double measured_step_ms = 0, predicted_step_ms = 0;
  double measured_exposed_comm_ms = 0, predicted_exposed_comm_ms = 0;
  int32_t max_gathers_in_flight = 0;  // over every iteration
};

// Replays every steady iteration of `trace` with `settings` and `model` (Note [FSDP what-if
// replay]). Pure; thread-safe.
FsdpPrediction predict_fsdp(const FsdpReplayTrace& trace, const FsdpSettings& settings,
                            const FsdpCostModel& model);

}  // namespace dpscope::analysis
