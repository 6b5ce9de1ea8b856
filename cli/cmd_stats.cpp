// `dpscope stats [--clock measured|cluster [--link-gbps G --link-latency-us L]
// [--compute-time steady|recorded]] [--json] TRACE`:
// the run statistics of a trace file, as the readable report or as the JSON object of
// docs/trace-format.md ("dpscope stats --json"), on stdout, on this machine's measured clock or
// on the cluster clock (docs/cluster-clock.md).
#include <iostream>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>

#include "analysis/clock_choice.h"
#include "analysis/cluster_clock.h"
#include "analysis/stats.h"
#include "analysis/stats_report.h"
#include "cli/commands.h"
#include "core/link_options.h"
#include "formats/kineto_import.h"
#include "trace/reader.h"

namespace dpscope::cli {
namespace {

struct StatsOptions {
  std::string trace;
  bool json = false;
  std::string clock{analysis::to_string(analysis::Clock::Measured)};
  core::LinkFlags link;
  std::optional<std::string> compute_time;
};

struct CheckedClock {
  analysis::Clock clock = analysis::Clock::Measured;
  std::optional<core::LinkSpec> link;  // nullopt: the run's own
  analysis::ComputeTime compute = analysis::ComputeTime::Steady;
};

// The clock asked for, and the link and compute time given for the cluster clock. Throws
// CliFailure naming the option.
CheckedClock checked_clock(const StatsOptions& o) {
  const std::optional<analysis::Clock> clock = analysis::parse_clock(o.clock);
  if (!clock) {
    throw CliFailure("stats: --clock " + o.clock + " is not a clock: measured (this machine's, as " +
                     "recorded) or cluster (the run replayed with compute as CPU time and the " +
                     "network as the link model)");
  }
  std::optional<core::LinkSpec> link;
  try {
    link = o.link.checked();
  } catch (const std::invalid_argument& error) {
    throw CliFailure(std::string("stats: ") + error.what());
  }
  if (link && *clock == analysis::Clock::Measured) {
    throw CliFailure("stats: --link-gbps and --link-latency-us choose the cluster clock's link: "
                     "add --clock cluster (the measured clock is the run's own)");
  }
  analysis::ComputeTime compute = analysis::ComputeTime::Steady;
  if (o.compute_time) {
    const std::optional<analysis::ComputeTime> parsed = analysis::parse_compute_time(*o.compute_time);
    if (!parsed) {
      throw CliFailure("stats: --compute-time " + *o.compute_time + " is not a way to take compute: " +
                       "steady (each piece of a step at the least CPU time it took over the run's " +
                       "steps) or recorded (each step's own CPU time)");
    }
    if (*clock == analysis::Clock::Measured) {
      throw CliFailure("stats: --compute-time says how the cluster clock takes compute: add --clock "
                       "cluster (the measured clock is the run's own)");
    }
    compute = *parsed;
  }
  return CheckedClock{*clock, link, compute};
}

}  // namespace

void add_stats_command(CLI::App& app, CommandMode mode) {
  auto options = std::make_shared<StatsOptions>();
  CLI::App* cmd = app.add_subcommand("stats", "Print run statistics of a trace (or --json)");
  cmd->add_flag("--json", options->json,
                "One JSON object (the documented contract) instead of the report");
  cmd->add_option("--clock", options->clock,
                  "measured: this machine's times, as recorded; cluster: the run replayed as a "
                  "cluster would run it (compute as CPU time, the network as the link model)")
      ->capture_default_str();
  core::add_link_options(*cmd, options->link, core::LinkUse::ClusterClock);
  cmd->add_option("--compute-time", options->compute_time,
                  "How the cluster clock takes compute: steady (default; each piece of a step at "
                  "the least CPU time it took over the run's steps) or recorded (each step's own)");
  cmd->add_option("TRACE", options->trace,
                  "A trace file (a rank file or a merged run file), or one PyTorch profiler file "
                  "(.json or .json.gz, imported as dpscope-view imports it; dpscope import keeps a run "
                  "of several)")
      ->required();
  cmd->callback([options, mode] {
    const CheckedClock checked = checked_clock(*options);
    if (mode == CommandMode::Validate) return;
    // Everything is computed before anything is printed: a file that fails to read leaves
    // stdout empty and main() prints its one-line error. A profiler file is imported first, into
    // a temporary run file, as the viewer opens one.
    std::optional<formats::TemporaryImport> imported;
    if (formats::is_kineto_file_name(options->trace)) {
      try {
        imported.emplace(std::vector<std::string>{options->trace}, [](const std::string& line) {
          std::cerr << "dpscope stats: " << line << "\n";
        });
      } catch (const formats::KinetoError& error) {
        throw CliFailure(std::string("stats: ") + error.what());
      }
    }
    const std::string path = imported ? imported->path() : options->trace;
    trace::Reader reader(path);
    std::optional<analysis::RunStats> stats;
    if (checked.clock == analysis::Clock::Cluster) {
      try {
        const analysis::ClusterClockRun cluster =
            analysis::cluster_clock(reader, path, checked.link, checked.compute);
        for (const std::string& warning : cluster.warnings) std::cerr << "dpscope stats: " << warning << "\n";
        stats = analysis::compute_stats(reader, cluster);
      } catch (const analysis::ClusterClockError& error) {
        throw CliFailure(std::string("stats --clock cluster: ") + error.what());
      }
    } else {
      stats = analysis::compute_stats(reader);
    }
    stats->path = options->trace;
    if (options->json) std::cout << analysis::stats_json(*stats) << "\n";
    else std::cout << analysis::stats_text(*stats);
    std::cout.flush();
  });
}

}  // namespace dpscope::cli
