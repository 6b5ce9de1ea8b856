// Fuzz target: dpscope's command-line parsing. The input is split into argv (one argument per
// line, or at NUL bytes) and parsed by the real CLI11 app in CommandMode::Validate, which checks
// every argument as `dpscope` does but runs nothing. Allowed outcomes: success or the errors
// main() reports in one line (CLI::ParseError, CliFailure, TraceError, std::invalid_argument).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "cli/app.h"
#include "trace/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 4096) return 0;
  std::vector<std::string> args{"dpscope"};
  std::string current;
  for (size_t i = 0; i < size; ++i) {
    const char c = static_cast<char>(data[i]);
    if (c == '\n' || c == '\0') {
      args.push_back(current);
      current.clear();
    } else {
      current += c;
    }
  }
  if (!current.empty()) args.push_back(current);
  if (args.size() > 64) return 0;
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);

  using namespace dpscope;
  const auto app = cli::make_app(cli::CommandMode::Validate);
  try {
    app->parse(static_cast<int>(args.size()), argv.data());
  } catch (const CLI::ParseError& error) {
    // What main() prints for it (help and version text included) must render.
    std::string text = error.what();
    (void)text;
  } catch (const cli::CliFailure& error) {
    if (std::string(error.what()).find('\n') != std::string::npos) std::abort();
  } catch (const trace::TraceError& error) {
    if (std::string(error.what()).find('\n') != std::string::npos) std::abort();
  } catch (const std::invalid_argument& error) {
    if (std::string(error.what()).find('\n') != std::string::npos) std::abort();
  }
  return 0;
}
