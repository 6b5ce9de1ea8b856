// The dpscope command line as a CLI11 app: every subcommand of commands.h, built the same way for
// the dpscope binary (main.cpp, CommandMode::Run) and for parsing only (CommandMode::Validate:
// the CLI fuzzer in tests/fuzz and tests/cli).
#pragma once

#include <CLI/CLI.hpp>
#include <memory>

#include "cli/commands.h"

namespace dpscope::cli {

// The app with every subcommand; exactly one must be given. Parse it with app->parse(argc, argv):
// the chosen subcommand's callback runs (or, in Validate mode, only checks its arguments). Errors
// are thrown: CLI::ParseError for the command line's syntax (app->exit(error) prints it), and
// CliFailure, trace::TraceError or std::invalid_argument for values a command refuses.
std::unique_ptr<CLI::App> make_app(CommandMode mode);

}  // namespace dpscope::cli
