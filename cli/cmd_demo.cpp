// dpscope demo: the main job. Until the training engine lands it shows the trace pipeline end to
// end: a synthetic 4-rank DDP trace is written, summarised and exported for Perfetto.
#include <filesystem>
#include <iostream>

#include "cli/commands.h"
#include "cli/progress.h"
#include "trace/export_chrome.h"
#include "trace/reader.h"
#include "trace/stats.h"
#include "trace/synth.h"

namespace dpscope::cli {
namespace {

struct DemoOptions {
  std::string out_dir = "traces/demo";
  int64_t events = 200000;
  int ranks = 4;
};

void run_demo(const DemoOptions& options) {
  std::error_code error;
  std::filesystem::create_directories(options.out_dir, error);
  if (error) {
    throw CliFailure("cannot create " + options.out_dir + ": " + error.message() +
                     " (pass --out DIR)");
  }
  const std::string trace_path = options.out_dir + "/synthetic-ddp.sqlite";
  const std::string chrome_path = options.out_dir + "/synthetic-ddp.json";

  std::cout << "== 1. Recording a synthetic DDP run: " << options.ranks << " ranks, about "
            << options.events << " events\n";
  trace::SynthOptions synth;
  synth.events = options.events;
  synth.ranks = options.ranks;
  synth.out = trace_path;
  auto made =
      trace::synthesize(synth, progress_lines("synth", options.events >= kProgressMinEvents));
  std::cout << "   " << made.events << " events, " << made.iterations << " iterations, "
            << made.params << " parameters in " << made.buckets_initial << " buckets ("
            << made.buckets_rebuilt << " after the rebuild) -> " << trace_path << "\n\n";

  std::cout << "== 2. Its statistics (dpscope stats " << trace_path << ")\n";
  trace::Reader reader(trace_path);
  std::cout << trace::stats_text(trace::compute_stats(reader)) << "\n";

  std::cout << "== 3. Export for Perfetto (dpscope export --chrome)\n";
  auto exported = trace::export_chrome(
      reader, chrome_path, progress_lines("export", made.events >= kProgressMinEvents));
  std::cout << "   " << exported.trace_events << " trace events, " << exported.bytes
            << " bytes -> " << chrome_path << "\n\n";

  std::cout << "Look at it:\n"
            << "  open " << chrome_path << " in https://ui.perfetto.dev (hooks -> buckets -> "
            << "all-reduces are linked by flow arrows)\n"
            << "  sqlite3 " << trace_path << " 'SELECT * FROM events_named LIMIT 20'\n"
            << "  dpscope stats --json " << trace_path << "\n";
}

}  // namespace

void add_demo_command(CLI::App& app) {
  auto* command = app.add_subcommand("demo", "The main job: record, summarise and export a run");
  auto options = std::make_shared<DemoOptions>();
  command->add_option("--out", options->out_dir, "Directory for the traces")
      ->capture_default_str();
  command->add_option("--events", options->events, "Events in the synthetic trace")
      ->check(CLI::Range(int64_t{1}, int64_t{100000000}))
      ->capture_default_str();
  command->add_option("--ranks", options->ranks, "Ranks in the synthetic trace")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  command->callback([options] { run_demo(*options); });
}

}  // namespace dpscope::cli
