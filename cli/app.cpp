// make_app (app.h): the dpscope CLI11 app and its subcommands, and binary_dir (commands.h).
#include "cli/app.h"

#include <unistd.h>

#include <climits>

namespace dpscope::cli {

std::string binary_dir() {
  char buffer[PATH_MAX] = {};
  ssize_t n = ::readlink("/proc/self/exe", buffer, sizeof(buffer) - 1);
  if (n <= 0) return ".";
  std::string path(buffer, static_cast<size_t>(n));
  return path.substr(0, path.find_last_of('/'));
}

std::unique_ptr<CLI::App> make_app(CommandMode mode) {
  auto app = std::make_unique<CLI::App>(
      "dpscope: data-parallel training (DDP, FSDP), traced and viewed", "dpscope");
  app->require_subcommand(1);
  add_launch_command(*app, mode);
  add_stats_command(*app, mode);
  add_export_command(*app, mode);
  add_merge_command(*app, mode);
  add_import_command(*app, mode);
  add_synth_command(*app, mode);
  add_view_command(*app, mode);
  add_demo_command(*app, mode);
  add_train_command(*app, mode);
  add_whatif_command(*app, mode);
  return app;
}

}  // namespace dpscope::cli
