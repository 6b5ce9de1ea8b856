// The cluster clock: a run's timeline replayed as a cluster would run it — each rank's compute
// taking its thread's CPU time, each collective the link model's time once every rank has
// issued it — so that a lesson about time reads the same on an idle laptop and on a busy one.
// Note [Cluster clock] says how; docs/cluster-clock.md what it leaves out.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "analysis/clock_choice.h"
#include "core/link_model.h"
#include "trace/reader.h"
#include "trace/schema.h"

namespace dpscope::analysis {

// A trace the cluster clock cannot replay, or a link it cannot use; the message names the file
// and the fix.
class ClusterClockError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A collective: its process group and its sequence number in it (the same on every rank).
using CollectiveKey = std::pair<int32_t, int64_t>;

// ---- What the replay reads: each rank's program ------------------------------------------

// In the order that points of one instant take in a program read from a trace.
enum class PointKind : uint8_t {
  Compute,     // a moment of the thread (a span's begin or end, an instant); compute led to it
  Issue,       // the thread issued collective (grp, seq)
  WaitBegin,   // the thread began to wait for (grp, seq)
  WaitEnd,     // ... and went on once it had completed
  SleepBegin,  // a sleep standing for work (--straggler's delay): its wall time counts as compute
  SleepEnd,
};

// A moment of a rank's computing thread, on both of its clocks (Note [Thread CPU time]).
struct ThreadPoint {
  int64_t wall_ns = 0;  // the trace's clock, aligned to rank 0
  int64_t cpu_ns = 0;   // the thread's CPU clock
  PointKind kind = PointKind::Compute;
  CollectiveKey collective{trace::kNone, trace::kNone64};  // Issue, WaitBegin, WaitEnd
  // What the point is a moment of (the event's kind and name, begin or end), the same in every
  // step: Note [Steady compute] matches steps' points by it. 0 in hand-built programs.
  uint32_t site = 0;
};

struct IssuedCollective {
  trace::CollectiveOp op = trace::CollectiveOp::AllReduce;
  int64_t bytes = 0;  // as the trace counts them (link_model_ns)
};

// One rank's program: its computing thread's points in the order they happened, and what each
// collective it issued moves.
struct RankProgram {
  int32_t rank = 0;
  std::vector<ThreadPoint> points;
  std::map<CollectiveKey, IssuedCollective> collectives;
};

// ---- What the replay gives --------------------------------------------------------------

// A span on the cluster clock: nanoseconds from the run's start, when every rank starts at once.
struct ClusterSpan {
  int64_t begin_ns = 0;
  int64_t end_ns = 0;
};

struct ClusterTimeline {
  // Per rank, the cluster time of each of its program's points, in the program's order.
  std::map<int32_t, std::vector<int64_t>> point_ns;
  // Each collective on the link: the same span on every rank that ran it.
  std::map<CollectiveKey, ClusterSpan> collectives;
  // Waits for a collective that not every rank of its group issued in the trace (a rank that
  // failed, a trace cut short): taken at their recorded wall time instead.
  int64_t unmatched_waits = 0;
};

// Replays `programs` on `link` (Note [Cluster clock]). Pure and deterministic: the same programs
// give the same timeline. Throws ClusterClockError when a program is out of order (a point
// before the one that precedes it on either clock).
ClusterTimeline replay_programs(const std::vector<RankProgram>& programs, const core::LinkSpec& link);

// A step of a rank's program: its `iteration` phase's wall span (the trace's clock).
struct StepWall {
  int32_t iteration = 0;
  int64_t begin_ns = 0;
  int64_t end_ns = 0;
};

// Rewrites `program`'s CPU clock so that each piece of compute inside a steady step (iteration
// steady_from(steps.size()) on) takes the least CPU time the same piece took over the steady
// steps of the same shape (Note [Steady compute]); every other piece keeps its own. Wall times,
// kinds and the order stay. Returns how many steps it rewrote (0: no shape repeated in 3 steady
// steps). Pure.
int64_t steady_compute(RankProgram& program, const std::vector<StepWall>& steps);

// ---- A trace on the cluster clock --------------------------------------------------------

// One rank's share of a collective on the cluster clock: when its thread issued it, when its
// NIC took it up (the issue, or the end of the collective the rank issued before it: the
// emulated link's queue), and when it ended on the link, the same on every rank. From `begin_ns`
// to the link span's start the rank waits for the others (Note [Waiting and transfer]), as a
// Gloo span does for the last rank to arrive.
struct RankCollectiveSpan {
  int64_t issue_ns = 0;
  int64_t begin_ns = 0;
  int64_t end_ns = 0;
};

struct ClusterClockRun {
  core::LinkSpec link;
  ComputeTime compute = ComputeTime::Steady;
  bool link_from_trace = true;  // the run's emulated link (meta), or one given by the caller
  // What the reader should know about the replay ("recorded with 2 intra-op threads: ...").
  std::vector<std::string> warnings;
  std::vector<RankProgram> programs;
  ClusterTimeline timeline;
  // Each rank's iterations (the `iteration` phases) on the cluster clock.
  std::map<int32_t, std::map<int32_t, ClusterSpan>> iterations;
  // Per rank, each collective it issued that went on the link.
  std::map<int32_t, std::map<CollectiveKey, RankCollectiveSpan>> rank_collectives;

  // `wall_ns` of `rank` (the trace's clock) on the cluster clock: exact at the program's points,
  // linear in wall time between them, and the nearest point's outside. Events off the computing
  // thread (unit states, memory samples) are placed so. 0 for a rank without points.
  int64_t to_cluster(int32_t rank, int64_t wall_ns) const;
  // `e` with its times on the cluster clock, every other field as recorded: a collective that
  // went on the link takes its RankCollectiveSpan (enqueue_ns the issue); any other event, and a
  // collective that never got on the link, maps begin, end and enqueue through to_cluster (an
  // end never before its begin). What `dpscope stats --clock cluster` and the viewer's cluster
  // clock read instead of the recorded event.
  trace::Event to_cluster(const trace::Event& e) const;
  // The median of `rank`'s steady iterations (Note [Steady steps]) in ms on the cluster clock;
  // nullopt with fewer than 3 iterations.
  std::optional<double> steady_step_ms(int32_t rank) const;
};

// Reads `reader`'s run and replays it on `link`, or on the run's emulated link when `link` is
// nullopt, its compute taken as `compute` says. Throws ClusterClockError naming `path` when the
// run cannot be replayed: no link given nor recorded, a GPU run (its measured clock is the
// cluster's own), a trace without CPU times (schema version 3 and older, or trace level off).
// Thread-safety: uses `reader`, which the calling thread must own.
ClusterClockRun cluster_clock(trace::Reader& reader, const std::string& path,
                              const std::optional<core::LinkSpec>& link,
                              ComputeTime compute = ComputeTime::Steady);

}  // namespace dpscope::analysis
