// A run's step on the cluster clock, for the lines `dpscope launch` and `dpscope train` print
// beside the step_ms each rank measured (docs/cluster-clock.md): rank 0's median over the
// steady steps, replayed with compute as CPU time and the network as the run's emulated link.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace dpscope::cli {

struct ClusterStepReport {
  // "cluster_step_ms 3.992 (rank 0, steady steps; cluster clock (modeled: compute as CPU time,
  // link 4 Gb/s, 50 µs))"; nullopt when the run has no emulated link (its measured clock is
  // the only one), has fewer than 3 steps, or cannot be replayed (then `notes` says why).
  std::optional<std::string> line;
  // What the reader should know: the replay's warnings, or why there is no line.
  std::vector<std::string> notes;
};

// Reads the finished run file at `run_file` (every rank's events, merged) and replays it.
// Never throws: a file that cannot be read or replayed gives a note naming it.
ClusterStepReport cluster_step_report(const std::string& run_file);

}  // namespace dpscope::cli
