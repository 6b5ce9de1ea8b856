// `dpscope export --chrome OUT.json TRACE`: writes a trace as Chrome trace event JSON for
// Perfetto or chrome://tracing; progress on stderr for large traces, a summary line on stdout.
#include <cstdio>
#include <functional>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "cli/progress.h"
#include "formats/export_chrome.h"
#include "trace/reader.h"

namespace dpscope::cli {

void add_export_command(CLI::App& app, CommandMode mode) {
  struct Options {
    std::string chrome;
    std::string trace;
  };
  auto options = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("export", "Export a trace to another format");
  cmd->add_option("--chrome", options->chrome,
                  "Write Chrome trace event JSON (open it in ui.perfetto.dev) to this file")
      ->required();
  cmd->add_option("TRACE", options->trace, "A trace file (a rank file or a merged run file)")
      ->required();
  cmd->callback([options, mode] {
    if (mode == CommandMode::Validate) return;  // nothing to check before reading the file
    trace::Reader reader(options->trace);
    const int64_t events = reader.event_count();
    const auto summary = formats::export_chrome(
        reader, options->chrome, progress_lines("export", events >= kProgressMinEvents));
    std::printf("dpscope: wrote %s: %lld trace events from %lld recorded events, %.1f MiB\n",
                options->chrome.c_str(), static_cast<long long>(summary.trace_events),
                static_cast<long long>(events), double(summary.bytes) / double(1 << 20));
  });
}

}  // namespace dpscope::cli
