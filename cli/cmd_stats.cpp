// `dpscope stats [--clock measured|cluster [--link-gbps G --link-latency-us L]
// [--compute-time steady|recorded]] [--critical-path [--iteration N | --annotation NAME
// --instance K]] [--json] TRACE`:
// the run statistics of a trace file, as the readable report or as the JSON object of
// docs/trace-format.md ("dpscope stats --json"), on stdout, on this machine's measured clock or
// on the cluster clock (docs/cluster-clock.md), and a region's critical path
// (docs/critical-path.md).
#include <iostream>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "analysis/clock_choice.h"
#include "analysis/cluster_clock.h"
#include "analysis/critical_path.h"
#include "analysis/critical_path_report.h"
#include "analysis/hang.h"
#include "analysis/hang_report.h"
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
  bool critical_path = false;
  std::optional<int32_t> iteration;
  std::optional<std::string> annotation;
  std::optional<int64_t> instance;
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

// The critical path's region, or nullopt without --critical-path. Throws CliFailure naming the
// option that does not fit.
std::optional<analysis::RegionRequest> checked_region(const StatsOptions& o) {
  if (!o.critical_path) {
    if (o.iteration || o.annotation || o.instance) {
      throw CliFailure("stats: --iteration, --annotation and --instance choose the critical path's region: "
                       "add --critical-path");
    }
    return std::nullopt;
  }
  analysis::RegionRequest region;
  if (o.iteration && o.annotation) {
    throw CliFailure("stats: --iteration and --annotation each choose a region: give one of them");
  }
  if (o.instance && !o.annotation) {
    throw CliFailure("stats: --instance counts an annotation's instances: add --annotation NAME");
  }
  if (o.iteration && *o.iteration < 0) {
    throw CliFailure("stats: --iteration " + std::to_string(*o.iteration) + " is negative: iterations count from 0");
  }
  if (o.instance && *o.instance < 0) {
    throw CliFailure("stats: --instance " + std::to_string(*o.instance) + " is negative: instances count from 0");
  }
  if (o.annotation) {
    region.kind = analysis::RegionKind::Annotation;
    region.annotation = *o.annotation;
    region.instance = o.instance.value_or(0);
  }
  region.iteration = o.iteration;
  return region;
}

// The report, or with --json the contract's object with `hang` (null for a run whose
// collectives all completed) and `critical_path` added last (docs/trace-format.md).
void print_stats(const analysis::RunStats& stats, const std::optional<analysis::HangReport>& hang,
                 const std::optional<analysis::CriticalPath>& critical, bool json_wanted) {
  if (json_wanted) {
    std::string json = analysis::stats_json(stats);
    json.pop_back();
    json += ",\"hang\":" + analysis::hang_json(hang).dump(-1, ' ', false,
                nlohmann::ordered_json::error_handler_t::replace);
    if (critical) {
      json += ",\"critical_path\":" + analysis::critical_path_json(*critical).dump(-1, ' ', false,
                  nlohmann::ordered_json::error_handler_t::replace);
    }
    std::cout << json << "}\n";
  } else {
    std::cout << analysis::stats_text(stats);
    if (hang) std::cout << "\n" << analysis::hang_text(hang);
    if (critical) std::cout << "\n" << analysis::critical_path_text(*critical);
  }
}

void add_critical_path_options(CLI::App& cmd, StatsOptions& options) {
  cmd.add_flag("--critical-path", options.critical_path,
               "Also the critical path of a step (dpscope's runs: on the cluster clock; imported "
               "profiler traces: HTA's graph): its length, its time by what bounds it, its 10 "
               "longest events (docs/critical-path.md)");
  cmd.add_option("--iteration", options.iteration,
                 "The critical path's iteration (default: the first steady one)");
  cmd.add_option("--annotation", options.annotation,
                 "The critical path's region: an event whose name begins with NAME (HTA's "
                 "annotation; ProfilerStep matches every step; \"\": the whole trace)");
  cmd.add_option("--instance", options.instance,
                 "Which of --annotation's events, from 0 by begin (HTA's instance_id; default 0)");
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
  add_critical_path_options(*cmd, *options);
  cmd->add_option("TRACE", options->trace,
                  "A trace file (a rank file or a merged run file), or one PyTorch profiler file "
                  "(.json or .json.gz, imported as dpscope-view imports it; dpscope import keeps a run "
                  "of several)")
      ->required();
  cmd->callback([options, mode] {
    const CheckedClock checked = checked_clock(*options);
    const std::optional<analysis::RegionRequest> region = checked_region(*options);
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
    std::optional<analysis::CriticalPath> critical;
    if (region) {
      try {
        critical = analysis::critical_path(reader, options->trace, *region, checked.link, checked.compute);
      } catch (const analysis::CriticalPathError& error) {
        throw CliFailure(std::string("stats --critical-path: ") + error.what());
      }
    }
    print_stats(*stats, analysis::analyze_hang(reader), critical, options->json);
    std::cout.flush();
  });
}

}  // namespace dpscope::cli
