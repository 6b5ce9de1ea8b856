// dpscope merge OUT RANKFILES...: joins the rank files of one run into one run file.
#include <iostream>

#include "cli/commands.h"
#include "cli/progress.h"
#include "trace/merge.h"

namespace dpscope::cli {

void add_merge_command(CLI::App& app, CommandMode mode) {
  auto* command = app.add_subcommand("merge", "Join the rank files of one run into one run file");
  auto out = std::make_shared<std::string>();
  auto inputs = std::make_shared<std::vector<std::string>>();
  command->add_option("OUT", *out, "The run file to write (replaced if it exists)")->required();
  command->add_option("RANKFILES", *inputs, "The rank files (or merged files) to join")
      ->required();
  command->callback([out, inputs, mode] {
    if (mode == CommandMode::Validate) {
      trace::check_merge_arguments(*inputs, *out);
      return;
    }
    auto result = trace::merge_traces(*inputs, *out, progress_lines("merge", inputs->size() > 1));
    std::cout << "merged " << result.ranks << " ranks, " << result.events << " events into "
              << *out << "\n";
    if (result.dropped_events > 0) {
      std::cout << "warning: " << result.dropped_events
                << " events were dropped while recording (see ranks.dropped_events)\n";
    }
  });
}

}  // namespace dpscope::cli
