// The cluster_step_ms line of `dpscope launch` and `dpscope train` (cluster_step.h).
#include "cli/cluster_step.h"

#include <cstdio>
#include <exception>

#include "analysis/clock_choice.h"
#include "analysis/cluster_clock.h"
#include "trace/reader.h"
#include "trace/vocabulary.h"

namespace dpscope::cli {

ClusterStepReport cluster_step_report(const std::string& run_file) {
  ClusterStepReport report;
  try {
    trace::Reader reader(run_file);
    if (!reader.meta().count(std::string(trace::meta_key::kLinkGbps))) return report;
    const analysis::ClusterClockRun run = analysis::cluster_clock(reader, run_file, std::nullopt);
    report.notes = run.warnings;
    if (const std::optional<double> ms = run.steady_step_ms(0)) {
      char text[64];
      std::snprintf(text, sizeof(text), "%.3f", *ms);
      const analysis::ClockLabel label{analysis::Clock::Cluster, run.link.gbps, run.link.latency_us};
      report.line = std::string("cluster_step_ms ") + text + " (rank 0, steady steps; " +
                    analysis::clock_text(label) + ")";
    }
  } catch (const std::exception& failure) {
    report.notes.push_back("no cluster clock for " + run_file + ": " + failure.what());
  }
  return report;
}

}  // namespace dpscope::cli
