// The spellings and labels of the two clocks (clock_choice.h).
#include "analysis/clock_choice.h"

#include "analysis/cluster_clock.h"
#include "analysis/stats.h"
#include "core/link_model.h"
#include "trace/vocabulary.h"

namespace dpscope::analysis {

std::string_view to_string(Clock clock) {
  switch (clock) {
    case Clock::Measured: return "measured";
    case Clock::Cluster: return "cluster";
  }
  return "measured";
}

std::optional<Clock> parse_clock(std::string_view text) {
  for (const Clock clock : {Clock::Measured, Clock::Cluster}) {
    if (text == to_string(clock)) return clock;
  }
  return std::nullopt;
}

std::string_view to_string(ComputeTime compute) {
  switch (compute) {
    case ComputeTime::Steady: return "steady";
    case ComputeTime::Recorded: return "recorded";
  }
  return "steady";
}

std::optional<ComputeTime> parse_compute_time(std::string_view text) {
  for (const ComputeTime compute : {ComputeTime::Steady, ComputeTime::Recorded}) {
    if (text == to_string(compute)) return compute;
  }
  return std::nullopt;
}

std::string clock_text(const ClockLabel& label) {
  if (label.clock == Clock::Measured) return "measured (this machine)";
  const std::string compute = label.compute == ComputeTime::Recorded ? "each step's CPU time" : "CPU time";
  return "cluster clock (modeled: compute as " + compute + ", link " + core::link_value_text(label.link_gbps) +
         " Gb/s, " + core::link_value_text(label.link_latency_us) + " µs)";
}

trace::ClockAlignment recorded_alignment(std::string_view recorded, bool imported) {
  return trace::parse_mode(trace::kClockAlignments, recorded)
      .value_or(imported ? trace::ClockAlignment::None : trace::ClockAlignment::Rendezvous);
}

std::string alignment_label(trace::ClockAlignment alignment) {
  switch (alignment) {
    case trace::ClockAlignment::Rendezvous: return "";
    case trace::ClockAlignment::CollectiveEnds: return "ranks aligned on collective ends";
    case trace::ClockAlignment::None: return "ranks' clocks as recorded";
  }
  return "";
}

RunStats compute_lesson_stats(trace::Reader& reader) {
  // See Note [The lesson's clock]. Only a run on an emulated link is tried: without one the
  // cluster clock has no network to replay on.
  const auto meta = reader.meta();
  if (meta.count(std::string(trace::meta_key::kLinkGbps))) {
    try {
      const ClusterClockRun cluster = cluster_clock(reader, reader.path(), std::nullopt);
      return compute_stats(reader, cluster);
    } catch (const ClusterClockError&) {
      // A GPU run or a trace without CPU times: its measured clock is the one to read.
    }
  }
  return compute_stats(reader);
}

}  // namespace dpscope::analysis
