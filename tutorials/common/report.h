// Reading a finished run back, for the tutorials' printouts: the statistics `dpscope stats`
// computes (analysis/stats.h), the few questions every tutorial asks of them (how many collectives
// and bytes in an iteration, which bucket plan was in force), and readable sizes and plans.
// Trace-only: works for DDP and FSDP runs alike.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "analysis/cluster_clock.h"
#include "analysis/stats.h"
#include "trace/reader.h"

namespace dpscope::tutorials {

// The statistics of the file at `path` (a run file from TracedRun::finish()) on the lesson's
// clock: the cluster clock for a CPU run on an emulated link, else the measured one (Note [The
// lesson's clock], analysis/clock_choice.h). `clock` in the result says which.
analysis::RunStats read_stats(const std::string& path);
// The same on this machine's measured clock, to print beside the lesson's.
analysis::RunStats read_measured_stats(const std::string& path);

// A run's events on the lesson's clock, for the printouts that read events themselves (when each
// all-reduce went out, when the last gradient came): on the cluster clock when the lesson reads
// it (Note [The lesson's clock]; the run replayed once, at construction), else as recorded.
// Holds `reader`, which must outlive it; one thread.
class LessonEvents {
 public:
  explicit LessonEvents(trace::Reader& reader);
  // reader.events_of_kind(kind, rank), each event's times on the lesson's clock.
  std::vector<trace::Event> of_kind(trace::EventKind kind, int rank) const;
  const analysis::ClockLabel& clock() const { return clock_; }
  // The replay behind them on the cluster clock, null on the measured clock: for a caller that
  // needs more of it (statistics, a what-if) without replaying the run again.
  const analysis::ClusterClockRun* cluster() const { return cluster_ ? &*cluster_ : nullptr; }

 private:
  trace::Reader& reader_;
  std::optional<analysis::ClusterClockRun> cluster_;
  analysis::ClockLabel clock_;
};

// The statistics of `rank`. Throws std::out_of_range naming the rank and file when absent.
const analysis::RankStats& rank_stats(const analysis::RunStats& stats, int rank);

// Collectives of kind `op` that `rank` ran in `iteration` (trace::kNone: construction), and their
// payload bytes (what one rank hands the collective, as the trace records it).
int64_t collectives_in(const analysis::RankStats& rank, int32_t iteration, trace::CollectiveOp op);
int64_t collective_bytes_in(const analysis::RankStats& rank, int32_t iteration, trace::CollectiveOp op);

// The DDP bucket plan of a generation (0: built at construction, 1: rebuilt after iteration 0),
// in bucket order; empty when there is none.
std::vector<trace::BucketInfo> bucket_plan(const analysis::RunStats& stats, int generation);
// The plan DDP used in `iteration`: the rebuilt one from iteration 1 on, when there is one.
std::vector<trace::BucketInfo> plan_in_force(const analysis::RunStats& stats, int32_t iteration);
// Prints a plan, one line per bucket: index, size, and its parameters by name in slot order.
void print_bucket_plan(const analysis::RunStats& stats, const std::vector<trace::BucketInfo>& plan,
                       const char* indent = "  ");

// Prints what `rank` recorded in `iteration` (trace::kNone: construction), in time order, one
// line per event: milliseconds since the first event, the lane, and what happened (phase, hook,
// bucket ready / launch / done, collective, wait) — the viewer's timeline of that stretch as text.
// Prints at most `max_lines` events, then how many it left out.
void print_timeline(trace::Reader& reader, const analysis::RunStats& stats, int rank,
                    int32_t iteration, size_t max_lines = 60);

// ---- Runs side by side (ZeRO's stages: tutorials 12 and 13)

// One finished run and what a table calls it.
struct LabelledRun {
  std::string label;
  const analysis::RunStats* stats;
};

// Rank 0's peak in the training steps (RankStats::step_memory_peak), MiB by category at that
// moment, one column per run, with the total and its ratio to the first run's; then every
// rank's peak. Categories that are 0 in every run are left out.
void print_step_memory_peaks(const std::vector<LabelledRun>& runs);

// The bytes one rank puts on the ring for a collective of `op` among `ranks` (the ring model of
// docs/communication.md), `bytes` as the trace counts them: an all-reduce 2(n-1)/n of its tensor,
// a reduce-scatter (n-1)/n of its input, an all-gather (n-1) times one rank's share, a broadcast
// its tensor, a barrier nothing.
int64_t ring_bytes_sent(trace::CollectiveOp op, int64_t bytes, int ranks);

// Communication per training step, rank 0, median of steps 2..: collectives, the bytes it sends
// on the ring, what the run's emulated link needs for them by its ring model ("-" without a
// link), the time with a collective running, and the bytes against the first run's.
void print_ring_traffic(const std::vector<LabelledRun>& runs, int ranks);

// Which clock the times above were on, and each run's step on both clocks: rank 0's median over
// the steady steps on the lesson's clock (RunStats::clock) and measured on this machine (read
// again from the run's file), one row per run. On the measured clock, how to get the cluster
// clock. See Note [The lesson's clock] (analysis/clock_choice.h).
void print_clocks(const std::vector<LabelledRun>& runs);

// "660 B", "12.5 KiB", "2.00 MiB".
std::string bytes_text(int64_t bytes);

}  // namespace dpscope::tutorials
