// dpscope: the command-line entry point. Builds the CLI11 app (app.h), runs the chosen
// subcommand, and turns every failure into one line and a non-zero exit.
#include <iostream>
#include <string>

#include "cli/app.h"

int main(int argc, char** argv) {
  using namespace dpscope::cli;
  const auto app = make_app(CommandMode::Run);
  try {
    app->parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    return app->exit(error);
  } catch (const std::exception& error) {
    // One write: a rank stopped by its launcher while printing still leaves whole lines.
    const std::string line = std::string("dpscope: ") + error.what() + "\n";
    std::cerr.write(line.data(), static_cast<std::streamsize>(line.size()));
    std::cerr.flush();
    return 1;
  }
  return 0;
}
