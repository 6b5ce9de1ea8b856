// read_data_file and find_data_file (data_file.h): the gzip-or-text reading and the search
// for data/ that the digits and the text share.
#include "engine/data/data_file.h"

#include <zlib.h>

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <vector>

namespace dpscope::data {

namespace {

[[noreturn]] void fail(const std::string& what, const std::string& path, const std::string& why) {
  throw std::runtime_error(what + ": " + path + ": " + why);
}

}  // namespace

std::string read_data_file(const std::string& path, const std::string& what) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    fail(what, path,
         "no such file (set DPSCOPE_DATA_DIR to the folder that holds " +
             std::filesystem::path(path).filename().string() + ", or run from the repository)");
  }
  if (std::filesystem::is_directory(path, ec)) fail(what, path, "is a directory, not a file");
  gzFile file = gzopen(path.c_str(), "rb");
  if (!file) fail(what, path, std::string("cannot open: ") + std::strerror(errno));
  const bool compressed = gzdirect(file) == 0;
  std::string text;
  std::vector<char> buffer(1 << 16);
  for (;;) {
    int n = gzread(file, buffer.data(), static_cast<unsigned>(buffer.size()));
    if (n < 0) {
      int code = 0;
      std::string message = gzerror(file, &code);
      gzclose(file);
      fail(what, path, "corrupt gzip data (" + message + "); re-copy the file (data/README.md)");
    }
    if (n == 0) break;
    text.append(buffer.data(), static_cast<size_t>(n));
  }
  // A gzip stream cut short reads as a clean end; gzclose_r reports it.
  int rc = gzclose(file);
  if (rc != Z_OK && rc != Z_BUF_ERROR) fail(what, path, "error closing the gzip stream");
  if (rc == Z_BUF_ERROR) fail(what, path, "the gzip stream is truncated; re-copy the file");
  if (!compressed) {
    for (size_t i = 0; i < text.size(); ++i) {
      auto c = static_cast<unsigned char>(text[i]);
      if (c < 0x20 && c != '\n' && c != '\r' && c != '\t') {
        fail(what, path,
             "not a gzip file and not text (binary byte 0x" +
                 std::string(1, "0123456789abcdef"[c >> 4]) +
                 std::string(1, "0123456789abcdef"[c & 15]) + " at offset " + std::to_string(i) +
                 ")");
      }
    }
  }
  return text;
}

std::string find_data_file(const std::string& name, const std::string& what) {
  namespace fs = std::filesystem;
  std::vector<fs::path> candidates;
  if (const char* dir = std::getenv("DPSCOPE_DATA_DIR"); dir && *dir) {
    candidates.push_back(fs::path(dir) / name);
  }
  std::error_code ec;
  fs::path cwd = fs::current_path(ec);
  if (!ec) candidates.push_back(cwd / "data" / name);
  char exe[4096];
  ssize_t len = ::readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (len > 0) {
    exe[len] = '\0';
    candidates.push_back(fs::path(exe).parent_path() / ".." / ".." / "data" / name);
  }
  // The source tree this file was compiled from (engine/data/data_file.cpp -> data/).
  candidates.push_back(fs::path(__FILE__).parent_path() / ".." / ".." / "data" / name);
  std::string looked;
  for (const fs::path& p : candidates) {
    if (fs::is_regular_file(p, ec)) return p.lexically_normal().string();
    looked += "\n  " + p.lexically_normal().string();
  }
  throw std::runtime_error(what + ": cannot find " + name + "; looked in:" + looked +
                           "\nset DPSCOPE_DATA_DIR to the folder that holds it (data/README.md "
                           "says where it comes from)");
}

}  // namespace dpscope::data
