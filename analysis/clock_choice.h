// Which clock a figure is on: the measured one (this machine's, as recorded) or the cluster clock
// (the run replayed with compute as its threads' CPU time and the network as the link model:
// analysis/cluster_clock.h). Every report that shows a time says which, in these words.
// Constants and pure functions only: thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "trace/reader.h"
#include "trace/vocabulary.h"

namespace dpscope::analysis {

enum class Clock {
  Measured,  // as recorded on this machine, its scheduler and its real transfers included
  Cluster,   // replayed as a cluster would run it (docs/cluster-clock.md)
};

// "measured" | "cluster": the spelling of `--clock` and of the JSON's "clock"."name".
std::string_view to_string(Clock clock);
// The clock `text` spells; nullopt for anything else.
std::optional<Clock> parse_clock(std::string_view text);

// How the cluster clock takes each piece of a rank's compute (the CPU time between two moments
// of its computing thread).
enum class ComputeTime : uint8_t {
  // In a steady step, the least CPU time the same piece took over the run's steady steps of the
  // same shape (Note [Steady compute], analysis/cluster_clock.cpp): the work's cost, steady from
  // run to run, where one step's CPU time also carries the machine's moment. The default.
  Steady,
  // Each piece the CPU time it used in its own step, as recorded.
  Recorded,
};

// "steady" | "recorded": the spelling of `dpscope stats --compute-time` and of the JSON's
// "clock"."compute".
std::string_view to_string(ComputeTime compute);
// The ComputeTime `text` spells; nullopt for anything else.
std::optional<ComputeTime> parse_compute_time(std::string_view text);

// The clock a set of figures is on, with the link the cluster clock replayed (0 on the measured
// clock: its link, when it had an emulated one, is the run's own and reported as such).
struct ClockLabel {
  Clock clock = Clock::Measured;
  double link_gbps = 0;
  double link_latency_us = 0;
  ComputeTime compute = ComputeTime::Steady;  // on the cluster clock
};

// The label a report prints beside its times: "measured (this machine)" or "cluster clock
// (modeled: compute as CPU time, link 4 Gb/s, 50 µs)" ("compute as each step's CPU time" when
// ComputeTime::Recorded).
std::string clock_text(const ClockLabel& label);

// ---- How the ranks share one clock ----------------------------------------------------------

// A run's alignment from its meta: `recorded` is meta clock_alignment ("" when absent), `imported`
// whether meta imported_from is there. Absent means rendezvous for dpscope's own runs, none for a
// file imported before the import aligned ranks.
trace::ClockAlignment recorded_alignment(std::string_view recorded, bool imported);
// The viewer header's words for it: "" for rendezvous (every run of dpscope's own), "ranks aligned
// on collective ends", "ranks' clocks as recorded".
std::string alignment_label(trace::ClockAlignment alignment);

// ---- The clock a lesson reads ------------------------------------------------------------

// Note [The lesson's clock]
// A lesson about time (the tutorials, the demo) reads its numbers on the cluster clock whenever
// the run can be replayed there: a CPU run on an emulated link that recorded its threads' CPU
// time. Then the numbers are the cluster's the run stands for, the same on an idle laptop and a
// busy one. Any other run (no link, a GPU run, a trace without CPU times) reads its measured
// clock, which for a GPU run is already the cluster's. The RunStats says which (its `clock`).
// When a lesson is on the cluster clock it also prints the measured step beside it, so the
// difference is in view.
struct RunStats;
RunStats compute_lesson_stats(trace::Reader& reader);

}  // namespace dpscope::analysis
