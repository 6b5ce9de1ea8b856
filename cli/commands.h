// The dpscope subcommands: each file cli/cmd_<name>.cpp adds one subcommand to the app and runs
// it. A command reports failure by throwing (TraceError or CliFailure); main() prints the
// message on one line and exits non-zero.
#pragma once

#include <CLI/CLI.hpp>
#include <stdexcept>
#include <string>

namespace dpscope::cli {

// An error the user caused (bad arguments, a file that cannot be read): one line, exit 1.
class CliFailure : public std::runtime_error {
 public:
  explicit CliFailure(const std::string& message) : std::runtime_error(message) {}
};

// The directory of the running dpscope binary (to find dpscope-view and friends beside it).
std::string binary_dir();

// What a subcommand's callback does once CLI11 has parsed its arguments.
enum class CommandMode {
  Run,       // run the command: the dpscope binary
  Validate,  // make every check of the arguments that Run makes before it starts (ranges, the
             // launcher's options, the training configuration), then return: no process
             // started, no file read or written, no training (the CLI fuzzer, tests/cli)
};

void add_launch_command(CLI::App& app, CommandMode mode);  // launch -n N -- PROGRAM ARGS...
void add_stats_command(CLI::App& app, CommandMode mode);   // stats [--json] TRACE
void add_export_command(CLI::App& app, CommandMode mode);  // export --chrome OUT.json TRACE
void add_merge_command(CLI::App& app, CommandMode mode);   // merge OUT RANKFILES...
void add_import_command(CLI::App& app, CommandMode mode);  // import FILES... -o RUN: Kineto traces
void add_synth_command(CLI::App& app, CommandMode mode);   // synth --events N --ranks R --out PATH
void add_view_command(CLI::App& app, CommandMode mode);    // view TRACE
void add_demo_command(CLI::App& app, CommandMode mode);    // demo
void add_train_command(CLI::App& app, CommandMode mode);   // train [options]: one rank of a run
void add_whatif_command(CLI::App& app, CommandMode mode);  // whatif TRACE: another bucket plan

}  // namespace dpscope::cli
