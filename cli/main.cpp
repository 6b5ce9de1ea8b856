// dpscope: the command-line entry point. Builds the CLI11 app from the subcommands declared in
// commands.h, runs the chosen one, and turns every failure into one line and a non-zero exit.
#include <unistd.h>

#include <climits>
#include <iostream>

#include "cli/commands.h"
#include "trace/error.h"

namespace dpscope::cli {

std::string binary_dir() {
  char buffer[PATH_MAX] = {};
  ssize_t n = ::readlink("/proc/self/exe", buffer, sizeof(buffer) - 1);
  if (n <= 0) return ".";
  std::string path(buffer, static_cast<size_t>(n));
  return path.substr(0, path.find_last_of('/'));
}

}  // namespace dpscope::cli

int main(int argc, char** argv) {
  using namespace dpscope::cli;
  CLI::App app{"dpscope: data-parallel training (DDP, FSDP), traced and viewed", "dpscope"};
  app.require_subcommand(1);
  add_launch_command(app);
  add_stats_command(app);
  add_export_command(app);
  add_merge_command(app);
  add_synth_command(app);
  add_view_command(app);
  add_demo_command(app);
  add_train_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    return app.exit(error);
  } catch (const std::exception& error) {
    std::cerr << "dpscope: " << error.what() << "\n";
    return 1;
  }
  return 0;
}
