// Helpers shared by the test suites: a temporary directory per test, and running a command
// line while capturing its output and exit status.
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace dpscope::testing {

// A fresh directory under $TMPDIR, removed with everything in it when the object dies.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "dpscope-test-XXXXXX").string();
    path_ = ::mkdtemp(pattern.data());
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

struct CommandResult {
  int exit_code = -1;  // the exit status, or 128 + signal when killed
  std::string output;  // stdout and stderr together
};

// Runs `command` through /bin/sh with stderr folded into stdout.
inline CommandResult run_command(const std::string& command) {
  CommandResult result;
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (!pipe) return result;
  char buffer[4096];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0) result.output.append(buffer, n);
  int status = ::pclose(pipe);
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  else if (WIFSIGNALED(status)) result.exit_code = 128 + WTERMSIG(status);
  return result;
}

inline std::string dpscope_bin() { return std::string(DPSCOPE_BIN_DIR) + "/dpscope"; }

// A TCP port free on 127.0.0.1 right now (for MASTER_PORT of ranks started by hand).
inline int free_port() {
  return std::stoi(run_command("/usr/bin/python3 -c 'import socket; s=socket.socket(); "
                               "s.bind((\"127.0.0.1\", 0)); print(s.getsockname()[1])'")
                       .output);
}

// Writes `bytes` to `path`, replacing what was there (a small hand-made input file).
inline void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out << bytes;
}

// The whole content of a text file ("" if it cannot be read).
inline std::string read_text(const std::string& path) { return run_command("cat " + path).output; }

}  // namespace dpscope::testing
