// dpscope synth --events N --ranks R --out PATH [--seed S]: writes a synthetic DDP trace
// (formats/synth.h) for viewer tests and benchmarks, with progress on stderr for long runs, and
// prints one summary line at the end.
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>

#include "cli/commands.h"
#include "cli/progress.h"
#include "core/link_options.h"
#include "formats/synth.h"

namespace dpscope::cli {
namespace {


void run_synth(const formats::SynthOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  const formats::SynthResult result = formats::synthesize(
      options, progress_lines("synth", options.events >= kProgressMinEvents));
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("synth: %lld events, %d ranks, %d iterations, %.2f s -> %s\n",
              static_cast<long long>(result.events), options.ranks, result.iterations, seconds,
              options.out.c_str());
}

}  // namespace

void add_synth_command(CLI::App& app, CommandMode mode) {
  auto options = std::make_shared<formats::SynthOptions>();
  CLI::App* command = app.add_subcommand(
      "synth",
      "Write a synthetic DDP trace of about N events over R ranks (viewer tests, benchmarks)");
  command->add_option("--events", options->events, "Events to write (rows of the events table)")
      ->required();
  command->add_option("--ranks", options->ranks, "World size, 1..1024")->required();
  command->add_option("--out", options->out, "The run file to write (replaced if it exists)")
      ->required();
  command->add_option("--seed", options->seed, "Random seed: the same seed gives the same trace")
      ->capture_default_str();
  auto link = std::make_shared<core::LinkFlags>(
      core::LinkFlags{options->link_gbps, options->link_latency_us});
  core::add_link_options(*command, *link, core::LinkUse::Synthesize);
  command->callback([options, link, mode] {
    options->link_gbps = *link->gbps;
    options->link_latency_us = *link->latency_us;
    if (mode == CommandMode::Validate) {
      formats::check_synth_options(*options);
      return;
    }
    run_synth(*options);
  });
}

}  // namespace dpscope::cli
