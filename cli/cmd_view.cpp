// dpscope view TRACE [VIEWER ARGS...]: starts dpscope-view, the desktop viewer, from beside the
// dpscope binary, after checking that the trace opens (PyTorch profiler files, which the viewer
// imports itself, are passed on as they are).
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "cli/commands.h"
#include "formats/kineto_import.h"
#include "trace/reader.h"

namespace dpscope::cli {

void add_view_command(CLI::App& app, CommandMode mode) {
  auto* command = app.add_subcommand("view", "Open a trace in dpscope-view, the desktop viewer");
  auto args = std::make_shared<std::vector<std::string>>();
  command->add_option("TRACE", *args, "The trace file, then any dpscope-view options")
      ->required();
  command->allow_extras();
  command->callback([command, args, mode] {
    if (mode == CommandMode::Validate) return;  // the viewer checks its own options
    // Fail here, with the reader's message, rather than in a window.
    if (!formats::is_kineto_file_name((*args)[0])) trace::Reader check((*args)[0]);
    const std::string viewer = binary_dir() + "/dpscope-view";
    if (::access(viewer.c_str(), X_OK) != 0) {
      throw CliFailure("dpscope-view was not found at " + viewer +
                       "; it is built when GLFW and Dear ImGui are installed (run scripts/setup)");
    }
    std::vector<std::string> argv_strings{viewer};
    argv_strings.insert(argv_strings.end(), args->begin(), args->end());
    for (const auto& extra : command->remaining()) argv_strings.push_back(extra);
    std::vector<char*> argv;
    for (auto& s : argv_strings) argv.push_back(s.data());
    argv.push_back(nullptr);
    ::execv(viewer.c_str(), argv.data());
    throw CliFailure("cannot start " + viewer + ": " + std::strerror(errno));
  });
}

}  // namespace dpscope::cli
