// dpscope-view TRACE | PROFILER.json[.gz]... [--compare TRACE2] [--live] [--clock measured|cluster] [--screenshot PNG
// --frames N [--zoom-sweep]]:
// the desktop viewer of dpscope traces (docs/viewer.md). The command line only: the window and
// its loops are window.h's. Errors are printed as one line, with exit status 1.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "analysis/clock_choice.h"
#include "core/link_options.h"
#include "formats/kineto_import.h"
#include "trace/vocabulary.h"
#include "viewer/window.h"

namespace {

using namespace dpscope::view;
namespace trace = dpscope::trace;
namespace core = dpscope::core;

// The traces to open: one dpscope trace, or PyTorch profiler files (one per rank).
void add_trace_options(CLI::App& cli, AppOptions& options, std::vector<std::string>& paths) {
  cli.add_option("TRACE", paths,
                 "The trace file (a merged run file or a rank file), or PyTorch profiler traces "
                 "(.json, .json.gz, one per rank), imported into a temporary run file first")
      ->required();
  cli.add_option("--compare", options.compare_path, "A second trace drawn under the first, aligned on iterations");
  cli.add_flag("--live", options.live, "Follow a trace that a running training is still writing");
}

// How the window looks, windowed or not.
void add_look_options(CLI::App& cli, AppOptions& options, std::string& theme_name) {
  cli.add_option("--theme", theme_name,
                 "dark | projector (dark text on light ground, for a projector or a lit room; T "
                 "switches in the window)")
      ->check(CLI::IsMember({to_string(ThemeKind::Dark), to_string(ThemeKind::Projector)}))
      ->capture_default_str();
  cli.add_option("--font-scale", options.font_scale,
                 "Text size, times the 13 px font (default: the screen's content scale; Ctrl +/- "
                 "change it in the window)")
      ->check(CLI::Range(double(kMinFontScale), double(kMaxFontScale)));
  cli.add_option_function<std::string>(
         "--size",
         [&options](const std::string& size) {
           int width = 0, height = 0;
           char end = 0;
           if (std::sscanf(size.c_str(), "%dx%d%c", &width, &height, &end) != 2 || width < 320 || height < 240 ||
               width > 8192 || height > 8192) {
             throw CLI::ValidationError("--size", "give WIDTHxHEIGHT in pixels, from 320x240 to 8192x8192 (as 1600x1000), not '" +
                                                      size + "'");
           }
           options.window_width = width;
           options.window_height = height;
         },
         "The window's size in pixels, WIDTHxHEIGHT (default 1280x800; a projector's 1600x1000, say)");
}

// --screenshot and what it draws; returns --screenshot, which the others need.
CLI::Option* add_screenshot_options(CLI::App& cli, HeadlessOptions& headless) {
  auto* screenshot = cli.add_option("--screenshot", headless.png,
                                    "Headless: draw --frames frames, write the last as this PNG, print one JSON line, exit");
  cli.add_option("--frames", headless.frames,
                 "Frames to draw with --screenshot (at least 3, what a finished layout needs)")
      ->needs(screenshot)
      ->check(CLI::PositiveNumber);
  cli.add_flag("--zoom-sweep", headless.zoom_sweep, "With --screenshot: sweep the zoom from the whole run to one bucket")
      ->needs(screenshot);
  return screenshot;
}

// The picture of one moment: folded ranks, the legend, one iteration's step.
void add_moment_options(CLI::App& cli, HeadlessOptions& headless, CLI::Option* screenshot) {
  cli.add_option("--fold", headless.folded,
                 "With --screenshot: fold these ranks' lane groups (indices, comma-separated), so "
                 "that the others fit")
      ->delimiter(',')
      ->needs(screenshot)
      ->check(CLI::NonNegativeNumber);
  cli.add_flag("--legend", headless.legend, "With --screenshot: the legend window open")->needs(screenshot);
  cli.add_flag("--critical-path", headless.critical_path,
               "With --screenshot: the narrated iteration's critical path drawn, as K does (docs/critical-path.md)")
      ->needs(screenshot);
  cli.add_flag("--fold-lanes", headless.fold_lanes,
               "With --screenshot: fold every rank's secondary lanes (FSDP units, every comm lane but the busiest), as U does")
      ->needs(screenshot);
  auto* iteration = cli.add_option("--iteration", headless.iteration,
                                   "With --screenshot: show this iteration, the playhead on its first step")
                        ->needs(screenshot)
                        ->excludes("--zoom-sweep")
                        ->check(CLI::NonNegativeNumber);
  cli.add_option("--step", headless.step,
                 "With --iteration: the playhead on this step of it (from 0, the first hook, bucket, "
                 "collective or unit event; the narration line says which)")
      ->needs(iteration)
      ->check(CLI::NonNegativeNumber);
  cli.add_option("--rank", headless.rank, "With --iteration: whose iteration and steps (default 0)")
      ->needs(iteration)
      ->check(CLI::NonNegativeNumber);
  cli.add_option_function<std::string>(
         "--run", [&headless](const std::string& run) { headless.run = run == "B" || run == "b" ? 1 : 0; },
         "With --iteration and --compare: the run whose iteration and steps are shown, A (default) or B, "
         "as Tab switches in the window")
      ->needs(iteration)
      ->needs("--compare")
      ->check(CLI::IsMember({"A", "B", "a", "b"}));
}

// --clock and the cluster clock's link, as given.
struct ClockFlags {
  std::string clock = std::string(dpscope::analysis::to_string(dpscope::analysis::Clock::Measured));
  core::LinkFlags link;

  void add_to(CLI::App& cli) {
    namespace analysis = dpscope::analysis;
    cli.add_option("--clock", clock,
                   std::string("The clock the timelines, memory graphs and stats are on: ") +
                       std::string(analysis::to_string(analysis::Clock::Measured)) +
                       " (this machine's) | " + std::string(analysis::to_string(analysis::Clock::Cluster)) +
                       " (the run replayed as a cluster would run it, docs/cluster-clock.md; C "
                       "switches in the window)")
        ->capture_default_str();
    core::add_link_options(cli, link, core::LinkUse::ClusterClock);
  }

  // Sets options.clock and options.link; throws std::invalid_argument saying what to change.
  void apply(AppOptions& options) const {
    namespace analysis = dpscope::analysis;
    const std::optional<analysis::Clock> parsed = analysis::parse_clock(clock);
    if (!parsed) {
      throw std::invalid_argument("--clock " + clock + ": choose " +
                                  std::string(analysis::to_string(analysis::Clock::Measured)) + " or " +
                                  std::string(analysis::to_string(analysis::Clock::Cluster)));
    }
    options.clock = *parsed;
    options.link = link.checked();
  }
};

// The --whatif-* flags as given: DDP's or FSDP's, never both.
struct WhatifFlags {
  WhatifRequest request;
  std::string backward_prefetch;
  int limit_all_gathers = 0;
  CLI::Option* cap = nullptr;
  CLI::Option* prefetch = nullptr;
  CLI::Option* limit = nullptr;

  void add_to(CLI::App& cli) {
    cap = cli.add_option("--whatif-cap-mb", request.bucket_cap_mb,
                         "A DDP trace's what-if lanes for this bucket cap (MiB): the replay of "
                         "`dpscope whatif` drawn under each rank (the What-if tab changes it)")
              ->check(CLI::PositiveNumber);
    cli.add_option("--whatif-first-bucket-mb", request.first_bucket_mb,
                   "With --whatif-cap-mb: the first bucket's cap (MiB; default: as recorded)")
        ->needs(cap)
        ->check(CLI::PositiveNumber);
    std::vector<std::string> modes;
    std::string help = "An FSDP trace's what-if lanes for this backward prefetch: ";
    for (const trace::BackwardPrefetch mode : trace::kBackwardPrefetches) {
      help += std::string(modes.empty() ? "" : " | ") + std::string(trace::to_string(mode));
      modes.emplace_back(trace::to_string(mode));
    }
    prefetch = cli.add_option("--whatif-backward-prefetch", backward_prefetch, help)
                   ->check(CLI::IsMember(modes))
                   ->excludes(cap);
    limit = cli.add_option("--whatif-limit-all-gathers", limit_all_gathers,
                           "With an FSDP trace: the what-if all-gather limit (0: none)")
                ->check(CLI::NonNegativeNumber)
                ->excludes(cap);
  }

  // The lanes to predict at start, if any was asked for (after parsing).
  std::optional<WhatifRequest> requested() const {
    WhatifRequest out = request;
    if (cap->count()) {
      out.settings = WhatifSettings::Ddp;
      return out;
    }
    if (!prefetch->count() && !limit->count()) return std::nullopt;
    out.settings = WhatifSettings::Fsdp;
    if (prefetch->count()) out.backward_prefetch = trace::parse_mode(trace::kBackwardPrefetches, backward_prefetch);
    if (limit->count()) out.limit_all_gathers = limit_all_gathers;
    return out;
  }
};

int fail(const std::string& message) {
  std::fprintf(stderr, "dpscope-view: %s\n", message.c_str());
  return 1;
}

// The file to open: the one dpscope trace given, or a temporary run imported from the profiler
// files given (docs/kineto.md), kept in `imported` for as long as the window is open.
std::string trace_to_open(const std::vector<std::string>& paths,
                          std::optional<dpscope::formats::TemporaryImport>& imported) {
  size_t profiler_files = 0;
  for (const std::string& p : paths) profiler_files += dpscope::formats::is_kineto_file_name(p) ? 1 : 0;
  if (profiler_files == 0 && paths.size() == 1) return paths[0];
  if (profiler_files != paths.size()) {
    throw std::invalid_argument("give one dpscope trace, or PyTorch profiler traces (.json, .json.gz) only");
  }
  imported.emplace(paths, [](const std::string& line) { std::fprintf(stderr, "dpscope-view: warning: %s\n", line.c_str()); });
  return imported->path();
}

// The profiler files the viewer imported, as the header names them: "profiler: a.json.gz, b.json.gz".
std::string imported_name(const std::vector<std::string>& paths) {
  std::string name = "profiler:";
  for (size_t i = 0; i < paths.size(); ++i) name += (i ? ", " : " ") + paths[i];
  return name;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App cli{"dpscope-view: the desktop viewer of dpscope traces"};
  AppOptions options;
  std::vector<std::string> paths;
  std::optional<dpscope::formats::TemporaryImport> imported;
  HeadlessOptions headless;
  std::string theme_name = to_string(ThemeKind::Dark);
  WhatifFlags whatif;
  ClockFlags clock;
  add_trace_options(cli, options, paths);
  clock.add_to(cli);
  CLI::Option* screenshot = add_screenshot_options(cli, headless);
  add_look_options(cli, options, theme_name);
  add_moment_options(cli, headless, screenshot);
  whatif.add_to(cli);
  try {
    cli.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return cli.exit(e);
  }
  options.whatif = whatif.requested();
  try {
    clock.apply(options);
    options.path = trace_to_open(paths, imported);
    if (imported) options.shown_name = imported_name(paths);
  } catch (const std::exception& e) {
    return fail(e.what());
  }
  parse_theme(theme_name, &options.theme);
  try {
    return headless.png.empty() ? run_windowed(options) : run_headless(options, headless);
  } catch (const std::exception& e) {
    return fail(e.what());
  }
}
