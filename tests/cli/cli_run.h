// Running the dpscope command line from a test with its stdout and stderr kept apart, so that a
// test can hold a command to "one line on stderr" and to what it prints on stdout separately.
// Shared by the CLI's tests; header-only.
#pragma once

#include <fstream>
#include <sstream>
#include <string>

#include "tests/test_util.h"

namespace dpscope::testing {

// What one run of dpscope gave back.
struct CliOutcome {
  int exit_code = -1;
  std::string out;  // stdout alone
  std::string err;  // stderr alone
};

// `text` as one shell word, single-quoted.
inline std::string shell_quoted(const std::string& text) {
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// The whole of the file at `path` ("" when it cannot be read).
inline std::string file_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// Runs `dpscope ARGS` (ARGS as the shell reads them), its stderr through a file in `dir`.
inline CliOutcome run_dpscope(const TempDir& dir, const std::string& args) {
  const std::string err_file = dir.file("stderr.txt");
  const auto result = run_command("( " + shell_quoted(dpscope_bin()) + " " + args + " 2>" + shell_quoted(err_file) + " )");
  return CliOutcome{result.exit_code, result.output, file_text(err_file)};
}

}  // namespace dpscope::testing
