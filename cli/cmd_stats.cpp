// `dpscope stats [--json] TRACE`: the run statistics of a trace file, as the readable report or
// as the JSON object of docs/trace-format.md ("dpscope stats --json"), on stdout.
#include <iostream>
#include <memory>
#include <string>

#include "analysis/stats.h"
#include "analysis/stats_report.h"
#include "cli/commands.h"
#include "trace/reader.h"

namespace dpscope::cli {

void add_stats_command(CLI::App& app, CommandMode mode) {
  struct Options {
    std::string trace;
    bool json = false;
  };
  auto options = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("stats", "Print run statistics of a trace (or --json)");
  cmd->add_flag("--json", options->json,
                "One JSON object (the documented contract) instead of the report");
  cmd->add_option("TRACE", options->trace, "A trace file (a rank file or a merged run file)")
      ->required();
  cmd->callback([options, mode] {
    if (mode == CommandMode::Validate) return;  // nothing to check before reading the file
    // Everything is computed before anything is printed: a file that fails to read leaves
    // stdout empty and main() prints its one-line error.
    trace::Reader reader(options->trace);
    const analysis::RunStats stats = analysis::compute_stats(reader);
    if (options->json) std::cout << analysis::stats_json(stats) << "\n";
    else std::cout << analysis::stats_text(stats);
    std::cout.flush();
  });
}

}  // namespace dpscope::cli
